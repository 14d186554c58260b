# What every tool does with its report when the disk is full or the reader is gone, and when
# its terminal hangs up: the report writers (--json-file, rdma_pingmesh's --prom-file,
# rdma_smoke's --junit) on a full file system say so in one line and exit 1, the previous
# file intact and nothing left beside it; SIGHUP ends a run as SIGTERM does (exit 129, the
# partial report); a closed standard output is said, not a silent death by SIGPIPE.

# expect_kept FILE TEXT: FILE still holds TEXT.
expect_kept() {
  [[ $(cat "$1") == "$2" ]] || fail "$1 was not kept: $(head -c 200 "$1")"
}

# send_bw_report_to NAME FILE: our send_bw server and client, the client's report to FILE
# (--json-file); RC is the client's exit.
send_bw_report_to() {
  next_port
  start "$1_server" "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --accept-timeout 20
  wait_listening "$PORT"
  run "$1" 30 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -n 200 --json-file "$2"
  local client_rc=$RC
  finish "$1_server" 15
  RC=$client_rc
}

# ctest: integration
case_reports_full_disk() {
  require_device
  require_root
  local full=$T/full
  mkdir -p "$full"
  mount -t tmpfs -o size=64k,nr_inodes=64 rdmakit_full "$full" || fail "mount a small tmpfs"
  restore "umount $full"
  echo '{"previous": "report"}' > "$full/r.json"
  echo '# previous metrics' > "$full/m.prom"
  echo '<previous/>' > "$full/j.xml"
  dd if=/dev/zero of="$full/filler" bs=4096 2> /dev/null
  # send_bw: the run went well, its report could not be kept.
  send_bw_report_to client "$full/r.json"
  expect_rc 1 "send_bw --json-file on a full file system"
  expect_grep "^send_bw: cannot write $full/r.json: write: No space left on device ($full/r.json is as it was)\$" client.err
  [[ $(grep -c 'cannot write' "$T/client.err") -eq 1 ]] || fail "not one line: $(cat "$T/client.err")"
  expect_kept "$full/r.json" '{"previous": "report"}'
  # rdma_pingmesh: the textfile fails every window, said once, and the run fails at the end.
  next_port
  pingmesh_pinglist pinglist node-a "$RXE_ADDR" node-b "$RXE_ADDR2"
  run pingmesh 30 "$OURS_PINGMESH" --pinglist "$T/pinglist" --name node-a -p "$PORT" --window 1 --duration 3 \
    --prom-file "$full/m.prom" --json
  expect_rc 1 "rdma_pingmesh --prom-file on a full file system"
  [[ $(grep -c "cannot write $full/m.prom" "$T/pingmesh.err") -eq 2 ]] ||
    fail "the failure is not said once when it starts and once at the end: $(cat "$T/pingmesh.err")"
  tail -n 1 "$T/pingmesh.out" > "$T/pingmesh.report"
  expect_jq '.outcome == "failed" and .exit_code == 1 and (.errors[0].message | contains("No space left on device"))' \
    pingmesh.report
  expect_kept "$full/m.prom" '# previous metrics'
  # rdma_smoke --junit.
  next_port
  run smoke 120 "$OURS_SMOKE" "$RXE_ADDR" -p "$PORT" --tools rping --junit "$full/j.xml"
  expect_rc 1 "rdma_smoke --junit on a full file system"
  expect_grep "^rdma_smoke: --junit: cannot write $full/j.xml: write: No space left on device" smoke.err
  expect_kept "$full/j.xml" '<previous/>'
  # Nothing half written is left beside them.
  [[ $(find "$full" -mindepth 1 | wc -l) -eq 4 ]] || fail "left in $full: $(ls -A "$full")"
  # With room again, the same report replaces the old one whole.
  rm "$full/filler"
  send_bw_report_to client2 "$full/r.json"
  expect_rc 0 "send_bw --json-file with room"
  expect_jq '.outcome == "completed"' full/r.json
}

# ctest: integration
case_reports_stop_signals() {
  require_device
  # SIGHUP (a closed terminal or ssh session): the waiting server stops with its report.
  next_port
  start server "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --accept-timeout 60 --json
  wait_listening "$PORT"
  kill -HUP "$PID_server"
  finish server 15
  expect_rc 129 "send_bw server after SIGHUP"
  expect_jq '.outcome == "interrupted" and .exit_code == 129' server.out
  # The reader of standard output gone before the report: said, exit 1, no death by SIGPIPE.
  python3 -c 'import os, subprocess, sys
r, w = os.pipe()
os.close(r)
sys.exit(subprocess.call(sys.argv[1:], stdout=w))' "$OURS_DIAG" "$RXE_ADDR" --json > /dev/null 2> "$T/epipe.err"
  RC=$?
  expect_rc 1 "diag-bind --json into a closed pipe"
  expect_grep '^diag-bind: cannot write the report to standard output: the reader closed it (EPIPE)$' epipe.err
}
