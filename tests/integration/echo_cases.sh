# rdma_server / rdma_client cases: ours with ours, ours with the stock tools both ways, and
# every way a peer can be missing ends within the timeout.

# ctest: integration quick
case_echo_self() {
  require_device
  next_port
  start server "$OURS_RDMA_SERVER" -s "$RXE_ADDR" -p "$PORT" --accept-timeout 20 --json
  wait_listening "$PORT"
  run client 30 "$OURS_RDMA_CLIENT" -s "$RXE_ADDR" -p "$PORT" -C 50 --json
  expect_rc 0 "our client with our server"
  finish server 10
  expect_rc 0 "our server"
  expect_jq '.outcome == "completed" and .iterations.completed == 50 and .bytes == 1600 and .rtt_us.count == 50' \
    client.out
  expect_jq '[.cm_timings_ms | keys[]] | contains(["getaddrinfo","create_ep","connect","disconnect"])' client.out
  expect_jq '[.timings_ms | keys[]] | contains(["reg_msgs","transfer"])' client.out
  expect_jq '.outcome == "completed" and .iterations.completed == 50 and (.cm_timings_ms | has("accept"))' server.out
  expect_schema rdma_server server.out
  expect_schema rdma_client client.out
  note "rtt p50 $(jq .rtt_us.p50 "$T/client.out") us over 50 exchanges; inline $(jq .inline_send "$T/client.out")"
  expect_jq '.inline_send == true' client.out
  # Both QPs tell a peer that found no receive posted to wait 0.64 ms, not the CM's 655 ms.
  expect_jq '.rnr_nak_timer == 12' client.out
  expect_jq '.rnr_nak_timer == 12' server.out
  # The path for devices without inline sends: messages from registered memory, both sides.
  next_port
  start server2 "$OURS_RDMA_SERVER" -s "$RXE_ADDR" -p "$PORT" --accept-timeout 20 --json --no-inline
  wait_listening "$PORT"
  run noinline 30 "$OURS_RDMA_CLIENT" -s "$RXE_ADDR" -p "$PORT" -C 10 --json --no-inline
  expect_rc 0 "client without inline sends"
  finish server2 10
  expect_rc 0 "server without inline sends"
  expect_jq '.inline_send == false and .iterations.completed == 10' noinline.out
  expect_jq '.inline_send == false and .iterations.completed == 10' server2.out
}

# ctest: integration
case_echo_stock_server() {
  require_device
  command -v rdma_server > /dev/null || { echo "SKIP: stock rdma_server missing"; exit 77; }
  next_port
  start stock rdma_server -s "$RXE_ADDR" -p "$PORT"
  wait_listening "$PORT"
  run client 30 "$OURS_RDMA_CLIENT" -s "$RXE_ADDR" -p "$PORT" --json
  expect_rc 0 "our client with the stock server"
  expect_jq '.outcome == "completed" and .iterations.completed == 1' client.out
  finish stock 10
  expect_rc 0 "stock rdma_server"
  expect_grep "rdma_server: end 0" stock.out
  # The stock server answers once: asking for more ends as a peer disconnect, not a hang.
  next_port
  start stock2 rdma_server -s "$RXE_ADDR" -p "$PORT"
  wait_listening "$PORT"
  run more 30 "$OURS_RDMA_CLIENT" -s "$RXE_ADDR" -p "$PORT" -C 3 --json --timeout 3
  expect_rc 1 "three exchanges with a one-shot stock server"
  expect_jq '.outcome == "peer_disconnected" and .iterations.completed == 1' more.out
}

# ctest: integration quick
case_echo_stock_client() {
  require_device
  command -v rdma_client > /dev/null || { echo "SKIP: stock rdma_client missing"; exit 77; }
  next_port
  start server "$OURS_RDMA_SERVER" -s "$RXE_ADDR" -p "$PORT" --accept-timeout 20 --json
  wait_listening "$PORT"
  run stock 30 rdma_client -s "$RXE_ADDR" -p "$PORT"
  expect_rc 0 "stock rdma_client with our server"
  expect_grep "rdma_client: end 0" stock.out
  finish server 10
  expect_rc 0 "our server"
  expect_jq '.outcome == "completed" and .iterations.completed == 1' server.out
}

# ctest: integration
case_echo_no_peer() {
  require_device
  next_port
  # Nobody listens: rejected at once.
  run refused 15 "$OURS_RDMA_CLIENT" -s "$RXE_ADDR" -p "$PORT" --timeout 2 --json
  expect_rc 1 "client to a port nobody listens on"
  expect_jq '.errors[0].call == "rdma_connect" and .errors[0].errno_name == "ECONNREFUSED"' refused.out
  # Nobody answers at all: timeout + 2 s at most.
  run silent 15 "$OURS_RDMA_CLIENT" -s "${RXE_ADDR%.*}.99" -p "$PORT" --timeout 2 --json
  expect_rc 1 "client to a silent address"
  # The wait ends within timeout + 2 s; the wall clock also pays process start-up, which
  # under ASan in a busy emulated guest has taken over 10 s: no bound on it beyond the
  # run's own limit.
  expect_jq '.outcome == "timed_out"' silent.out
  expect_wait_bounded silent.out 4.0
  note "silent peer: exit 1, run $(jq .duration_s "$T/silent.out") s, wall $ELAPSED_MS ms"
  # No client comes.
  run lonely 15 "$OURS_RDMA_SERVER" -s "$RXE_ADDR" -p "$PORT" --accept-timeout 1 --json
  expect_rc 1 "server nobody connects to"
  expect_jq '.outcome == "timed_out"' lonely.out
  # An address without RDMA: the diag-bind hint, and the diagnosis with --diagnose.
  run nordma 15 "$OURS_RDMA_SERVER" -s "$PLAIN_ADDR" -p "$PORT" --json --diagnose
  expect_rc 1 "server on an address without RDMA"
  expect_jq '.errors[0].call == "rdma_create_ep" and .diagnosis.verdict.cause == "netdev_without_rdma"' nordma.out
}

# ctest: nodevice
case_echo_bad_flags() {
  local args
  for args in "-p 0" "-p 70000" "-C 0" "-C x" "--timeout 0" "--bogus" "extra"; do
    # shellcheck disable=SC2086
    run bad 10 "$OURS_RDMA_CLIENT" $args
    expect_rc 2 "rdma_client $args"
  done
  for args in "-p 0" "--accept-timeout -1" "--bogus"; do
    # shellcheck disable=SC2086
    run bad 10 "$OURS_RDMA_SERVER" $args
    expect_rc 2 "rdma_server $args"
  done
}

# rdma_server -P: clients one after another and at once, ours and stock, each its own record;
# a client that leaves mid-exchange is its own failure, and --accept-timeout (idle) ends the
# server normally.
# ctest: integration sanitized
case_echo_persistent() {
  require_device
  next_port
  # --accept-timeout 30: in a busy guest the last client's start took more than 10 s, and the
  # idle server had gone when it came.
  start pserver "$OURS_RDMA_SERVER" -P -s "$RXE_ADDR" -p "$PORT" --accept-timeout 30 --timeout 3 --json
  wait_listening "$PORT"
  run c1 30 "$OURS_RDMA_CLIENT" -s "$RXE_ADDR" -p "$PORT" -C 10
  expect_rc 0 "our client"
  run c2 30 rdma_client -s "$RXE_ADDR" -p "$PORT"
  expect_rc 0 "stock client"
  start c3 "$OURS_RDMA_CLIENT" -s "$RXE_ADDR" -p "$PORT" -C 30
  start c4 "$OURS_RDMA_CLIENT" -s "$RXE_ADDR" -p "$PORT" -C 30
  start c5 rdma_client -s "$RXE_ADDR" -p "$PORT"
  finish c3 30; expect_rc 0 "concurrent client 3"
  finish c4 30; expect_rc 0 "concurrent client 4"
  finish c5 30; expect_rc 0 "concurrent stock client 5"
  start victim "$OURS_RDMA_CLIENT" -s "$RXE_ADDR" -p "$PORT" -C 2000000000
  eval "wait_connected \$PID_victim 20; kill -9 \$PID_victim"
  finish victim 5
  finish pserver 60
  expect_rc 0 "persistent server idle for --accept-timeout"
  expect_schema rdma_server pserver.out
  expect_jq '.outcome == "completed" and (.errors | length == 0) and (.connections | length == 6)' pserver.out
  expect_jq '[.connections[] | select(.outcome == "completed")] | length == 5' pserver.out
  expect_jq '[.connections[] | select(.outcome == "completed") | .iterations] | add == 72' pserver.out
  note "killed client: $(jq -c '.connections[] | select(.outcome != "completed") | [.outcome, .error]' "$T/pserver.out")"
}
