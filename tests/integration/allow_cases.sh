# --allow on every listener: a client from outside the allow list (the guest's second
# address, $RXE_ADDR2, as its source, with --allow $RXE_ADDR/32) is refused, the server
# logs one line naming it and counts it in refused_peers, and an allowed client is served
# afterwards by the same server. The default of the agent and the smoke server (the local
# subnets) is unit-tested: every address of the guest is local to it.

# tcp_from NAME SOURCE PORT: a TCP connection from SOURCE to $RXE_ADDR:PORT; $T/NAME.out
# holds how many bytes came before the server closed (or 10 s passed).
tcp_from() {
  run "$1" 20 "${RDMAKIT_PYTHON:-python3}" -c '
import socket, sys
s = socket.socket()
s.bind((sys.argv[1], 0))
s.settimeout(10)
s.connect((sys.argv[2], int(sys.argv[3])))
got = b""
try:
    while len(got) < 4096:
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
except socket.timeout:
    pass
print(len(got))' "$2" "$RXE_ADDR" "$3"
}

# expect_refused_line NAME: the server's stderr names the refused source once, with why.
expect_refused_line() {
  local lines
  lines=$(grep -c "refused $RXE_ADDR2 port [0-9]*: not in --allow $RXE_ADDR/32" "$T/$1" || true)
  [[ $lines -eq 1 ]] || fail "$1: $lines refusal lines for $RXE_ADDR2, expected 1: $(head -c 600 "$T/$1")"
}

# ctest: integration
case_allow_rping() {
  require_device
  next_port
  start server "$OURS_RPING" -s -P -a "$RXE_ADDR" -p "$PORT" --allow "$RXE_ADDR/32" --json
  wait_listening "$PORT"
  run outside 30 "$OURS_RPING" -c -a "$RXE_ADDR" -I "$RXE_ADDR2" -p "$PORT" -C 2
  [[ $RC -ne 0 ]] || fail "rping from $RXE_ADDR2 was served"
  expect_grep "the server refused: not in --allow $RXE_ADDR/32" outside.err
  run inside 30 "$OURS_RPING" -c -a "$RXE_ADDR" -p "$PORT" -C 2 -V
  expect_rc 0 "rping from $RXE_ADDR after a refused one"
  kill -INT "$PID_server"
  finish server 20
  expect_rc 130 "rping -s -P after SIGINT"
  expect_refused_line server.err
  expect_jq '.refused_peers == {"total": 1, "not_allowed": 1, "too_fast": 0, "too_many": 0}
    and (.connections | length == 1) and .connections[0].outcome == "completed"' server.out
  expect_schema rping server.out
}

# ctest: integration
case_allow_echo() {
  require_device
  next_port
  start server "$OURS_RDMA_SERVER" -s "$RXE_ADDR" -p "$PORT" -P --allow "$RXE_ADDR/32" --max-clients 1 --json
  wait_listening "$PORT"
  # rdma_client has no source option: rping from outside is refused before any protocol.
  run outside 30 "$OURS_RPING" -c -a "$RXE_ADDR" -I "$RXE_ADDR2" -p "$PORT" -C 1
  [[ $RC -ne 0 ]] || fail "a client from $RXE_ADDR2 was served"
  expect_grep "the server refused: not in --allow $RXE_ADDR/32" outside.err
  run inside 30 "$OURS_RDMA_CLIENT" -s "$RXE_ADDR" -p "$PORT" -C 5
  expect_rc 0 "rdma_client from $RXE_ADDR after a refused one"
  kill -INT "$PID_server"
  finish server 20
  expect_rc 130 "rdma_server -P after SIGINT"
  expect_refused_line server.err
  expect_jq '.refused_peers.not_allowed == 1 and .refused_peers.total == 1
    and (.connections | length == 1) and .connections[0].outcome == "completed"' server.out
  expect_schema rdma_server server.out
}

# ctest: integration
case_allow_send_bw() {
  require_device
  next_port
  start server "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --allow "$RXE_ADDR/32" --json --accept-timeout 60
  wait_listening "$PORT"
  run outside 30 "$OURS_SEND_BW" "$RXE_ADDR" --bind "$RXE_ADDR2" -p "$PORT" -n 10 -s 4096
  [[ $RC -ne 0 ]] || fail "send_bw from $RXE_ADDR2 was served"
  expect_grep "not in --allow $RXE_ADDR/32" outside.err
  run inside 30 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -n 10 -s 4096
  expect_rc 0 "send_bw from $RXE_ADDR after a refused one"
  finish server 20
  expect_rc 0 "send_bw server"
  expect_refused_line server.err
  expect_jq '.refused_peers.not_allowed == 1 and .refused_peers.total == 1' server.out
  expect_schema send_bw server.out
}

# ctest: integration
case_allow_group() {
  require_device
  next_port
  start server "$OURS_UCMATOSE" -b "$RXE_ADDR" -p "$PORT" -c 1 --allow "$RXE_ADDR/32" --json --accept-timeout 60
  wait_listening "$PORT"
  run outside 30 "$OURS_UCMATOSE" -s "$RXE_ADDR" -b "$RXE_ADDR2" -p "$PORT" -c 1 --timeout 10
  [[ $RC -ne 0 ]] || fail "ucmatose from $RXE_ADDR2 was served"
  expect_grep "the server refused: not in --allow $RXE_ADDR/32" outside.err
  run inside 30 "$OURS_UCMATOSE" -s "$RXE_ADDR" -p "$PORT" -c 1 --timeout 10
  expect_rc 0 "ucmatose from $RXE_ADDR after a refused one"
  finish server 20
  expect_rc 0 "ucmatose server"
  expect_refused_line server.err
  expect_jq '.refused_peers.not_allowed == 1 and .connections_ready == 1
    and ([.events[] | select(.rejected == "refused")] | length == 1)' server.out
  expect_schema ucmatose server.out
}

# ctest: integration
case_allow_agent() {
  require_device
  next_port
  local probe=$PORT
  next_port
  local aport=$PORT
  start agent "$OURS_DIAG_CONNECT" --serve -p "$probe" --agent-port "$aport" --allow "$RXE_ADDR/32,127.0.0.1/32" \
    --peer-rate 3 --log-level info --json
  wait_for_line agent.err "answering only $RXE_ADDR/32, 127.0.0.1/32" 20
  wait_listening "$probe"
  # The side channel: closed at once, not even the handshake's hello.
  tcp_from side_outside "$RXE_ADDR2" "$aport"
  [[ $(cat "$T/side_outside.out") == 0 ]] || fail "the side channel sent $(cat "$T/side_outside.out") bytes to $RXE_ADDR2"
  # A probe from outside: rejected with the reason.
  run probe_outside 30 "$OURS_DIAG_CONNECT" "$RXE_ADDR" -p "$probe" --no-agent -b "$RXE_ADDR2" --json --timeout 5
  expect_jq '.capture.attempt.rejection != null' probe_outside.out
  grep -q "not in --allow $RXE_ADDR/32" "$T/probe_outside.out" ||
    fail "diag-connect from $RXE_ADDR2 did not print the agent's reason: $(head -c 600 "$T/probe_outside.out")"
  run inside 30 "$OURS_DIAG_CONNECT" "$RXE_ADDR" -p "$probe" --agent-port "$aport" --json --timeout 5
  expect_jq '.capture.agent.status == "ok" and .capture.attempt.peer_is_agent' inside.out
  # --peer-rate 3: a peer of its own (127.0.0.1, allowed) opens and closes six side-channel
  # connections at once; those beyond three in 10 s are refused as too fast.
  run burst 30 "${RDMAKIT_PYTHON:-python3}" -c '
import socket, sys
for _ in range(6):
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10, source_address=("127.0.0.1", 0))
    s.close()' "$RXE_ADDR" "$aport"
  expect_rc 0 "six connections from 127.0.0.1"
  wait_for_line agent.err "refused 127.0.0.1 port [0-9]*: more than 3 new connections" 20
  kill -TERM "$PID_agent"
  finish agent 10
  expect_rc 0 "the agent, stopped with SIGTERM"
  local lines
  lines=$(grep -c "refused $RXE_ADDR2 port" "$T/agent.err" || true)
  [[ $lines -eq 2 ]] || fail "agent: $lines refusal lines, expected 2 (side channel, probe)"
  expect_jq '.refused_peers.not_allowed == 2 and .refused_peers.too_fast >= 1 and .agent.answers == 1' agent.out
  expect_schema diag-connect agent.out
}

# ctest: integration
case_allow_smoke() {
  require_device
  next_port
  local control=$PORT
  next_port
  start serving "$OURS_SMOKE" --serve "$RXE_ADDR" -p "$PORT" --control-port "$control" --accept-timeout 120 \
    --allow "$RXE_ADDR/32" --json
  wait_for_line serving.err "answering only $RXE_ADDR/32" 20
  wait_for_line serving.err "control port" 20
  tcp_from outside "$RXE_ADDR2" "$control"
  [[ $(cat "$T/outside.out") == 0 ]] || fail "the control port sent $(cat "$T/outside.out") bytes to $RXE_ADDR2"
  # Still waiting: the allowed peer is served.
  run peer 120 "$OURS_SMOKE" --peer "$RXE_ADDR" -p "$PORT" --control-port "$control" --tools rping \
    --direction forward
  expect_rc 0 "rdma_smoke --peer from $RXE_ADDR after a refused one"
  finish serving 30
  expect_rc 0 "rdma_smoke --serve"
  expect_refused_line serving.err
  expect_jq '.refused_peers.not_allowed == 1 and .smoke.passed == 1' serving.out
  expect_schema rdma_smoke serving.out
  # Only a refused peer before the accept timeout: the run ends timed out, and its report
  # still counts whom it refused.
  next_port
  start lonely "$OURS_SMOKE" --serve "$RXE_ADDR" -p "$PORT" --control-port "$control" --accept-timeout 6 \
    --allow "$RXE_ADDR/32" --json
  wait_for_line lonely.err "control port" 20
  tcp_from outside2 "$RXE_ADDR2" "$control"
  finish lonely 30
  ((RC != 0)) || fail "rdma_smoke --serve with no allowed peer: exit 0"
  expect_jq '.refused_peers.not_allowed == 1 and .outcome == "timed_out"' lonely.out
  expect_schema rdma_smoke lonely.out
}
