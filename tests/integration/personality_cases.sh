# Cases on the real rxe device given another provider's limits (tests/personality, an
# LD_PRELOAD library over libibverbs): what the tools meet on cxgb4 and irdma, which rxe
# alone never shows. Both ends run under the personality, as two such hosts would.

# as_provider NAME: sets AS_PROVIDER, the words that run a command with provider NAME's
# limits on the rxe device ("${AS_PROVIDER[@]}" COMMAND...: run and start take it too).
as_provider() {
  AS_PROVIDER=(env LD_PRELOAD="$TEST_BIN/libprovider_personality.so" RDMAKIT_PERSONALITY="$1")
}

# personality_send_bw NAME SERVER CLIENT CLIENT_ARGS...: our send_bw server and client, both
# with NAME's limits; sets RC to the client's exit, SERVER_RC to the server's.
personality_send_bw() {
  local server=$2 client=$3
  as_provider "$1"
  shift 3
  next_port
  start "$server" "${AS_PROVIDER[@]}" "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --json --accept-timeout 20 \
    --log-level info
  wait_listening "$PORT"
  run "$client" 60 "${AS_PROVIDER[@]}" "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" "$@" --json --log-level info
  local client_rc=$RC
  finish "$server" 15
  SERVER_RC=$RC
  RC=$client_rc
}

# cxgb4 (iWARP): 8 READs each way, no atomics, no UD, no immediate data, READ sinks that
# need remote write. Before the capability model, send_bw failed at rdma_connect with
# EINVAL in every mode.
case_personality_cxgb4() {
  require_device
  local op
  as_provider cxgb4
  for op in send write read; do
    personality_send_bw cxgb4 "server_$op" "client_$op" --op "$op" -s 4096 -n 500
    expect_rc 0 "send_bw --op $op with cxgb4's limits"
    [[ $SERVER_RC == 0 ]] || fail "send_bw server for --op $op with cxgb4's limits: exit $SERVER_RC"
    expect_jq ".outcome == \"completed\" and .rows[0].iterations == 500" "client_$op.out"
    note "--op $op 4 KiB: $(jq -c '.rows[0].bw_average_mib_per_s' "$T/client_$op.out") MiB/s"
  done
  expect_grep "allows 8 RDMA READs" client_read.err
  # rping: READ and WRITE round trips, one read in flight.
  as_provider cxgb4
  next_port
  start rping_server "${AS_PROVIDER[@]}" "$OURS_RPING" -s -a "$RXE_ADDR" -p "$PORT" --accept-timeout 20
  wait_listening "$PORT"
  run rping_client 30 "${AS_PROVIDER[@]}" "$OURS_RPING" -c -a "$RXE_ADDR" -p "$PORT" -C 20 --json
  expect_rc 0 "rping with cxgb4's limits"
  finish rping_server 15
  expect_rc 0 "rping server with cxgb4's limits"
  # What iWARP cannot do is a skip (77) with the reason, not a bare EOPNOTSUPP.
  next_port
  run udaddy 30 "${AS_PROVIDER[@]}" "$OURS_UDADDY" -s "$RXE_ADDR" --port "$PORT" --json
  expect_rc 77 "udaddy with cxgb4's limits"
  expect_jq '.errors[0].message | test("rxe0 is iWARP: it has no unreliable datagrams \\(UD\\), which need RoCE or InfiniBand")' udaddy.out
  run send_bw_ud 30 "${AS_PROVIDER[@]}" "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -c UD --json
  expect_rc 77 "send_bw -c UD with cxgb4's limits"
  run atomics 30 "${AS_PROVIDER[@]}" "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" --op atomic --json
  expect_rc 77 "send_bw --op atomic with cxgb4's limits"
  expect_jq '.errors[0].message | test("does not do atomics")' atomics.out
  run latency 30 "${AS_PROVIDER[@]}" "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" --lat --json
  expect_rc 77 "send_bw --lat with cxgb4's limits"
  expect_jq '.errors[0].message | test("iWARP, which carries no immediate data")' latency.out
  # rdma_smoke counts what the device cannot do as skipped, and passes.
  run smoke 120 "${AS_PROVIDER[@]}" "$OURS_SMOKE" --json
  expect_rc 0 "rdma_smoke with cxgb4's limits"
  expect_jq '[.smoke.cases[] | select(.outcome == "skipped") | .case] == ["udaddy", "mckey", "send_bw.latency"]
    and .smoke.failed == 0' smoke.out
  pingmesh_pinglist pinglist node-a "$RXE_ADDR"
  run pingmesh 30 "${AS_PROVIDER[@]}" "$OURS_PINGMESH" --pinglist "$T/pinglist" -p "$PORT" --name node-a --duration 2 --json
  expect_rc 77 "rdma_pingmesh with cxgb4's limits"
}

# irdma: 48 inline bytes. Before, the send_bw server asked for 64 with no fallback and
# refused every client (reject reason 28).
case_personality_irdma() {
  require_device
  personality_send_bw irdma server client -s 32 -n 2000
  expect_rc 0 "send_bw with irdma's limits"
  [[ $SERVER_RC == 0 ]] || fail "send_bw server with irdma's limits: exit $SERVER_RC"
  expect_grep "refuses 64 inline bytes; sending up to 48 inline" server.err
  expect_jq '.test.inline_bytes == 48' client.out
  personality_send_bw irdma server_lat client_lat --lat -s 32 -n 200
  expect_rc 0 "send_bw --lat with irdma's limits"
  # A bigger -I steps down to the most the device grants.
  as_provider irdma
  run big_inline 30 "${AS_PROVIDER[@]}" "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -I 256 --timeout 2 --json --log-level info
  expect_grep "refuses 256 inline bytes; sending up to 48 inline" big_inline.err
}
