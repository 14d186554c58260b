# The ThreadSanitizer build's cases (label tsan, tests/tsan.cmake): the servers that run a
# thread per client (rdma_server -P, rping -P) or serve several clients at once, with clients arriving together. With
# TSAN_OPTIONS=halt_on_error=1 a report ends the process with exit 66, which each case's
# exit check catches; expect_no_tsan_report also reads what every process printed, for a
# report from a process whose exit the case does not check (a client killed on purpose).

# expect_no_tsan_report: no ThreadSanitizer report in any output of the case.
expect_no_tsan_report() {
  local reported
  reported=$(grep -l 'WARNING: ThreadSanitizer' "$T"/*.err "$T"/*.out 2> /dev/null)
  [[ -z $reported ]] || fail "ThreadSanitizer reports in: $(echo "$reported" | tr '\n' ' ')"
}

# stop_when_served NAME: once the server $PID_NAME holds no queue pair (its last connection
# torn down, after its clients exited), SIGINT; it must end with 130. A client exits once
# it has its result, while the server may still be ending that connection: a signal then
# would make it an interrupted one.
stop_when_served() {
  local pid
  eval "pid=\$PID_$1"
  poll_until 60 "$1 still holds queue pairs 60 s after its clients ended" server_holds_no_qp "$pid"
  tick 0.5
  kill -INT "$pid"
  finish "$1" 60
  expect_rc 130 "$1 after SIGINT"
}
server_holds_no_qp() { ! rdma res show qp 2> /dev/null | grep -q " pid $1 "; }

# rdma_server -P, a thread per client: 20 clients at once (4 of ours, 16 of the stock
# rdma_client, which starts faster in the TCG guest), each served and passing.
# ctest: tsan
case_tsan_echo_clients() {
  require_device
  next_port
  # The first client connects only after all 20 have started, which under TSan in the guest
  # takes a while: a patient --accept-timeout; SIGINT ends the server once all are served.
  start pserver "$OURS_RDMA_SERVER" -P -s "$RXE_ADDR" -p "$PORT" --accept-timeout 120 --timeout 30 --json
  wait_listening "$PORT" 30
  local c
  for ((c = 0; c < 20; c++)); do
    if ((c < 4)); then
      start "c$c" "$OURS_RDMA_CLIENT" -s "$RXE_ADDR" -p "$PORT" -C 10 --timeout 60
    else
      start "c$c" rdma_client -s "$RXE_ADDR" -p "$PORT"
    fi
  done
  for ((c = 0; c < 20; c++)); do
    finish "c$c" 180
    expect_rc 0 "concurrent client $c of 20"
  done
  stop_when_served pserver
  expect_schema rdma_server pserver.out
  expect_jq '(.errors | length == 0) and (.connections | length == 20)' pserver.out
  expect_jq '[.connections[].outcome] | all(. == "completed")' pserver.out
  expect_jq '[.connections[].iterations] | add == 56' pserver.out
  expect_no_tsan_report
}

# rping -P, a thread per client as well, with its own exchange: 8 stock rping clients at once.
# ctest: tsan
case_tsan_rping_clients() {
  require_device
  next_port
  start pserver "$OURS_RPING" -s -P -a "$RXE_ADDR" -p "$PORT" -V --json
  wait_listening "$PORT" 30
  local c
  for ((c = 0; c < 8; c++)); do
    start "c$c" "$STOCK_RPING" -c -a "$RXE_ADDR" -p "$PORT" -C 20 -V
  done
  for ((c = 0; c < 8; c++)); do
    finish "c$c" 180
    expect_stock_client_rc "c$c" "stock client $c of 8"
  done
  stop_when_served pserver
  expect_schema rping pserver.out
  expect_jq '(.connections | length == 8) and ([.connections[].outcome] | all(. == "completed"))' pserver.out
  expect_jq '.iterations.completed == 160' pserver.out
  expect_no_tsan_report
}

# send_bw -P: four clients started together; the server runs one test at a time and the
# others wait their turn.
# ctest: tsan
case_tsan_send_bw_queue() {
  require_device
  next_port
  start pserver "$OURS_SEND_BW" -P --bind "$RXE_ADDR" -p "$PORT" --accept-timeout 120 --json
  wait_listening "$PORT" 30
  start c0 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -s 4096 -n 100 --timeout 120 --json
  start c1 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" --op write --test lat -n 50 --timeout 120 --json
  start c2 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" --op read -s 8192 -n 100 -q 2 --timeout 120 --json
  start c3 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -s 1024 -n 100 -b --timeout 120 --json
  local c
  for ((c = 0; c < 4; c++)); do
    finish "c$c" 200
    expect_rc 0 "client $c of 4, started together"
  done
  stop_when_served pserver
  expect_schema send_bw pserver.out
  expect_jq '(.errors | length == 0) and (.connections | length == 4)' pserver.out
  expect_jq '[.connections[].outcome] | all(. == "completed")' pserver.out
  expect_no_tsan_report
}

# The diag-connect agent answering three clients that ask at once.
# ctest: tsan
case_tsan_agent() {
  require_device
  start_local_agent
  local c
  for ((c = 0; c < 3; c++)); do
    start "ask$c" "$OURS_DIAG_CONNECT" "$RXE_ADDR" -p "$AGENT_PROBE_PORT" --agent-port "$AGENT_SIDE_PORT" \
      --timeout 30 --json
  done
  for ((c = 0; c < 3; c++)); do
    finish "ask$c" 120
    expect_rc 0 "diag-connect client $c of 3"
    expect_jq '.verdict.cause == "ok" and .capture.agent.status == "ok"' "ask$c.out"
    expect_schema diag-connect "ask$c.out"
  done
  stop_local_agent
  expect_jq '.agent.answers >= 3' agent.out
  expect_no_tsan_report
}

# rdma_smoke --serve and --peer in one guest: rping and send_bw (a connected pair and a
# measurement) in both directions, so each side runs servers and clients for the other.
# ctest: tsan
case_tsan_smoke_serve() {
  require_device
  next_port
  local control=$PORT
  next_port
  start serving "$OURS_SMOKE" --serve "$RXE_ADDR" -p "$PORT" --control-port "$control" --accept-timeout 120 --json
  wait_for_line serving.err "control port" 60
  smoke across 360 --peer "$RXE_ADDR" -p "$PORT" --control-port "$control" --tools rping,send_bw --case-timeout 120
  expect_rc 0 "rdma_smoke --peer"
  finish serving 60
  expect_rc 0 "rdma_smoke --serve"
  expect_jq '.smoke.failed == 0 and .smoke.passed == (.smoke.cases | length) and (.smoke.cases | length) >= 4' across.out
  expect_schema rdma_smoke serving.out
  note "$(jq -r '.smoke.cases[] | "\(.name): \(.outcome) in \(.seconds * 10 | round / 10) s"' "$T/across.out")"
  expect_no_tsan_report
}
