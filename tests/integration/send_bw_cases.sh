# send_bw cases: each operation ours with ours, a sweep whose JSON is checked row by row,
# bad inputs as usage errors, a missing peer ending within the timeout.

# Every row positive and consistent: bytes x iterations / seconds = the reported average
# (MiB/s, perftest's MB/sec).
BW_ROWS_CONSISTENT='.rows | length > 0 and all(.bytes > 0 and .iterations > 0 and .seconds > 0
  and .bw_average_mib_per_s > 0 and .bw_peak_mib_per_s >= .bw_average_mib_per_s * 0.999
  and (((.bytes * .iterations / .seconds / 1048576) - .bw_average_mib_per_s) | fabs) <= 1e-6 * .bw_average_mib_per_s + 1e-9
  and (((.iterations / .seconds / 1e6) - .message_rate_mpps) | fabs) <= 1e-6 * .message_rate_mpps + 1e-12)'

# send_bw_pair SERVER CLIENT SECONDS CLIENT_ARGS...: our server (SERVER.out) on a fresh port,
# then our client (CLIENT.out) against it with CLIENT_ARGS and --json; both must exit 0.
send_bw_pair() {
  send_bw_pair_with "" "$@"
}

# send_bw_pair_with SERVER_FLAGS SERVER CLIENT SECONDS CLIENT_ARGS...: send_bw_pair with the
# server also given SERVER_FLAGS (words split on spaces, e.g. "-e --cpu-util").
send_bw_pair_with() {
  local server_flags server=$2 client=$3 seconds=$4
  read -r -a server_flags <<< "$1"
  shift 4
  next_port
  start "$server" "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --json --accept-timeout 20 "${server_flags[@]}"
  wait_listening "$PORT"
  run "$client" "$seconds" "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" "$@" --json
  expect_rc 0 "send_bw $*"
  finish "$server" 15
  expect_rc 0 "send_bw server ${server_flags[*]} for $*"
  # The client's disconnect flushes the server's receives, which ends its stream at once:
  # not at the drain's one-second bound (rdma_disconnect leaves a QP of the server's own in RTS).
  if grep -q "did not flush" "$T/$server.err"; then fail "$server: $(grep "did not flush" "$T/$server.err")"; fi
}

# ctest: integration sanitized quick
case_send_bw_operations() {
  require_device
  local op mode
  for op in send write read; do
    send_bw_pair "server_$op" "client_$op" 60 --op "$op" -s 4096 -n 2000
    expect_jq "$BW_ROWS_CONSISTENT" "client_$op.out"
    expect_jq ".outcome == \"completed\" and (.rows | length == 1) and .rows[0].bytes == 4096
      and .rows[0].iterations == 2000 and .test.operation == \"$op\"" "client_$op.out"
    # Only SEND leaves the server completions to reap; for the others it sleeps on its CQ.
    mode=events
    [[ $op == send ]] && mode=poll
    expect_jq ".outcome == \"completed\" and .test.operation == \"$op\" and .test.completion == \"$mode\"" "server_$op.out"
    expect_schema send_bw "client_$op.out"
    expect_schema send_bw "server_$op.out"
    note "--op $op 4 KiB: $(jq -c '.rows[0] | {bw_average_mib_per_s, message_rate_mpps}' "$T/client_$op.out")"
  done
  # The server counts what arrived for SEND: 2000 measured + 100 warm-up messages.
  expect_jq "$BW_ROWS_CONSISTENT" server_send.out
  expect_jq '.rows | length == 1 and .[0].iterations == 2100 and .[0].bytes == 4096' server_send.out
  # Small messages go inline where the device allows.
  expect_jq '.test.inline_bytes >= 0' client_send.out
}

# ctest: integration quick
case_send_bw_sweep() {
  require_device
  send_bw_pair server client 120 -a -n 8 --warmup 1 -t 16 --json-file "$T/sweep.json"
  expect_jq "$BW_ROWS_CONSISTENT" client.out
  expect_jq '[.rows[].bytes] == [range(1; 24) | pow(2; .)]' client.out
  expect_jq 'all(.rows[]; .iterations == 8)' client.out
  expect_same_report "client.out" "sweep.json"
  expect_jq '[.rows[].bytes] == [range(1; 24) | pow(2; .)]' server.out
  note "sweep 8 MiB: $(jq -c '.rows[-1] | {bw_average_mib_per_s}' "$T/client.out")"
}

# Progress: with --progress the client prints each row on stderr as it completes, so a
# sweep is not silent until its end. -n 24 at -t 16 wraps the send queue at every size up
# to 8 MiB, where a size change once lost a race; the sweep must complete. (-n 300 at -t 128,
# 4.8 GB through a loaded guest, ran past the case's 180 s; -n 40 moved 740 MB for the same.)
# ctest: integration
case_send_bw_progress() {
  require_device
  local i rows=0 header seen_after
  next_port
  start server "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --json --accept-timeout 30
  wait_listening "$PORT"
  start client "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -a -n 24 -t 16 --warmup 4 --progress --json
  # Three rows (2, 4 and 8 bytes) on stderr while the client still runs: the sizes up to
  # 8 MiB take seconds more.
  for ((i = 0; i < 600; i++)); do
    rows=$(grep -cE '^ +[0-9]+ +24 ' "$T/client.err" || true)
    ((rows >= 3)) && break
    kill -0 "$PID_client" 2> /dev/null || break
    tick 0.1
  done
  ((rows >= 3)) || fail "no three rows on stderr before the end (rows: $rows)"$'\n'"$(cat "$T/client.err")"
  kill -0 "$PID_client" 2> /dev/null || fail "the client had ended before its third row was seen"
  seen_after=$((i / 10))
  header=$(head -1 "$T/client.err")
  [[ $header == *'#bytes'*'BW average[MB/sec]'* ]] || fail "stderr does not start with the table header: $header"
  finish client 120
  expect_rc 0 "send_bw -a -n 24 -t 16 --progress"
  finish server 30
  expect_rc 0 "send_bw server for -a -n 24 -t 16"
  expect_jq "$BW_ROWS_CONSISTENT" client.out
  expect_jq '[.rows[].bytes] == [range(1; 24) | pow(2; .)] and all(.rows[]; .iterations == 24)' client.out
  # stderr holds the rows of the report, one line each, in order.
  [[ $(grep -cE '^ +[0-9]+ +24 ' "$T/client.err") == 23 ]] || fail "stderr holds not 23 rows: $(cat "$T/client.err")"
  # Without --progress, stderr (not a terminal here) stays quiet.
  send_bw_pair server_quiet client_quiet 60 -s 4096 -n 100
  [[ ! -s $T/client_quiet.err ]] || fail "progress without --progress on a pipe: $(cat "$T/client_quiet.err")"
  # --interval: each interval on stderr as it ends.
  send_bw_pair server_timed client_timed 60 -s 4096 -D 2 --interval 0.5 --progress
  grep -q '#end\[s\]' "$T/client_timed.err" || fail "no interval header on stderr: $(cat "$T/client_timed.err")"
  # perftest's --run_infinitely: -D's seconds are each interval's, shown as it ends; the run
  # goes on until Ctrl-C, which ends it with the report (intervals and the partial row).
  next_port
  start server_forever "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --json --accept-timeout 20
  wait_listening "$PORT"
  start client_forever "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -s 4096 --run_infinitely -D 1 --warmup 2 --json
  wait_connected "$PID_client_forever" 30
  for ((i = 0; i < 300; i++)); do
    (($(grep -cE '^ +[0-9]+\.[0-9]{3} +[0-9]+ ' "$T/client_forever.err" || true) >= 2)) && break
    tick 0.1
  done
  kill -INT "$PID_client_forever"
  finish client_forever 10
  expect_rc 130 "send_bw --run_infinitely after SIGINT"
  finish server_forever 10
  expect_rc 0 "send_bw server after its --run_infinitely client's Ctrl-C"
  expect_jq '.outcome == "interrupted" and (.intervals | length >= 2) and .rows[0].iterations > 0' client_forever.out
  expect_schema send_bw client_forever.out
  note "8 MiB at -n 40 -t 16: $(jq -c '.rows[-1] | {bw_average_mib_per_s, seconds}' "$T/client.out"); 3 rows seen after $seen_after s"
}

# Flags alone: refused before anything opens a device (label nodevice, on the build host).
# ctest: nodevice
case_send_bw_bad_flags() {
  local args
  for args in "-s 0" "-s 2147483648" "-a -s 64" "--op swap" "-t 0" "-n 0" "--bogus" "-a -D 1" "-n 5 -D 1" \
    "--lat -q 2" "--lat -b" "-b --op write" "-m 300" "--test foo" "-q 65" "-x 1 --bind 1.2.3.4" \
    "-Q 4" "-V" "--use-srq" "--reversed" "-c XRC" "--rate_limit_type HW" "--run_infinitely -n 5" \
    "--run_infinitely -a" "--lat --run_infinitely" "--rate_limit 1 --rate-limit 1" "--progress --quiet" \
    "--oob --lat -D 2" "--oob -a" "--oob -c UD" "--oob -b" "--oob --op atomic" "--oob -D 2" "--oob -q 2" "--oob -R"; do
    # shellcheck disable=SC2086
    run bad 10 "$OURS_SEND_BW" 1.2.3.4 $args
    expect_rc 2 "send_bw $args"
    grep -q . "$T/bad.err" || fail "send_bw $args: no message on stderr"
  done
  # The server side: --oob serves one perftest client, as perftest's server does.
  run persistent 10 "$OURS_SEND_BW" --oob -P
  expect_rc 2 "send_bw --oob -P"
  expect_grep "^send_bw: --oob serves one perftest client and ends" persistent.err
}

# perftest's spellings: each one send_bw has is accepted (the run then ends for want of a
# device: 77, not a usage error), each it has not is refused with one line naming the flag
# and what to use; -c UD and --lat -c UD need no -s. On the build host (label nodevice).
# ctest: nodevice skip_77
case_send_bw_perftest_flags() {
  require_no_device
  local args n=0
  for args in "--report_gbits" "--out_json_file $T/p.json" "--rate_limit 5" "--rate_limit 5 --rate_units M" \
    "--run_infinitely" "--run_infinitely -D 2" "-F" "-R" "-z" "-N" "--perform_warm_up" "-u 14" "--qp-timeout 14" \
    "-T 32" "--tos 32" "--cpu_util" "--use_hugepages" "--retry_count 3" "--inline_size 0" "--source_ip 127.0.0.1" \
    "--rate_limit_type SW" "-c UD" "--lat -c UD" "-c UD --rate_limit 1"; do
    n=$((n + 1))
    # shellcheck disable=SC2086
    run "ok$n" 20 "$OURS_SEND_BW" 127.0.0.1 $args --json
    expect_rc 77 "send_bw $args"
  done
  # What the spelling means lands in the report: perftest's --rate_limit is in Gb/s.
  expect_jq '.arguments.report_gbits == true' ok1.out
  [[ -s $T/p.json ]] || fail "--out_json_file: no report written"
  grep -q 'connects through rdma_cm (unless --oob)' "$T/ok8.err" || fail "-R: no note"
  # --out_json writes perftest's file name in the working folder.
  (cd "$T" && "$OURS_SEND_BW" 127.0.0.1 --out_json > /dev/null 2>&1)
  [[ -s $T/perftest_out.json ]] || fail "--out_json: no perftest_out.json"
  # Refused: the flag named, perftest named, what to use.
  run refused 10 "$OURS_SEND_BW" 127.0.0.1 -w 10
  expect_rc 2 "send_bw -w 10"
  grep -q "^send_bw: -w: perftest's flag is not in send_bw: use --expect-bw" "$T/refused.err" \
    || fail "-w: $(cat "$T/refused.err")"
  # Words not expected are listed in the order typed.
  run extras 10 "$OURS_SEND_BW" 127.0.0.1 --foo --bar
  expect_rc 2 "send_bw --foo --bar"
  grep -q "not expected: --foo --bar" "$T/extras.err" || fail "extras: $(cat "$T/extras.err")"
  note "$n perftest spellings accepted; -w refused with its replacement"
}

# Limits only the device knows: checked after address resolution, before connecting.
# ctest: integration
case_send_bw_device_limits() {
  require_device
  next_port
  run deep 10 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -t 65536 --json
  expect_rc 2 "send_bw -t 65536"
  expect_jq '.errors[0].message | test("completion queue entries|maximum queue depth")' deep.out
  run huge 10 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -s 16777216 --json
  expect_rc 2 "send_bw -s 16 MiB (rxe allows 8 MiB messages)"
  expect_jq '.errors[0].message | test("maximum message size")' huge.out
  run big_mtu 10 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -m 4096 --json
  expect_rc 2 "send_bw -m 4096 (above rxe's active MTU)"
  expect_jq '.errors[0].message | test("active MTU")' big_mtu.out
  run bad_gid 10 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -x 999 --json
  expect_rc 2 "send_bw -x 999"
  expect_jq '.errors[0].message | test("GID index 999")' bad_gid.out
  # A device that is not there at all is named with those that are, before address resolution.
  run wrong_device 10 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -d mlx5_9 --json
  expect_rc 2 "send_bw -d mlx5_9"
  expect_jq '.errors[0].message | test("no RDMA device mlx5_9 \\(present: ")' wrong_device.out
}

# ctest: integration
case_send_bw_no_peer() {
  require_device
  next_port
  run nobody 30 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" --timeout 2 --json
  expect_rc 1 "send_bw without a server"
  expect_jq '.outcome == "failed" and .errors[0].call == "rdma_connect"' nobody.out
  expect_schema send_bw nobody.out
  expect_wait_bounded nobody.out 4
  run lonely 30 "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --accept-timeout 1 --json
  expect_rc 1 "send_bw server without a client"
  expect_jq '.outcome == "timed_out"' lonely.out
  expect_wait_bounded lonely.out 3
}

# Latency rows: ordered statistics, the requested count, per operation; the server answers.
LAT_ROWS_CONSISTENT='.rows | length > 0 and all(.iterations > 0 and .t_min_us > 0
  and .t_min_us <= .t_median_us and .t_median_us <= .t_p99_us and .t_p99_us <= .t_p999_us
  and .t_p999_us <= .t_max_us and .t_min_us <= .t_avg_us and .t_avg_us <= .t_max_us and .t_stdev_us >= 0)'

# ctest: integration
case_send_bw_latency() {
  require_device
  local op
  for op in send write read; do
    send_bw_pair "server_$op" "client_$op" 60 --lat --op "$op" -s 2 -n 1000
    expect_jq "$LAT_ROWS_CONSISTENT" "client_$op.out"
    expect_schema send_bw "client_$op.out"
    expect_schema send_bw "server_$op.out"
    expect_jq ".test.test == \"lat\" and (.rows | length == 1) and .rows[0].iterations == 1000
      and .rows[0].bytes == 2" "client_$op.out"
    note "--lat --op $op 2 B: $(jq -c '.rows[0] | {t_median_us, t_p99_us}' "$T/client_$op.out")"
  done
  # SEND and WRITE are answered message for message (1000 measured + 100 warm-up); READ needs no server.
  expect_jq '.answered == 1100 and .test.test == "lat"' server_send.out
  expect_jq '.answered == 1100' server_write.out
  # A sweep, and -D: every size present; the duration bounds the run. Five pings a size: the
  # statistics are checked at 1000 above; the 8 MiB ones are what a sweep costs (-n 20 moved
  # 740 MB through rxe's software ICRC).
  send_bw_pair sweep_server sweep 120 --test lat --op write -a -n 5 --warmup 2
  expect_jq "$LAT_ROWS_CONSISTENT" sweep.out
  expect_jq '[.rows[].bytes] == [range(1; 24) | pow(2; .)] and all(.rows[]; .iterations == 5)' sweep.out
  send_bw_pair timed_server timed 60 --lat -s 64 -D 1
  expect_jq "$LAT_ROWS_CONSISTENT" timed.out
  expect_jq '.duration_s < 10 and .test.duration_s == 1' timed.out
}

# ctest: integration
case_send_bw_duration() {
  require_device
  send_bw_pair server client 60 -s 4096 -D 2 --counters
  expect_jq "$BW_ROWS_CONSISTENT" client.out
  # Time is checked at each completion batch; the run ends at the next signalled request,
  # and what is in flight (up to -t 128 messages) drains first. In a starved guest (ASan,
  # another guest beside it) that took 0.67 s at 1000 messages/s: the bound is D + 2 s, as
  # for every other bound on a run's own clock. A starved rxe also retransmits (the port's
  # completer_retry_err; 1 run in 8 with the host's cores taken), and one that waited for
  # its local ACK timeout (4.096 us x 2^19: 2.1 s) made a -D 2 row 5.3 s long in CI: each
  # retry the port counted adds that timeout to the bound. The counters are the port's, so
  # the other cases' retries loosen it too, never tighten it.
  expect_jq '.rows[0].seconds >= 1.99 and .rows[0].seconds <= 4.0 +
    (.rows[0].counters.completer_retry_err // 0) * 4.096e-6 * pow(2; .test.path.ack_timeout)' client.out
  expect_jq '.rows[0].iterations % .test.signal_every == 0' client.out
  note "-D 2: $(jq -c '.rows[0] | {seconds, iterations, retries: .counters.completer_retry_err}' "$T/client.out")"
}

# ctest: integration
case_send_bw_queue_pairs() {
  require_device
  send_bw_pair server client 60 -q 4 -s 65536 -n 500
  expect_jq "$BW_ROWS_CONSISTENT" client.out
  expect_jq '.rows[0].iterations == 2000 and .test.queue_pairs == 4' client.out
  # The server sees every lane: (500 + 100 warm-up) x 4.
  expect_jq '.rows[0].iterations == 2400 and .test.queue_pairs == 4' server.out
  note "-q 4 64 KiB: $(jq -c '.rows[0] | {bw_average_mib_per_s}' "$T/client.out")"
  # Bidirectional: the server sends every message back; the client's row counts both ways.
  send_bw_pair bidir_server bidir 60 -b -q 2 -s 4096 -n 1000
  expect_jq "$BW_ROWS_CONSISTENT" bidir.out
  expect_jq '.rows[0].iterations == 4000 and .test.bidirectional' bidir.out
  expect_jq '.rows[0].iterations == 2200 and .test.bidirectional' bidir_server.out
}

# ctest: integration
case_send_bw_path() {
  require_device
  # Without -x, rdma_cm chooses the GID; the report says which, and -x of it gives the same.
  send_bw_pair server auto 60 -s 4096 -n 200
  expect_jq '.test.path.gid_index >= 0 and (.test.path.gid_type | test("RoCE"))' auto.out
  local index
  index=$(jq '.test.path.gid_index' "$T/auto.out")
  next_port
  start server2 "$OURS_SEND_BW" -x "$index" -p "$PORT" --json --accept-timeout 20
  wait_listening "$PORT"
  run chosen 60 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -x "$index" -m 512 -s 4096 -n 200 --json
  expect_rc 0 "send_bw -x $index -m 512"
  finish server2 15
  expect_jq ".test.path.gid_index == $index and .test.path.path_mtu == 512" chosen.out
  expect_jq '.test.path.path_mtu == 512' server2.out
  note "GID index $index ($(jq -r '.test.path.gid_type' "$T/auto.out")), -m 512 on both sides"
}

# -x 0 is rxe0's link-local fe80 entry: rdma_cm binds fe80::...%rxenet0 and the test runs
# (here, on one link), with a warning on stderr and in the JSON that names the routable
# RoCE v2 entry to use instead: on the server (no peer) the first, RXE_ADDR's; on a client
# of an IPv6 server, fd55::1's. -x of the advised entry has none; an empty one is an error
# naming it.
# ctest: integration
case_send_bw_gid_link_local() {
  require_device
  local link_local
  local -x GID_ADVICE="-x 1 (::ffff:$RXE_ADDR RoCE v2) is this host's routable entry on $RXE_NETDEV"
  local -x GID_ADVICE6="-x 3 ($RXE_ADDR6 RoCE v2) is this host's routable entry on $RXE_NETDEV"
  link_local=$(ip -6 -o addr show dev "$RXE_NETDEV" scope link | awk '{sub("/.*", "", $4); print $4; exit}')
  [[ -n $link_local ]] || fail "$RXE_NETDEV has no link-local address"
  next_port
  start server "$OURS_SEND_BW" -x 0 -p "$PORT" --json --accept-timeout 20
  wait_listening "$PORT"
  run client 60 "$OURS_SEND_BW" "$link_local%$RXE_NETDEV" -p "$PORT" -x 0 -s 4096 -n 200 --json
  expect_rc 0 "send_bw -x 0 (link-local) to $link_local"
  finish server 15
  expect_rc 0 "send_bw server -x 0"
  expect_jq '.warnings | length == 1 and (.[0] | startswith("-x 0: index 0 is link-local fe80:")
    and contains(" (RoCE v2), which no router forwards; ") and endswith(env.GID_ADVICE))' server.out
  expect_jq '.warnings | length == 1 and (.[0] | startswith("-x 0: index 0 is link-local fe80:")
    and endswith(env.GID_ADVICE6))' client.out
  expect_jq '.test.path.gid_index == 0' client.out
  expect_grep "-x 0: index 0 is link-local fe80:" server.err
  expect_grep "$GID_ADVICE" server.err
  expect_grep "$GID_ADVICE6" client.err
  expect_schema send_bw server.out
  expect_schema send_bw client.out
  # The advised entry: no warning.
  next_port
  start advised_server "$OURS_SEND_BW" -x 1 -p "$PORT" --json --accept-timeout 20
  wait_listening "$PORT"
  run advised 60 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -x 1 -s 4096 -n 200 --json
  expect_rc 0 "send_bw -x 1"
  finish advised_server 15
  expect_rc 0 "send_bw server -x 1"
  expect_jq '(has("warnings") | not) and .test.path.gid_index == 1' advised.out
  expect_jq 'has("warnings") | not' advised_server.out
  if grep -q "link-local" "$T/advised.err" "$T/advised_server.err"; then fail "-x 1 warned"; fi
  # An empty entry stays an error, now with the entry to use.
  run empty 10 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -x 999 --json
  expect_rc 2 "send_bw -x 999"
  expect_jq '.errors[0].message | startswith("-x 999: GID index 999 ") and endswith("; " + env.GID_ADVICE)' empty.out
  note "-x 0 warned: $(jq -r '.warnings[0]' "$T/server.out")"
}

# ctest: integration
case_send_bw_refused() {
  require_device
  # The server says why in rdma_reject's private data, and waits for the next client.
  next_port
  start server "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --max-size 4096 --json --accept-timeout 30
  wait_listening "$PORT"
  run big 30 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -s 65536 -n 10 --json
  expect_rc 1 "send_bw -s 65536 against --max-size 4096"
  expect_jq '.errors[0].message | test("refused.*--max-size")' big.out
  run small 30 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -s 4096 -n 10 --json
  expect_rc 0 "send_bw -s 4096 after the refusal"
  finish server 15
  expect_rc 0 "send_bw server after one refusal"
  expect_jq '(.refused | length == 1) and (.refused[0].reason | test("65536"))' server.out
}

# ctest: integration sanitized
case_send_bw_interrupted() {
  require_device
  # Ctrl-C in the middle of a -D run: the client stops within a second or two and its report
  # keeps the partial row; the server sees the disconnect and reports what arrived. Over UD
  # (no disconnect) the stopped client still sends its counts: the server, with 20 s of
  # --timeout, ends within seconds, and both sides hold the same counts.
  # The bound from the signal to the client's exit, on the wall clock: the stop is seen within
  # 20 ms of the client's next turn on a CPU (busy or idle), the UD counts exchange takes a
  # second at most (man send_bw), and 4 s more pay for the teardown and a sanitized exit on a
  # loaded host. (A UD client starved by the cases beside it once never saw its CQ empty,
  # where alone it looked for the stop, and ran on past this bound to its -D 60.)
  local run test signal expected both client signalled exited
  for run in bw lat bw_ud lat_ud; do
    test=${run%_ud} both=() client=()
    [[ $run == *_ud ]] && both=(-c UD --timeout 20)
    # Paced: a UD flood would slow the cases running beside this one.
    [[ $run == bw_ud ]] && client=(--rate-limit 20000 --rate-units p)
    # SIGINT for bandwidth, SIGTERM for latency: 128 + the signal number either way.
    signal=INT expected=130
    [[ $test == lat ]] && signal=TERM expected=143
    next_port
    start "server_$run" "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --json --accept-timeout 20 "${both[@]}"
    wait_listening "$PORT"
    # Two warm-up messages, not 100: beside a busy guest 100 latency round trips took longer
    # than the 2 s before the signal, which then left no partial row to check.
    start "client_$run" "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" --test "$test" -s 64 -D 60 --warmup 2 --json "${both[@]}" "${client[@]}"
    eval "wait_connected \$PID_client_$run 30"
    tick 2
    signalled=${EPOCHREALTIME/./}
    eval "kill -$signal \$PID_client_$run"
    finish "client_$run" 10
    exited=${EPOCHREALTIME/./}
    expect_rc "$expected" "send_bw --test $test ${both[*]} after SIG$signal"
    (((exited - signalled) / 1000 <= 5000)) ||
      fail "send_bw --test $test ${both[*]} exited $(((exited - signalled) / 1000)) ms after SIG$signal, over 5000"
    note "$run: exit $(((exited - signalled) / 1000)) ms after SIG$signal"
    eval "expect_released \$PID_client_$run \"send_bw --test $test after SIG$signal\""
    finish "server_$run" 10
    expect_rc 0 "send_bw server after its client's Ctrl-C"
    note "$run: the server exited $(((${EPOCHREALTIME/./} - exited) / 1000)) ms after its client"
    # Under 60 s: the stop cut the -D 60 run short (how promptly is the bound above; the
    # report's duration also holds the client's start-up, seconds under ASan on a busy host).
    expect_jq '.outcome == "interrupted" and (.rows | length == 1) and .rows[0].iterations > 0
      and .duration_s < 30' "client_$run.out"
    expect_schema send_bw "client_$run.out"
    expect_schema send_bw "server_$run.out"
  done
  expect_jq "$BW_ROWS_CONSISTENT" client_bw.out
  expect_jq "$LAT_ROWS_CONSISTENT" client_lat.out
  expect_jq '.answered > 0' server_lat.out
  for run in bw_ud lat_ud; do
    # Completed, within 10 s of its client's exit (finish above): without the client's counts
    # it would have waited out its --timeout 20 of silence and reported timed_out. (Its own
    # duration_s also holds the wait for its client, whose start-up under ASan beside busy
    # cases took it to 8.5 s against a bound of 8 in a loaded run.)
    expect_jq '.outcome == "completed" and .datagrams[0].received > 0' "server_$run.out"
    [[ $(jq -c .datagrams "$T/client_$run.out") == "$(jq -c .datagrams "$T/server_$run.out")" ]] ||
      fail "$run: the sides' counts differ: $(jq -c .datagrams "$T/client_$run.out") vs $(jq -c .datagrams "$T/server_$run.out")"
    note "$run stopped: $(jq -c .datagrams "$T/client_$run.out")"
  done
}

# send_bw -P: one test at a time, client after client, whatever each runs; clients arriving
# while a test runs wait their turn; a refused client is not served and the server goes on;
# idle for --accept-timeout, it ends normally.
# ctest: integration sanitized
case_send_bw_persistent() {
  require_device
  next_port
  start pserver "$OURS_SEND_BW" -P --bind "$RXE_ADDR" -p "$PORT" --max-size 65536 --accept-timeout 15 --json
  wait_listening "$PORT"
  run c1 60 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -s 4096 -n 200 --json
  expect_rc 0 "first client (send bw)"
  run c2 60 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" --op write --test lat -n 100 --json
  expect_rc 0 "second client (write latency)"
  run big 30 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -s 131072 -n 10 --json
  expect_rc 1 "client refused by --max-size"
  start c3 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" --op read -s 8192 -n 300 -q 2 --timeout 60 --json
  start c4 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -s 1024 -n 300 -b --timeout 60 --json
  finish c3 90; expect_rc 0 "concurrent client 3 (read, 2 QPs)"
  # Closing its second connection waited for the first one's DREP, which came only when the
  # server destroyed that id after the second went: a 2-QP client took its --timeout (60 s).
  expect_jq '.duration_s < 15' c3.out
  finish c4 90; expect_rc 0 "concurrent client 4 (bidirectional)"
  finish pserver 60
  expect_rc 0 "persistent send_bw server idle for --accept-timeout"
  expect_schema send_bw pserver.out
  expect_jq '.outcome == "completed" and (.errors | length == 0) and (.connections | length == 4)' pserver.out
  expect_jq '[.connections[].outcome] | all(. == "completed")' pserver.out
  expect_jq '[.connections[].test.operation] | sort == ["read", "send", "send", "write"]' pserver.out
  expect_jq '(.refused | length == 1) and (.refused[0].reason | test("131072"))' pserver.out
  expect_jq '.connections[0].iterations >= 200 and .connections[0].bytes >= 819200' pserver.out
}

# send_bw_gate_run NAME EXIT CLIENT_ARGS...: our server on a fresh port, our client with
# CLIENT_ARGS (NAME.out, NAME.err), which must exit EXIT.
send_bw_gate_run() {
  local name=$1 want=$2
  shift 2
  next_port
  start "server_$name" "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --json --accept-timeout 20
  wait_listening "$PORT"
  run "$name" 60 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" "$@"
  expect_rc "$want" "send_bw $*"
  finish "server_$name" 15
}

# send_bw as a CI gate: fixed limits and a baseline report, each with a crafted bound that
# must fail (exit 1, one line naming the row, the figure and the limit) and one that must pass.
# ctest: integration
case_send_bw_gate() {
  require_device
  send_bw_pair server_base base 60 -s 4096 -n 500
  expect_schema send_bw base.out
  # A baseline 1000 times faster than this link fails; one 1000 times slower passes.
  jq '.rows[].bw_average_mib_per_s *= 1000' "$T/base.out" > "$T/fast.json"
  jq '.rows[].bw_average_mib_per_s /= 1000' "$T/base.out" > "$T/slow.json"
  send_bw_gate_run regressed 1 -s 4096 -n 500 --baseline "$T/fast.json" --json
  expect_jq '.outcome == "failed" and .gate.passed == false and .gate.baseline.rows_compared == 1
    and .gate.shortfalls[0].figure == "bw_average_mib_per_s" and .gate.shortfalls[0].by == "--baseline"' regressed.out
  expect_jq '.errors[0].message | test("^below the gate: 4096 B: bw_average_mib_per_s [0-9.e+]+ below [0-9.e+]+ \\(the baseline.s [0-9.e+]+ less 10%\\)$")' regressed.out
  expect_schema send_bw regressed.out
  note "regressed: $(jq -r '.errors[0].message' "$T/regressed.out")"
  send_bw_gate_run improved 0 -s 4096 -n 500 --baseline "$T/slow.json" --tolerance 0 --json
  expect_jq '.gate.passed and .gate.shortfalls == [] and .gate.baseline.tolerance == 0' improved.out
  expect_schema send_bw improved.out
  # Fixed limits, in the text output: the table, the gate's lines, and one error line.
  send_bw_gate_run short 1 -s 4096 -n 500 --expect-bw 1e9 --expect-rate 1e6
  expect_grep "^gate: 2 figure(s) fell short" short.out
  expect_grep "^send_bw: below the gate: 4096 B: bw_average_mib_per_s .* below 1e+09 (--expect-bw) (and 1 more)$" short.err
  send_bw_gate_run enough 0 -s 4096 -n 500 --expect-bw 0.001 --expect-rate 1e-9
  expect_grep "^gate: passed" enough.out
  # Latency: the p99 limit, and a sweep against its own report as the baseline's rows.
  send_bw_gate_run slow_p99 1 --lat -s 64 -n 200 --expect-lat-p99 0.001 --json
  expect_jq '.gate.shortfalls[0] | .figure == "t_p99_us" and .limit == 0.001 and .by == "--expect-lat-p99"' slow_p99.out
  send_bw_gate_run sweep 0 -a -n 8 --warmup 1 -t 16 --json
  jq '.rows[].bw_average_mib_per_s *= 1000' "$T/sweep.out" > "$T/sweep_fast.json"
  send_bw_gate_run sweep_regressed 1 -a -n 8 --warmup 1 -t 16 --baseline "$T/sweep_fast.json" --json
  expect_jq '.gate.baseline.rows_compared == 23 and (.gate.shortfalls | length) == 23' sweep_regressed.out
}

# The connection's transport settings, read back from the QP (ibv_query_qp), and the port's
# counters around each row.
# ctest: integration
case_send_bw_transport() {
  require_device
  send_bw_pair server client 60 -s 4096 -n 500 --tclass 96 --ack-timeout 14 --retry-count 3 --counters
  expect_jq '.test.path | .traffic_class == 96 and .ack_timeout == 14 and .retry_count == 3 and .rnr_retry == 7' \
    client.out
  # Both sides replaced the CM's RNR NAK timer (0: 655 ms) with 0.64 ms.
  expect_jq '.test.path.rnr_nak_timer == 12' client.out
  expect_jq '.test.path.rnr_nak_timer == 12' server.out
  expect_jq '.arguments | .tclass == 96 and .ack_timeout == 14 and .retry_count == 3 and .counters' client.out
  # rxe counts the packets it sends: 500 measured messages of 4 packets each (1 KiB path MTU) at least.
  expect_jq '.rows[0].counters | (.sent_pkts // 0) >= 500 and has("retry_exceeded_err")' client.out
  expect_schema send_bw client.out
  expect_schema send_bw server.out
  note "4 KiB row's counters: $(jq -c '.rows[0].counters | with_entries(select(.value != 0))' "$T/client.out")"
  # Without the flags: rdma_cm's defaults, no counters in the rows.
  send_bw_pair server_plain plain 60 -s 4096 -n 100
  expect_jq '.test.path.retry_count == 7 and (.rows[0] | has("counters") | not)' plain.out
  note "defaults: $(jq -c '.test.path | {traffic_class, service_level, ack_timeout, retry_count, rnr_retry, rnr_nak_timer}' "$T/plain.out")"
  # Latency, in text: the table, then each row's counters that moved.
  next_port
  start server_lat "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --accept-timeout 20
  wait_listening "$PORT"
  run lat 60 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" --lat -s 64 -n 200 --counters
  expect_rc 0 "send_bw --lat --counters"
  finish server_lat 15
  expect_grep "^port counters that changed, per row:" lat.out
  expect_grep "^ *64 .*sent_pkts +[0-9]" lat.out
  # --cpu-util on both sides: the client's CPU time per row, the server's over the test.
  send_bw_pair_with --cpu-util server_cpu cpu 60 -s 65536 -n 500 --cpu-util
  expect_jq '.rows[0].cpu | .wall_s > 0 and .utilization > 0 and .us_per_message > 0 and .user_s + .system_s > 0' cpu.out
  expect_jq '.test.cpu | .wall_s > 0 and .us_per_message > 0' server_cpu.out
  expect_schema send_bw cpu.out
  expect_schema send_bw server_cpu.out
  note "CPU, 64 KiB: client $(jq -c '.rows[0].cpu' "$T/cpu.out"), server $(jq -c '.test.cpu' "$T/server_cpu.out")"
  # --histogram: every measured sample in a bucket, the buckets ascending, and the plot.
  send_bw_pair server_hist hist 60 --lat -s 64 -n 300 --histogram
  expect_jq '.rows[0] | (.histogram | map(.count) | add) == .iterations and .iterations == 300
    and ([.histogram[].low_us] | . == sort) and all(.histogram[]; .high_us > .low_us)' hist.out
  expect_schema send_bw hist.out
  note "64 B histogram: $(jq -c '[.rows[0].histogram[] | [.low_us, .count]]' "$T/hist.out")"
  if command -v gnuplot > /dev/null; then
    run plot 60 "$here/../../scripts/bench-plot.sh" "$T/hist.svg" "$T/hist.out"
    expect_rc 0 "bench-plot.sh of a --histogram report"
    expect_grep "latency histogram" hist.svg
  fi
}

# --interval: a timed run as a time series, every interval's messages adding up to the row.
# alone: checks each 0.5 s interval of a paced run; beside busy cases its server was held up long
# enough to run out of receives, and the completions that waited landed together in one short
# interval (above 6 MiB/s in a 4 MiB/s run, twice in full suites)
# ctest: integration alone
case_send_bw_intervals() {
  require_device
  # --ack-timeout 14 (67 ms): a packet rxe drops under load is resent after that, not after
  # the path's 2.1 s, which once left a 3 s run 4 intervals (full suite at 65ebd4b).
  send_bw_pair server client 60 -s 4096 -D 3 --interval 0.5 --ack-timeout 14
  expect_jq '(.intervals | length) >= 4 and (.intervals | length) <= 8
    and ((.intervals | map(.messages) | add) == .rows[0].iterations)
    and all(.intervals[]; .seconds > 0 and .bw_average_mib_per_s >= 0)
    and ([.intervals[].end_s] | . == sort)' client.out
  expect_schema send_bw client.out
  note "intervals: $(jq -c '[.intervals[] | [(.end_s * 100 | round / 100), (.bw_average_mib_per_s | round)]]' "$T/client.out")"
  next_port
  start server_text "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --accept-timeout 20
  wait_listening "$PORT"
  run text 60 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -s 4096 -D 1 --interval 0.25
  expect_rc 0 "send_bw -D 1 --interval 0.25"
  finish server_text 15
  expect_grep "#end\[s\]" text.out
  # --rate-limit: 1000 messages a second hold 500 messages to about half a second; at 4 MiB/s
  # every interval of a timed run stays near 4 MiB/s.
  send_bw_pair server_paced paced 60 -s 4096 -n 500 --rate-limit 1000 --rate-units p
  expect_jq '.rows[0] | .message_rate_mpps <= 0.0011 and .message_rate_mpps >= 0.0005' paced.out
  send_bw_pair server_paced_series paced_series 60 -s 4096 -D 2 --interval 0.5 --rate-limit 4
  # The pacer holds what is posted; an interval counts what completed in it, so on a loaded
  # host the completions a descheduled server held back land in one interval together (above
  # 6 MiB/s beside CPU burners). The run's rate and the typical interval are the pacing's.
  expect_jq '.rows[0].bw_average_mib_per_s <= 4.4
    and ([.intervals[].bw_average_mib_per_s] | sort | .[length / 2 | floor]) <= 6' paced_series.out
  note "paced: $(jq -c '.rows[0] | {message_rate_mpps}' "$T/paced.out"); 4 MiB/s: $(jq -c '[.intervals[].bw_average_mib_per_s | . * 100 | round / 100]' "$T/paced_series.out")"
}

# -e: both sides asleep on their completion channels, for every loop that waits on a CQ
# (bandwidth with several queue pairs and bidirectional, send and read latency); the rows
# complete and each report says how it waited. Ctrl-C wakes a sleeping server at once.
# ctest: integration
case_send_bw_events() {
  require_device
  local name flags
  for name in bw_qp bw_bidir lat_send lat_read; do
    case $name in
      bw_qp) flags=(-s 65536 -n 500 -q 2) ;;
      bw_bidir) flags=(-s 4096 -n 1000 -b) ;;
      lat_send) flags=(--lat -s 64 -n 300) ;;
      lat_read) flags=(--lat --op read -s 64 -n 300) ;;
    esac
    send_bw_pair_with "-e --cpu-util" "server_$name" "client_$name" 60 "${flags[@]}" -e --cpu-util
    expect_jq '.outcome == "completed" and .test.completion == "events"' "client_$name.out"
    expect_jq '.outcome == "completed" and .test.completion == "events"' "server_$name.out"
    expect_schema send_bw "client_$name.out"
    expect_schema send_bw "server_$name.out"
  done
  expect_jq "($BW_ROWS_CONSISTENT) and .rows[0].iterations == 1000" client_bw_qp.out
  expect_jq "($LAT_ROWS_CONSISTENT) and .rows[0].iterations == 300" client_lat_send.out
  expect_jq "($LAT_ROWS_CONSISTENT) and .rows[0].iterations == 300" client_lat_read.out
  note "-e 64 KiB -q 2: $(jq -c '.rows[0] | {bw_average_mib_per_s, cpu_us_per_message: .cpu.us_per_message}' "$T/client_bw_qp.out"); send latency median: $(jq .rows[0].t_median_us "$T/client_lat_send.out") us"
  # A server asleep between clients' messages: SIGINT ends it within a second.
  next_port
  start server_idle "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --json --accept-timeout 20 -e
  wait_listening "$PORT"
  start client_idle "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -s 4096 -D 60 --rate-limit 10 --rate-units p -e --json
  wait_connected "$PID_client_idle" 30
  tick 1
  kill -INT "$PID_server_idle"
  finish server_idle 5
  expect_rc 130 "send_bw -e server after SIGINT"
  finish client_idle 15
  expect_jq '.outcome == "interrupted"' server_idle.out
}

# -c UD: datagrams over rdma_cm's UDP port space. After the rows both sides exchange counts,
# so each knows per size what was sent and what arrived (warm-up included); sizes go up to
# the MTU (-a stops there, -s above it is a usage error once the device is known); a UD
# client finds no RC server (another port space) and says so instead of hanging.
# ctest: integration sanitized
case_send_bw_ud() {
  require_device
  local name flags mtu
  for name in small qp sweep events; do
    case $name in
      small) flags=(-s 64 -n 3000) ;;
      qp) flags=(-s 512 -n 1000 -q 2) ;;
      sweep) flags=(-a -n 200 --warmup 10) ;;
      events) flags=(-s 256 -n 1000 -e) ;;
    esac
    send_bw_pair_with "-c UD" "server_$name" "client_$name" 60 -c UD "${flags[@]}"
    expect_jq '.outcome == "completed" and .test.connection == "UD"' "client_$name.out"
    expect_jq '.outcome == "completed" and .test.connection == "UD"' "server_$name.out"
    expect_jq "$BW_ROWS_CONSISTENT" "client_$name.out"
    expect_schema send_bw "client_$name.out"
    expect_schema send_bw "server_$name.out"
    # Both sides hold the same counts for every size: the client's sends, the server's
    # arrivals (a size none of whose datagrams arrived has no row on the server, but counts).
    expect_jq 'all(.rows[]; .datagrams.sent >= .iterations and .datagrams.lost == .datagrams.sent - .datagrams.received)
      and ([.rows[].bytes] == [.datagrams[].bytes])' "client_$name.out"
    [[ $(jq -c .datagrams "$T/client_$name.out") == "$(jq -c .datagrams "$T/server_$name.out")" ]] ||
      fail "the two sides' datagram counts differ: $(jq -c .datagrams "$T/client_$name.out") vs $(jq -c .datagrams "$T/server_$name.out")"
    note "-c UD ${flags[*]}: $(jq -c '[.rows[] | {bytes, mpps: .message_rate_mpps, datagrams}] | .[0:2]' "$T/client_$name.out")"
  done
  expect_jq '.rows[0].datagrams.sent == 3100' client_small.out
  expect_jq '.rows[0].datagrams.sent == 2200 and .test.queue_pairs == 2' client_qp.out
  mtu=$(jq .test.path.path_mtu "$T/client_sweep.out")
  expect_jq "[.rows[].bytes] == [range(1; 13) | pow(2; .) | select(. <= $mtu)]" client_sweep.out
  expect_jq '.test.completion == "events"' client_events.out
  # Without -s, as perftest: bandwidth at the port's MTU, latency at 2 bytes.
  send_bw_pair_with "-c UD" server_mtu client_mtu 60 -c UD -n 500
  expect_jq "[.rows[].bytes] == [$mtu] and .rows[0].iterations == 500" client_mtu.out
  send_bw_pair_with "-c UD" server_lat2 client_lat2 60 -c UD --lat -n 200
  expect_jq '[.rows[].bytes] == [2] and .test.test == "lat"' client_lat2.out
  # Loss: the server stopped (SIGSTOP) for half a second of a timed run drops what its 512
  # posted receives cannot hold; both sides count the same loss and the run still ends.
  # Paced at 20000 a second: a flood would slow the cases running beside this one.
  next_port
  start server_lossy "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --json --accept-timeout 20 -c UD
  wait_listening "$PORT"
  start client_lossy "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -c UD -s 64 -D 4 --rate-limit 20000 --rate-units p --json
  # Connected, then into the measured run (a sanitized client takes seconds to start). 4 s,
  # not 2: in a guest busy with three cases, a 2 s run once began and ended between two
  # looks at the queue pairs.
  wait_connected "$PID_client_lossy" 30
  tick 0.5
  kill -STOP "$PID_server_lossy"
  tick 0.5
  kill -CONT "$PID_server_lossy"
  finish client_lossy 30
  expect_rc 0 "send_bw -c UD -D 4 with its server stopped for 0.5 s"
  finish server_lossy 15
  expect_rc 0 "send_bw -c UD server stopped for 0.5 s"
  expect_jq '.rows[0].datagrams.lost > 0' client_lossy.out
  expect_jq '.rows[0].datagrams.lost > 0 and .rows[0].iterations == .rows[0].datagrams.received' server_lossy.out
  [[ $(jq -c .rows[0].datagrams "$T/client_lossy.out") == "$(jq -c .rows[0].datagrams "$T/server_lossy.out")" ]] ||
    fail "the sides count the loss differently: $(jq -c .rows[0].datagrams "$T/client_lossy.out") vs $(jq -c .rows[0].datagrams "$T/server_lossy.out")"
  note "server stopped 0.5 s of a 4 s run at 20000/s: $(jq -c .rows[0].datagrams "$T/client_lossy.out")"
  # Latency: each ping tagged and echoed; both sides count the pings, the client also those
  # left unanswered; a sweep stops at the MTU.
  send_bw_pair_with "-c UD" server_lat client_lat 60 -c UD --lat -s 64 -n 500
  # One ping in flight never finds the server's 512 receives taken: none is lost; an answer
  # held up past 200 ms in a busy guest would count as unanswered, hence the sum.
  expect_jq "($LAT_ROWS_CONSISTENT) and .rows[0].iterations + .rows[0].datagrams.unanswered == 500
    and .test.connection == \"UD\" and .rows[0].datagrams.sent == 600 and .rows[0].datagrams.lost == 0" client_lat.out
  expect_jq '.answered == 600 and .datagrams == [{bytes: 64, sent: 600, received: 600, lost: 0}]' server_lat.out
  expect_jq '.datagrams == [{bytes: 64, sent: 600, received: 600, lost: 0}]' client_lat.out
  expect_schema send_bw client_lat.out
  expect_schema send_bw server_lat.out
  send_bw_pair_with "-c UD" server_lat_sweep client_lat_sweep 60 -c UD --lat -a -n 20 --warmup 2
  expect_jq "($LAT_ROWS_CONSISTENT) and [.rows[].bytes] == [range(1; 13) | pow(2; .) | select(. <= $mtu)]" client_lat_sweep.out
  note "-c UD --lat 64 B: median $(jq .rows[0].t_median_us "$T/client_lat.out") us"
  # The server stopped for half a second of a timed latency run: the pings it did not answer
  # in time are counted and the run goes on. No warm-up: a sanitized client beside busy
  # cases was still warming up when the stop came (what went unanswered then is not counted).
  next_port
  start server_lat_lossy "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --json --accept-timeout 20 -c UD
  wait_listening "$PORT"
  start client_lat_lossy "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -c UD --lat -s 64 -D 4 --warmup 0 --json
  wait_connected "$PID_client_lat_lossy" 30
  tick 0.5
  kill -STOP "$PID_server_lat_lossy"
  tick 0.5
  kill -CONT "$PID_server_lat_lossy"
  finish client_lat_lossy 30
  expect_rc 0 "send_bw -c UD --lat -D 4 with its server stopped for 0.5 s"
  finish server_lat_lossy 15
  expect_rc 0 "send_bw -c UD --lat server stopped for 0.5 s"
  expect_jq '.rows[0].datagrams.unanswered >= 1 and .rows[0].iterations > 0' client_lat_lossy.out
  note "latency, server stopped 0.5 s of 4 s: $(jq -c .rows[0].datagrams "$T/client_lat_lossy.out")"
  # One size above the MTU: refused before anything is sent.
  next_port
  run above_mtu 30 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -c UD -s $((mtu * 2)) --json
  expect_rc 2 "send_bw -c UD -s $((mtu * 2))"
  expect_jq ".errors[0].message | test(\"-c UD: -s $((mtu * 2)) is above the active MTU\")" above_mtu.out
  # A UD client to an RC server: nobody listens in the UDP port space.
  next_port
  start server_rc "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --json --accept-timeout 10
  wait_listening "$PORT"
  run client_mismatch 30 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -c UD -s 64 -n 10 --json
  expect_rc 1 "send_bw -c UD against an RC server"
  note "UD client, RC server: $(jq -r ".errors[0].message" "$T/client_mismatch.out")"
  kill -INT "$PID_server_rc"
  finish server_rc 10
}

# --op atomic: fetch-and-add and compare-and-swap, bandwidth on two queue pairs and latency;
# the client reads each counter back at the end: it must hold every operation (warm-up too).
# ctest: integration sanitized
case_send_bw_atomics() {
  require_device
  local kind name
  for kind in fetch-add compare-swap; do
    name=${kind//-/_}
    send_bw_pair "server_bw_$name" "bw_$name" 60 --op atomic --atomic "$kind" -n 2000 -q 2
    expect_jq "($BW_ROWS_CONSISTENT) and .rows[0].bytes == 8 and .rows[0].iterations == 4000
      and .test.operation == \"atomic\" and .test.atomic == {kind: \"$kind\", counters: [2100, 2100], byte_order: \"host\"}" "bw_$name.out"
    expect_schema send_bw "bw_$name.out"
    expect_schema send_bw "server_bw_$name.out"
    send_bw_pair "server_lat_$name" "lat_$name" 60 --lat --op atomic --atomic "$kind" -n 300
    expect_jq "($LAT_ROWS_CONSISTENT) and .rows[0].iterations == 300
      and .test.atomic == {kind: \"$kind\", counters: [400], byte_order: \"host\"}" "lat_$name.out"
    expect_schema send_bw "lat_$name.out"
    # Nothing to answer: both servers slept on their CQ (the client's core stays free).
    expect_jq '.outcome == "completed" and .test.completion == "events"' "server_bw_$name.out"
    expect_jq '.outcome == "completed" and .test.completion == "events"' "server_lat_$name.out"
    note "$kind: $(jq -c '.rows[0] | {message_rate_mpps}' "$T/bw_$name.out"), latency median $(jq .rows[0].t_median_us "$T/lat_$name.out") us"
  done
}

# --use-hugepages: both sides' buffers in huge pages once some are reserved (each report
# says so); with none reserved the client fails with mmap's error and the hint to reserve.
# ctest: integration
case_send_bw_hugepages() {
  require_device
  local reserved
  reserved=$(cat /proc/sys/vm/nr_hugepages)
  restore "echo $reserved > /proc/sys/vm/nr_hugepages"
  echo 0 > /proc/sys/vm/nr_hugepages
  next_port
  run none 30 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" --use-hugepages --json
  expect_rc 1 "send_bw --use-hugepages with no huge pages reserved"
  expect_jq '.errors[0].call == "mmap" and (.errors[0].hint | test("nr_hugepages"))' none.out
  echo 16 > /proc/sys/vm/nr_hugepages
  [[ $(cat /proc/sys/vm/nr_hugepages) -ge 4 ]] || fail "the guest reserved only $(cat /proc/sys/vm/nr_hugepages) huge pages"
  # And without relaxed ordering, in perftest's spelling: rxe takes the optional flag either way.
  send_bw_pair_with --use-hugepages server client 60 -s 65536 -n 1000 --use-hugepages --disable_pcie_relaxed
  expect_jq "($BW_ROWS_CONSISTENT) and .test.buffers == \"huge_pages\" and .arguments.disable_pcie_relaxed" client.out
  expect_jq '.outcome == "completed" and .test.buffers == "huge_pages"' server.out
  expect_schema send_bw client.out
  expect_schema send_bw server.out
  note "--use-hugepages 64 KiB: $(jq -c '.rows[0] | {bw_average_mib_per_s}' "$T/client.out")"
}

# --pin-core: each side on its core (the guest's kernel shows the client's affinity while it
# runs), where it ran in each report; rxe has no PCI function, so no device NUMA node and
# no memory policy.
# ctest: integration
case_send_bw_pin_core() {
  require_device
  next_port
  start server "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --json --accept-timeout 20 --pin-core 0
  wait_listening "$PORT"
  start client "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -s 4096 -D 3 --pin-core 1 --json
  wait_connected "$PID_client" 30
  local allowed
  allowed=$(awk '/^Cpus_allowed_list/ { print $2 }' "/proc/$PID_client/status")
  [[ $allowed == 1 ]] || fail "send_bw --pin-core 1 runs on cores $allowed"
  finish client 30
  expect_rc 0 "send_bw --pin-core 1"
  finish server 15
  expect_rc 0 "send_bw --pin-core 0 server"
  expect_jq '.test.placement | .core == 1 and .device_numa_node == null and .memory_on_device_node == false' client.out
  expect_jq '.test.placement.core == 0' server.out
  expect_schema send_bw client.out
  expect_schema send_bw server.out
  note "placement: $(jq -c .test.placement "$T/client.out")"
}

# A one-sided test (WRITE, READ) leaves the server's CQ empty from start to end, so a client
# that connects and then writes nothing looked the same as one at work, and held the server
# until it disconnected. Our clients now send heartbeats (a zero-length SEND every 250 ms),
# and from the first one on their silence ends the test; a client without them (an older
# one, the crafted one) gets --timeout again each time the port's counters moved. The
# crafted client that says WRITE and writes nothing is dropped within --timeout on a quiet
# port; a client of ours stopped mid-run is dropped beside a busy one, where the counters
# alone would have held it; real WRITE and READ runs of more than twice --timeout are served
# to the end. Alone (RUN_SERIAL): another case's traffic on the port moves the counters.
# alone: a WRITE/READ server tells a silent client from one at work by the port's counters, which
# every other case's traffic moves too
# ctest: integration alone
case_send_bw_silent_one_sided() {
  require_device
  next_port
  start_timed silent_victim "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --timeout "$CRAFTED_TIMEOUT" --json \
    --accept-timeout 60
  wait_listening "$PORT"
  crafted peer_silent bw-client-silent-write "$RXE_ADDR" "$PORT"
  finish silent_victim 70
  crafted_done peer_silent
  expect_crafted_failure send_bw silent_victim "$(ended_us silent_victim)" timed_out \
    "for $((CRAFTED_TIMEOUT * 1000)) ms .nor on $RXE_DEV port [0-9]+.s counters" '.test.operation == "write"'
  # The rest beside one another. A WRITE client of ours that stops (SIGSTOP) once its
  # heartbeats flow, beside streams whose packets keep the port's counters moving, as another
  # tenant's would on a shared port: its silence alone ends its test, counters or not. The
  # WRITE and READ clients that go on for longer than the servers' --timeout are served to
  # the end. The SEND stream is paced, to move the counters without taking the guest's CPU.
  next_port
  local busy_port=$PORT op
  start busy_server "$OURS_SEND_BW" --bind "$RXE_ADDR2" -p "$busy_port" --json --accept-timeout 20
  wait_listening "$busy_port"
  start busy_client "$OURS_SEND_BW" "$RXE_ADDR2" -p "$busy_port" -s 4096 --rate-limit 200 --rate-units p -D 20 --json
  for op in write read; do
    next_port
    start "server_$op" "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --timeout "$CRAFTED_TIMEOUT" --json \
      --accept-timeout 20
    wait_listening "$PORT"
    start "client_$op" "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" --op "$op" -s 4096 -D $((2 * CRAFTED_TIMEOUT + 1)) --json
  done
  next_port
  start_timed stopped_victim "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --timeout "$CRAFTED_TIMEOUT" --json \
    --accept-timeout 20
  wait_listening "$PORT"
  start stopped_client "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" --op write -s 4096 -D 60 --json
  wait_connected "$PID_stopped_client" 30
  tick 1
  kill -STOP "$PID_stopped_client"
  MISDEED_US=${EPOCHREALTIME/./} CRAFTED_MODE="SIGSTOP of a WRITE client beside a busy port"
  finish stopped_victim 30
  local busy_left=1
  kill -0 "$PID_busy_client" 2> /dev/null || busy_left=0
  kill -CONT "$PID_stopped_client"
  expect_crafted_failure send_bw stopped_victim "$(ended_us stopped_victim)" timed_out \
    "nothing from the peer for $((CRAFTED_TIMEOUT * 1000)) ms while" '.test.operation == "write"'
  ((busy_left)) || fail "the paced SEND stream ended before the stopped client's server did: lengthen it"
  kill -9 "$PID_stopped_client" 2> /dev/null || true
  finish stopped_client 10
  for op in write read; do
    finish "client_$op" 60
    expect_rc 0 "send_bw --op $op -D $((2 * CRAFTED_TIMEOUT + 1)) against a server with --timeout $CRAFTED_TIMEOUT"
    finish "server_$op" 20
    expect_rc 0 "the send_bw server of the $op run"
    expect_jq '.outcome == "completed" and .rows == []' "server_$op.out"
  done
  kill -INT "$PID_busy_client"
  finish busy_client 20
  finish busy_server 20
  expect_rc 0 "the busy port's send_bw server"
  note "silent WRITE client dropped on a quiet port; a stopped one beside a busy port; --op write and read for $((2 * CRAFTED_TIMEOUT + 1)) s served to the end"
}

# perftest_clock_unmeasured NAME: whether the stock perftest run NAME failed only because it
# could not measure its CPU's clock: each row it prints converts cycles to seconds with a
# frequency it samples against gettimeofday, and gives up ("Can't produce a report") when the
# samples' r^2 is below 0.9, as on a loaded TCG guest. An -a sweep samples once per size, 23
# times. That failure is the stock tool's measurement, not the peer's: its run is tried again.
perftest_clock_unmeasured() {
  [[ $RC -ne 0 ]] && grep -q "^Correlation coefficient r^2: .* < 0.9" "$T/$1.err" 2> /dev/null
}

# expect_perftest_row PERFTEST OURS ITERATIONS [same]: PERFTEST's output has its row of 64 KiB
# and ITERATIONS (" 65536   300   <peak>   <average>   <rate>", in PERFTEST_ROW), and with
# `same` its average is OURS's report's, as perftest prints it (%.2f of MB/s, 2^20 bytes).
expect_perftest_row() {
  PERFTEST_ROW=$(awk '/#bytes/ {getline; print; exit}' "$T/$1.out")
  [[ $(awk '{print $1, $2}' <<< "$PERFTEST_ROW") == "65536 $3" ]] || fail "$1's row: '$PERFTEST_ROW'"
  [[ ${4:-} == same ]] || return 0
  local ours
  printf -v ours '%.2f' "$(jq -r '.rows[0].bw_average_mib_per_s' "$T/$2.out")"
  [[ $(awk '{print $4}' <<< "$PERFTEST_ROW") == "$ours" ]] || fail "$1 printed '$PERFTEST_ROW', $2 reports $ours MiB/s"
}

# --oob: our client against the stock perftest servers in perftest's default mode (no
# rdma_cm; QP numbers, PSNs, GIDs and buffers over TCP): WRITE, READ and SEND each complete
# on both sides, the server at the GID that holds the address (as diag-bind --gids would
# advise), and a WRITE or READ server prints our figures as its row, as it would its own
# client's. Then the refusals: nothing listening, and what --oob does not run yet. Sanitized:
# the exchange decodes what a peer sends, and the QPs are ours to set up.
# ctest: integration sanitized
case_send_bw_perftest_server() {
  require_device
  local entry op iterations=300
  entry=$(gid_index_sysfs "$RXE_ADDR") || fail "no RoCE v2 GID holds $RXE_ADDR"
  for op in write read send; do
    next_port
    start "ib_$op" ib_"$op"_bw -d "${entry% *}" -x "${entry#* }" -p "$PORT" -n "$iterations"
    wait_tcp_listening "$PORT"
    run "oob_$op" 60 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" --oob --op "$op" -n "$iterations" --json
    expect_rc 0 "send_bw --oob --op $op against ib_${op}_bw"
    finish "ib_$op" 30
    expect_rc 0 "ib_${op}_bw, the server of send_bw --oob"
    expect_jq '.outcome == "completed" and .test.exchange == {"method": "perftest", "peer_version": "6.06", "rows_measured_by": "self"}
      and (.rows | length) == 1 and .rows[0].iterations == '"$iterations"' and .test.path.gid_index == '"${entry#* }" \
      "oob_$op.out"
    expect_schema send_bw "oob_$op.out"
    # A WRITE or READ server prints our figures as its row.
    expect_perftest_row "ib_$op" "oob_$op" "$iterations" "$([[ $op != send ]] && echo same)"
    note "$op: ours $(jq -r '.rows[0].bw_average_mib_per_s * 100 | round / 100' "$T/oob_$op.out") MiB/s; ib_${op}_bw's row: $PERFTEST_ROW"
  done
  next_port
  run none 30 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" --oob --op write -n 10 --timeout 3
  expect_rc 1 "send_bw --oob with nothing listening"
  expect_grep "^send_bw: no perftest server at $RXE_ADDR:$PORT (Connection refused): start ib_write_bw there first" none.err
  # -a: every size from 2 bytes to 8 MiB back to back, the server's row the last one's. The
  # stock server makes its 8 MiB buffers before it sends its destination record: on a starved
  # guest that took longer than send_bw's default 5 s wait for it (CI31), so a wider one.
  local attempt sweep_rc
  for attempt in 1 2 3; do
    next_port
    start ib_sweep ib_write_bw -d "${entry% *}" -x "${entry#* }" -p "$PORT" -n 5 -a
    wait_tcp_listening "$PORT"
    run oob_sweep 120 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" --oob --op write -n 5 -a --json --timeout 30
    sweep_rc=$RC
    finish ib_sweep 30
    perftest_clock_unmeasured ib_sweep || break
    note "ib_write_bw -a could not measure its CPU clock (try $attempt of 3): $(grep "r^2" "$T/ib_sweep.err")"
  done
  expect_rc 0 "ib_write_bw -a, the server of send_bw --oob -a"
  RC=$sweep_rc
  expect_rc 0 "send_bw --oob --op write -a against ib_write_bw -a"
  expect_jq '(.rows | length) == 23 and .rows[0].bytes == 2 and .rows[-1].bytes == 8388608
    and all(.rows[]; .iterations == 5)' oob_sweep.out
  grep -Eq '^ *8388608 +5 ' "$T/ib_sweep.out" || fail "ib_write_bw -a printed no 8 MiB row: $(cat "$T/ib_sweep.out")"
  # Bad peers: a server of another program (SENDs to ib_write_bw, which posts no receives;
  # WRITEs to ib_read_bw, whose buffer takes none): one line within --timeout, exit 1, with
  # the likely cause.
  local wrong
  for wrong in "write send" "read write"; do
    next_port
    start "wrong_${wrong% *}" ib_"${wrong% *}"_bw -d "${entry% *}" -x "${entry#* }" -p "$PORT" -n 50
    wait_tcp_listening "$PORT"
    run "ours_${wrong#* }" 30 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" --oob --op "${wrong#* }" -n 50 --timeout 3
    expect_rc 1 "send_bw --oob --op ${wrong#* } against ib_${wrong% *}_bw"
    expect_grep ": is the server ib_${wrong#* }_bw without -R, given -s 65536 or more?\$" "ours_${wrong#* }.err"
    [[ $(wc -l < "$T/ours_${wrong#* }.err") -eq 1 ]] || fail "more than one line: $(cat "$T/ours_${wrong#* }.err")"
    finish "wrong_${wrong% *}" 5  # perftest's server, its peer gone: killed if it waits on
  done
  run atomic 10 "$OURS_SEND_BW" "$RXE_ADDR" --oob --op atomic
  expect_rc 2 "send_bw --oob --op atomic"
  expect_grep "^send_bw: --oob does not run atomics yet" atomic.err
  perftest_latency_pairs client
}

# perftest_latency_pairs OURS: ib_send_lat, ib_write_lat and ib_read_lat against send_bw
# --oob --lat, OURS the client or the server, -n 200 at perftest's 2 bytes: both ends exit
# 0; a side of ours that times (the client; a WRITE server too: both sides time their
# lockstep) reports -n exchanges, and where both sides time (WRITE) our median is within a
# factor of 3 of the stock side's typical.
perftest_latency_pairs() {
  local ours=$1 op entry iterations=200 stock ours_out
  entry=$(gid_index_sysfs "$RXE_ADDR") || fail "no RoCE v2 GID holds $RXE_ADDR"
  for op in send write read; do
    next_port
    stock=(ib_"$op"_lat -d "${entry% *}" -x "${entry#* }" -p "$PORT" -n "$iterations")
    ours_out="lat_ours_$op"
    if [[ $ours == client ]]; then
      start "lat_stock_$op" "${stock[@]}"
      wait_tcp_listening "$PORT"
      run "$ours_out" 60 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" --oob --lat --op "$op" -n "$iterations" --json
      expect_rc 0 "send_bw --oob --lat --op $op against ib_${op}_lat's server"
      finish "lat_stock_$op" 30
    else
      start "$ours_out" "$OURS_SEND_BW" -p "$PORT" --oob --lat --op "$op" -n "$iterations" --accept-timeout 60 --json
      wait_tcp_listening "$PORT"
      run "lat_stock_$op" 60 "${stock[@]}" "$RXE_ADDR"
      expect_rc 0 "ib_${op}_lat against send_bw --oob --lat's server"
      finish "$ours_out" 30
    fi
    expect_rc 0 "ib_${op}_lat and send_bw --oob --lat --op $op ($ours)"
    expect_jq '.outcome == "completed" and .test.test == "lat" and .test.exchange.peer_version == "6.06"' "$ours_out.out"
    expect_schema send_bw "$ours_out.out"
    # The sides that time: the client, and both WRITE sides (their lockstep).
    if [[ $ours == client || $op == write ]]; then
      expect_jq '.rows | length == 1 and .[0].bytes == 2 and .[0].iterations >= '"$((iterations - 1))" "$ours_out.out"
    else
      expect_jq '.rows == []' "$ours_out.out"
    fi
    if [[ $ours == server || $op == write ]]; then
      local typical
      typical=$(awk '/t_typical/ {getline; print $5; exit}' "$T/lat_stock_$op.out")
      [[ -n $typical ]] || fail "ib_${op}_lat printed no t_typical row"
      if [[ $ours == client ]]; then
        expect_jq '.rows[0].t_median_us < 3 * '"$typical"' and .rows[0].t_median_us > '"$typical"' / 3' "$ours_out.out"
      fi
      note "lat $op (ours the $ours): ours $(jq -r '.rows[0].t_median_us // "-"' "$T/$ours_out.out") us, ib_${op}_lat's t_typical $typical us"
    fi
  done
}

# --oob without an address: our server for the stock perftest clients. WRITE, READ and SEND
# each complete on both sides; a WRITE or READ server (which sees nothing of the run) reports
# the client's own figures as its row, to the hundredth the client printed, and says so; a
# SEND server measures the stream itself, every message counted. Then a client outside
# --allow, closed before a byte is read, and garbage from inside, refused once read: the
# server goes on waiting for one it may serve. Then the latency programs' clients.
# Sanitized: the server decodes everything the client sends.
# ctest: integration sanitized
case_send_bw_perftest_client() {
  require_device
  local entry op iterations=300
  entry=$(gid_index_sysfs "$RXE_ADDR") || fail "no RoCE v2 GID holds $RXE_ADDR"
  for op in write read send; do
    next_port
    start "ours_$op" "$OURS_SEND_BW" --oob --op "$op" -p "$PORT" --accept-timeout 60 --json
    wait_tcp_listening "$PORT"
    run "ib_$op" 60 ib_"$op"_bw -d "${entry% *}" -x "${entry#* }" -p "$PORT" -n "$iterations" "$RXE_ADDR"
    expect_rc 0 "ib_${op}_bw against send_bw --oob's server"
    finish "ours_$op" 30
    expect_rc 0 "send_bw --oob --op $op, the server of ib_${op}_bw"
    local measured_by=peer
    [[ $op == send ]] && measured_by=self
    expect_jq '.outcome == "completed" and .role == "server"
      and .test.exchange == {"method": "perftest", "peer_version": "6.06", "rows_measured_by": "'"$measured_by"'"}
      and (.rows | length) == 1 and .rows[0].iterations == '"$iterations"' and .rows[0].bytes == 65536
      and .test.path.gid_index == '"${entry#* }" "ours_$op.out"
    expect_schema send_bw "ours_$op.out"
    # A WRITE or READ server of ours reports the client's figures as its row.
    expect_perftest_row "ib_$op" "ours_$op" "$iterations" "$([[ $op != send ]] && echo same)"
    note "$op: our server's row $(jq -r '.rows[0].bw_average_mib_per_s * 100 | round / 100' "$T/ours_$op.out") MiB/s ($measured_by); ib_${op}_bw's: $PERFTEST_ROW"
  done

  # Outside --allow: the client's connection is closed unread (the stock client then fails
  # its first read), and the server still serves one it may: here the one that comes over
  # loopback (its RDMA at the GID -x names, which no address of loopback's holds).
  next_port
  start ours_allow "$OURS_SEND_BW" --oob --op write -p "$PORT" -x "${entry#* }" --allow 127.0.0.1/32 \
    --accept-timeout 60 --json
  wait_tcp_listening "$PORT"
  run outsider 30 ib_write_bw -d "${entry% *}" -x "${entry#* }" -p "$PORT" -n 10 "$RXE_ADDR"
  [[ $RC -ne 0 ]] || fail "ib_write_bw from outside --allow completed"
  kill -0 "$PID_ours_allow" 2> /dev/null || fail "the server ended after refusing a client outside --allow"
  # From inside, 64 KiB of garbage: no perftest, so refused, and the server goes on.
  attack garbage 127.0.0.1 "$PORT" --bytes 65536 --hold 2 > "$T/garbage.attack" 2>&1 ||
    fail "the garbage sender: $(cat "$T/garbage.attack")"
  expect_jq '.closed == 1' garbage.attack
  run insider 60 ib_write_bw -d "${entry% *}" -x "${entry#* }" -p "$PORT" -n 10 127.0.0.1
  expect_rc 0 "ib_write_bw from inside --allow"
  finish ours_allow 30
  expect_rc 0 "send_bw --oob --allow 127.0.0.1/32"
  expect_jq '.refused_peers.not_allowed == 1 and .rows[0].iterations == 10
    and ([.refused[] | select(.reason | contains("version"))] | length) == 1' ours_allow.out

  # -a: ib_read_bw -a's client, its last size's figures our row (a wide --timeout: the stock
  # end makes its 8 MiB buffers in the exchange, slowly on a starved guest).
  local attempt
  for attempt in 1 2 3; do
    next_port
    start ours_sweep "$OURS_SEND_BW" --oob --op read -p "$PORT" -a --accept-timeout 60 --json --timeout 30
    wait_tcp_listening "$PORT"
    run ib_sweep 120 ib_read_bw -d "${entry% *}" -x "${entry#* }" -p "$PORT" -n 5 -a "$RXE_ADDR"
    perftest_clock_unmeasured ib_sweep || break
    note "ib_read_bw -a could not measure its CPU clock (try $attempt of 3): $(grep "r^2" "$T/ib_sweep.err")"
    finish ours_sweep 30
  done
  expect_rc 0 "ib_read_bw -a against send_bw --oob -a's server"
  finish ours_sweep 30
  expect_rc 0 "send_bw --oob --op read -a, the server of ib_read_bw -a"
  expect_jq '(.rows | length) == 1 and .rows[0].bytes == 8388608 and .rows[0].iterations == 5' ours_sweep.out
  perftest_latency_pairs server
}
