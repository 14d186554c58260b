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
# ctest: integration
case_personality_cxgb4() {
  require_device
  local op
  as_provider cxgb4
  for op in send write read; do
    personality_send_bw cxgb4 "server_$op" "client_$op" --op "$op" -s 4096 -n 500
    expect_rc 0 "send_bw --op $op with cxgb4's limits"
    [[ $SERVER_RC == 0 ]] || fail "send_bw server for --op $op with cxgb4's limits: exit $SERVER_RC"
    expect_jq ".outcome == \"completed\" and .rows[0].iterations == 500" "client_$op.out"
    # iWARP has no IB path MTU: null, not the 128 that ibv_query_qp's 0 reads as.
    expect_jq '.test.path.path_mtu == null' "client_$op.out"
    expect_schema send_bw "client_$op.out"
    note "--op $op 4 KiB: $(jq -c '.rows[0].bw_average_mib_per_s' "$T/client_$op.out") MiB/s"
  done
  expect_grep "allows 8 RDMA READs" client_read.err
  # SEND on iWARP goes on the server's credits (no RNR retry there): 5000 small messages
  # need some 70 grants past the first 512, kept from the warm-up's stream to the row's
  # (siw_tools sends 20000 where a missing receive would end the connection).
  personality_send_bw cxgb4 server_credits client_credits -s 64 -n 5000
  expect_rc 0 "send_bw SEND on credits with cxgb4's limits"
  expect_jq '.outcome == "completed" and .rows[0].iterations == 5000' client_credits.out
  expect_grep "iWARP has no RNR retry" client_credits.err
  note "SEND 64 B on credits: $(jq -c '.rows[0].bw_average_mib_per_s' "$T/client_credits.out") MiB/s"
  # Latency without immediate data: each size announced in a SEND of its own (before, the
  # SEND_WITH_IMM handshake failed at ibv_post_send with EINVAL).
  for op in send write read; do
    # 2 bytes: smaller than the 8-byte size message, which the buffers make room for.
    personality_send_bw cxgb4 "server_lat_$op" "client_lat_$op" --lat --op "$op" -s 2 -n 100
    expect_rc 0 "send_bw --lat --op $op with cxgb4's limits"
    [[ $SERVER_RC == 0 ]] || fail "send_bw --lat server for --op $op with cxgb4's limits: exit $SERVER_RC"
    expect_jq '(.rows | length) == 1 and .rows[0].iterations == 100' "client_lat_$op.out"
    expect_schema send_bw "client_lat_$op.out"
  done
  note "--lat --op send 2 B: p50 $(jq '.rows[0].t_median_us' "$T/client_lat_send.out") us"
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
  # rdma_smoke counts what the device cannot do as skipped, and passes.
  run smoke 120 "${AS_PROVIDER[@]}" "$OURS_SMOKE" --json
  expect_rc 0 "rdma_smoke with cxgb4's limits"
  expect_jq '[.smoke.cases[] | select(.outcome == "skipped") | .name] == ["udaddy", "mckey"]
    and .smoke.failed == 0' smoke.out
  pingmesh_pinglist pinglist node-a "$RXE_ADDR"
  run pingmesh 30 "${AS_PROVIDER[@]}" "$OURS_PINGMESH" --pinglist "$T/pinglist" -p "$PORT" --name node-a --duration 2 --json
  expect_rc 77 "rdma_pingmesh with cxgb4's limits"
}

# irdma: 48 inline bytes. Before, the send_bw server asked for 64 with no fallback and
# refused every client (reject reason 28).
# ctest: integration
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
  # The other tools on both ends: rdma_smoke's quick set (diag-bind, rping, udaddy, send_bw,
  # each as its own process under the same limits) and a two-rank mesh at 32 bytes, whose
  # pairs ask for inline sends as send_bw's do.
  run smoke 120 "${AS_PROVIDER[@]}" "$OURS_SMOKE" --quick --json
  expect_rc 0 "rdma_smoke --quick with irdma's limits"
  expect_jq '.smoke.failed == 0 and .smoke.skipped == 0 and (.smoke.cases | length) == 4' smoke.out
  if [[ -x $OURS_RDMA_MESH ]] && command -v mpirun > /dev/null; then
    mesh_ports 2
    run mesh 120 "${AS_PROVIDER[@]}" "${MESH_MPIRUN[@]}" -np 2 "$OURS_RDMA_MESH" -p "$PORT" -s 32 -n 100 --warmup 10 \
      --test bw,lat --timeout 10 "${NO_OUTLIERS[@]}" --json
    expect_rc 0 "rdma_mesh -s 32 with irdma's limits"
    expect_jq '.summary.bw.failed == 0 and .summary.lat.failed == 0 and (.pairs | length) == 4' mesh.out
    note "mesh with irdma's limits: bw $(jq -c '.summary.bw.median' "$T/mesh.out") MiB/s, lat $(jq -c '.summary.lat.median' "$T/mesh.out") us"
  fi
}

# InfiniBand inside a subnet: UD arrivals carry no GRH, so no source address. rdma_pingmesh
# knows each peer it probes by the LID and QP number of its SIDR reply; before, every probe
# and answer was dropped as unknown_peer and every path went down.
# ctest: integration
case_personality_no_grh() {
  require_device
  local a=10.55.0.1 b=10.55.0.2
  as_provider nogrh
  next_port
  pingmesh_pinglist pinglist node-a "$a" node-b "$b"
  local common=(--pinglist "$T/pinglist" -p "$PORT" --window 1 --rate 20 --json)
  start node_b "${AS_PROVIDER[@]}" "$OURS_PINGMESH" "${common[@]}" --name node-b --duration 10
  # node-b answering before node-a probes: a late start's lost probes reached node-a's third
  # window on a loaded guest (a probe's answer timeout crosses the window's end).
  wait_listening "$PORT" 30
  run node_a 30 "${AS_PROVIDER[@]}" "$OURS_PINGMESH" "${common[@]}" --name node-a --duration 6
  expect_rc 0 "rdma_pingmesh node-a without GRHs"
  finish node_b 30
  expect_rc 0 "rdma_pingmesh node-b without GRHs"
  pingmesh_lines node_a
  expect_jq '.pingmesh.paths[0].answered > 50 and .pingmesh.paths[0].state == "ok"' node_a.report
  pingmesh_lines node_b
  expect_jq '.pingmesh.paths[0].answered > 50' node_b.report
  expect_lines_jq '[.[] | select(.event == "window")] | .[2:] | all(.state == "ok")' node_a.lines
  note "node-a without GRHs: $(jq -c '.pingmesh.paths[0] | {sent, answered, lost}' "$T/node_a.report"), ignored $(jq -c '.pingmesh.ignored' "$T/node_a.report")"
  # The CM's UD tools without GRHs: udaddy's server and send_bw -c UD's answer each client
  # through ibv_create_ah_from_wc, as rdma-core's udaddy does (on InfiniBand it takes the
  # completion's LID), and send_bw's two sides exchange their counts.
  next_port
  start udaddy_server "${AS_PROVIDER[@]}" "$OURS_UDADDY" -b "$a" --port "$PORT" -c 2 -C 10 --json --accept-timeout 20
  wait_listening "$PORT"
  run udaddy_client 30 "${AS_PROVIDER[@]}" "$OURS_UDADDY" -s "$a" --port "$PORT" -c 2 -C 10 --json
  expect_rc 0 "udaddy without GRHs"
  finish udaddy_server 15
  expect_rc 0 "udaddy server without GRHs"
  expect_jq '.outcome == "completed" and .messages.received > 0 and .messages.lost == 0' udaddy_client.out
  next_port
  start server_ud "${AS_PROVIDER[@]}" "$OURS_SEND_BW" --bind "$a" -p "$PORT" -c UD --json --accept-timeout 20
  wait_listening "$PORT"
  run client_ud 60 "${AS_PROVIDER[@]}" "$OURS_SEND_BW" "$a" -p "$PORT" -c UD -s 512 -n 1000 --json
  expect_rc 0 "send_bw -c UD without GRHs"
  finish server_ud 15
  expect_rc 0 "send_bw -c UD server without GRHs"
  expect_jq '.outcome == "completed" and .test.connection == "UD"' client_ud.out
  expect_jq '.outcome == "completed" and .test.connection == "UD"' server_ud.out
}

# Device completion stamps (rxe has none): a ConnectX-3-like counter whose hca_core_clock
# (156250 kHz) is not what it keeps (1 GHz), read only raw; and a provider that turns its
# stamps into nanoseconds, as mlx5 does. Read at the nominal rate, every responder delay
# was 6.4 times too long and no round trip on the device's clock was left. The raw counter
# wraps 3 s in, inside node-a's run.
# ctest: integration
case_personality_device_clock() {
  require_device
  local a=10.55.0.1 b=10.55.0.2 personality name
  pingmesh_pinglist pinglist node-a "$a" node-b "$b"
  for personality in rawstamps wallstamps; do
    as_provider "$personality"
    next_port
    local common=(--pinglist "$T/pinglist" -p "$PORT" --window 1 --rate 20 --json)
    start "${personality}_b" "${AS_PROVIDER[@]}" "$OURS_PINGMESH" "${common[@]}" --name node-b --duration 6
    run "${personality}_a" 30 "${AS_PROVIDER[@]}" "$OURS_PINGMESH" "${common[@]}" --name node-a --duration 5
    expect_rc 0 "rdma_pingmesh node-a with $personality"
    finish "${personality}_b" 30
    expect_rc 0 "rdma_pingmesh node-b with $personality"
    for name in "${personality}_a" "${personality}_b"; do
      pingmesh_lines "$name"
      # The stamps measure a fifth of the answers at least: on a loaded guest rxe stamps some
      # completions late, and an answer whose stamps leave no network time (or more than the
      # hosts') is measured on the hosts' clocks instead (half of them under ASan in CI).
      expect_jq '.pingmesh.clock == "device" and (.pingmesh.paths[0] | .answered > 40 and .lost == 0
        and .rtt_device_samples * 5 >= .answered)' "$name.report"
      expect_lines_jq '[.[] | select(.event == "window")] | .[1:] | all(.rtt_us.p50 > 0 and .rtt_us.p50 < 100000)' \
        "$name.lines"
    done
    note "$personality: node-a $(jq -c '.pingmesh.paths[0] | {answered, rtt_device_samples, stamps_missing}' "$T/${personality}_a.report"), rtt p50 by window $(jq -s -c '[.[] | select(.event == "window") | .rtt_us.p50]' "$T/${personality}_a.lines") us"
  done
  # The counter is read over 20 ms: its rate within 1% of the 1 GHz it keeps.
  expect_grep 'ticked \(99[0-9]\{4\}\|100[0-9]\{4\}\) kHz, not the 156250 kHz it reports' rawstamps_a.err
  if grep -q 'ticked' "$T/wallstamps_a.err"; then fail "the provider's nanoseconds were checked against a rate: $(cat "$T/wallstamps_a.err")"; fi
}

# siw, soft-iWARP: Debian's kernels leave it out; scripts/build-siw.sh builds the kernel's own
# source out of tree (build/siw/siw.ko). Loaded here on a dummy netdev of its own, it is a
# second provider beside rxe, and a real iWARP one: RDMAP over the kernel's TCP.
# long and alone: loads siw (Debian's linux-source, 140 MB, and about a minute to build) and adds
# a second RDMA device, which cases that list every device would meet; cxgb4's limits on rxe run
# in personality_cxgb4 in the full suite
# ctest: integration long alone
case_siw_tools() {
  require_device
  require_root
  local module=$BIN/../siw/siw.ko address=10.72.0.1 op
  [[ -f $module ]] || { echo "SKIP: no $module (run scripts/build-siw.sh)"; exit 77; }
  [[ $(cat "$BIN/../siw/kernel" 2> /dev/null) == "$(uname -r)" ]] || { echo "SKIP: $module is not for $(uname -r)"; exit 77; }
  restore "rdma link delete siw_sw0 2>/dev/null; ip link del sw0 2>/dev/null; rmmod siw 2>/dev/null; true"
  modprobe -a ib_core libcrc32c
  if ! grep -q '^siw ' /proc/modules; then insmod "$module" || fail "insmod $module: the module does not load here"; fi
  ip link add sw0 type dummy
  ip addr add "$address/24" dev sw0
  ip link set sw0 up
  rdma link add siw_sw0 type siw netdev sw0 || fail "rdma link add siw_sw0 type siw netdev sw0"
  expect_grep_cmd() { "$@" > "$T/cmd.out" 2>&1 || fail "$*: $(cat "$T/cmd.out")"; }
  expect_grep_cmd ibv_devinfo -d siw_sw0
  grep -q 'transport:.*iWARP' "$T/cmd.out" || fail "siw_sw0 is not iWARP: $(cat "$T/cmd.out")"
  # rping: READ and WRITE round trips over iWARP.
  next_port
  start rping_server "$OURS_RPING" -s -a "$address" -p "$PORT" --accept-timeout 20
  wait_listening "$PORT"
  run rping_client 30 "$OURS_RPING" -c -a "$address" -p "$PORT" -C 20 -S 4096 -V --json
  expect_rc 0 "rping over siw"
  finish rping_server 15
  expect_rc 0 "rping server over siw"
  expect_jq '.outcome == "completed" and (.local_address | startswith("10.72.0.1"))' rping_client.out
  # send_bw: each operation's bandwidth; reads within siw's limits, READ sinks writable.
  for op in send write read; do
    next_port
    start "server_$op" "$OURS_SEND_BW" --bind "$address" -p "$PORT" --json --accept-timeout 20
    wait_listening "$PORT"
    run "client_$op" 60 "$OURS_SEND_BW" "$address" -p "$PORT" --op "$op" -s 65536 -n 500 --json
    expect_rc 0 "send_bw --op $op over siw"
    finish "server_$op" 15
    expect_rc 0 "send_bw server --op $op over siw"
    expect_jq '.test.path.device == "siw_sw0" and .test.path.path_mtu == null' "client_$op.out"
    expect_schema send_bw "client_$op.out"
    note "siw --op $op 64 KiB: $(jq -c '.rows[0].bw_average_mib_per_s' "$T/client_$op.out") MiB/s"
  done
  # Small SENDs on the server's credits: siw has no RNR retry either, and 20000 of them
  # outrun a server that reposts late.
  next_port
  start server_credits "$OURS_SEND_BW" --bind "$address" -p "$PORT" --json --accept-timeout 20
  wait_listening "$PORT"
  run client_credits 60 "$OURS_SEND_BW" "$address" -p "$PORT" -s 64 -n 20000 --json --log-level info
  expect_rc 0 "send_bw SEND on credits over siw"
  finish server_credits 15
  expect_rc 0 "send_bw server for SEND on credits over siw"
  expect_grep "iWARP has no RNR retry" client_credits.err
  note "siw SEND 64 B on credits: $(jq -c '.rows[0].message_rate_mpps' "$T/client_credits.out") Mpps"
  # What iWARP cannot do: a skip with the reason.
  run udaddy 30 "$OURS_UDADDY" -s "$address" --port "$PORT" --json
  expect_rc 77 "udaddy over siw"
  expect_jq '.errors[0].message | test("siw_sw0 is iWARP: it has no unreliable datagrams")' udaddy.out
  # Latency over iWARP: the sizes announced in SENDs of their own (no immediate data).
  next_port
  start server_lat "$OURS_SEND_BW" --bind "$address" -p "$PORT" --json --accept-timeout 20
  wait_listening "$PORT"
  run client_lat 60 "$OURS_SEND_BW" "$address" -p "$PORT" --lat -s 64 -n 200 --json
  expect_rc 0 "send_bw --lat over siw"
  finish server_lat 15
  expect_rc 0 "send_bw --lat server over siw"
  note "siw --lat 64 B: p50 $(jq '.rows[0].t_median_us' "$T/client_lat.out") us"
  # The stock tools over siw too: ours against rdma-core's rping.
  next_port
  start stock_server "$STOCK_RPING" -s -a "$address" -p "$PORT" -C 5
  wait_listening "$PORT"
  run ours_client 30 "$OURS_RPING" -c -a "$address" -p "$PORT" -C 5 --json
  expect_rc 0 "our rping with the stock rping server over siw"
  finish stock_server 15
}

# A responder that does its atomics big-endian (ConnectX-3's "reply BE"): every fetched
# value and the counters read back arrive byte-swapped. send_bw learns the order from the
# first value that tells and holds the run to it, instead of failing on the first fetch.
# ctest: integration
case_personality_be_atomics() {
  require_device
  personality_send_bw beatomics server client --op atomic -n 2000
  expect_rc 0 "send_bw --op atomic against a big-endian responder"
  expect_jq '.test.atomic.byte_order == "swapped" and (.test.atomic.counters | length) == 1' client.out
  expect_grep "keeps its atomic counters big-endian" client.err
  personality_send_bw beatomics server_lat client_lat --lat --op atomic --atomic compare-swap -n 300
  expect_rc 0 "send_bw --lat --op atomic (compare-swap) against a big-endian responder"
  expect_jq '.test.atomic.byte_order == "swapped"' client_lat.out
  # And on rxe's own order, the same report says host.
  send_bw_pair_with "" plain plain_client 60 --op atomic -n 500
  expect_jq '.test.atomic.byte_order == "host"' plain_client.out
}

# Every tool rdma_smoke runs (diag-bind, rping, rdma_server and rdma_client, udaddy, mckey,
# ucmatose, send_bw's bandwidth and latency) and rdma_pingmesh, under each personality whose
# case above gives it one or two tools: irdma's 48 inline bytes, UD arrivals without a GRH, a
# big-endian atomics responder. (cxgb4's case runs them all; rdma_mesh runs under irdma's.)
# all_tools_under PERSONALITY: rdma_smoke's every case and a pair of rdma_pingmesh nodes.
all_tools_under() {
  local personality=$1
  pingmesh_pinglist pinglist node-a 10.55.0.1 node-b 10.55.0.2
  as_provider "$personality"
  next_port
  run "smoke_$personality" 300 "${AS_PROVIDER[@]}" "$OURS_SMOKE" "$RXE_ADDR" -p "$PORT" --json
  expect_rc 0 "rdma_smoke, every tool, with $personality's limits"
  expect_jq '.smoke.failed == 0 and .smoke.skipped == 0 and (.smoke.cases | length) == 8' "smoke_$personality.out"
  next_port
  local common=(--pinglist "$T/pinglist" -p "$PORT" --window 1 --rate 20 --json)
  start "pingmesh_b_$personality" "${AS_PROVIDER[@]}" "$OURS_PINGMESH" "${common[@]}" --name node-b --duration 5
  wait_listening "$PORT" 30
  run "pingmesh_a_$personality" 30 "${AS_PROVIDER[@]}" "$OURS_PINGMESH" "${common[@]}" --name node-a --duration 3
  expect_rc 0 "rdma_pingmesh node-a with $personality's limits"
  finish "pingmesh_b_$personality" 30
  expect_rc 0 "rdma_pingmesh node-b with $personality's limits"
  pingmesh_lines "pingmesh_a_$personality"
  expect_jq '.pingmesh.paths[0].answered > 0' "pingmesh_a_$personality.report"
  note "$personality: smoke $(jq -c '[.smoke.cases[] | .outcome] | group_by(.) | map({(.[0]): length}) | add' "$T/smoke_$personality.out"), pingmesh $(jq -c '.pingmesh.paths[0] | {sent, answered, lost}' "$T/pingmesh_a_$personality.report")"
}

# One case a personality, so that a loaded guest runs them side by side (together, one
# case took over its 180 s beside CPU burners).
# ctest: integration
case_personality_all_tools_irdma() { require_device; all_tools_under irdma; }

# ctest: integration
case_personality_all_tools_nogrh() { require_device; all_tools_under nogrh; }

# ctest: integration
case_personality_all_tools_beatomics() { require_device; all_tools_under beatomics; }
