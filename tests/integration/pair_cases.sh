# Two-host cases (scripts/rxe-vm.sh --pair): servers on the peer guest (PEER_ADDR, its own
# kernel and rxe1), clients here (WIRE_ADDR), joined by a virtio-net wire. Interop of every
# tool across the wire, ours and the stock tools on either side, then the faults a wire
# brings: a server killed or its link dropped mid-run, nobody listening, a peer that does
# not speak the protocol. Each fault asserts the exit status and that the client ended
# within its --timeout + 2 s with a report.

# pair_server NAME PORT COMMAND...: start a server on the peer, wait until it listens.
pair_server() {
  local name=$1 port=$2
  shift 2
  remote_start "$name" "$@"
  remote_wait_listening "$port"
}

# ctest: pair
case_pair_interop() {
  require_peer
  local rping server client
  # rping: ours and stock on both hosts, each pairing 20 verified pings.
  for server in ours stock; do
    for client in ours stock; do
      [[ $server == stock && $client == stock ]] && continue
      next_port
      eval "rping=\$$(tr a-z A-Z <<< "$server")_RPING"
      pair_server "rping_$server" "$PORT" "$rping" -s -a "$PEER_ADDR" -p "$PORT" -C 20 -V
      eval "rping=\$$(tr a-z A-Z <<< "$client")_RPING"
      run "rping_${server}_$client" 60 "$rping" -c -a "$PEER_ADDR" -p "$PORT" -C 20 -V
      expect_rc 0 "rping client ($client) with the $server server across the wire"
      remote_finish "rping_$server" 20
      expect_rc 0 "rping server ($server) on the peer"
    done
  done
  # Across the wire over IPv6 too, with JSON checked on both sides.
  next_port
  pair_server rping6 "$PORT" "$OURS_RPING" -s -a "$PEER_ADDR6" -p "$PORT" -C 10 -V --json
  run rping6_client 60 "$OURS_RPING" -c -a "$PEER_ADDR6" -p "$PORT" -C 10 -V --json
  expect_rc 0 "rping over IPv6 across the wire"
  remote_finish rping6 20
  expect_jq '.outcome == "completed" and .iterations.completed == 10' rping6_client.out
  expect_jq '.outcome == "completed" and .iterations.completed == 10' rping6.out
  expect_schema rping rping6_client.out
  expect_schema rping rping6.out
  note "rping across the wire: $(jq -c '.rtt_us | {p50, p99}' "$T/rping6_client.out") us"

  # rdma_server / rdma_client.
  next_port
  pair_server echo "$PORT" "$OURS_RDMA_SERVER" -s "$PEER_ADDR" -p "$PORT" --accept-timeout 30 --json
  run echo_client 30 "$OURS_RDMA_CLIENT" -s "$PEER_ADDR" -p "$PORT" -C 20 --json
  expect_rc 0 "rdma_client with our rdma_server across the wire"
  remote_finish echo 20
  expect_rc 0 "our rdma_server on the peer"
  next_port
  pair_server echo_stock "$PORT" rdma_server -s "$PEER_ADDR" -p "$PORT"
  run echo_client2 30 "$OURS_RDMA_CLIENT" -s "$PEER_ADDR" -p "$PORT" --json
  expect_rc 0 "our rdma_client with the stock rdma_server across the wire"
  remote_finish echo_stock 20
  expect_rc 0 "stock rdma_server on the peer"
  next_port
  pair_server echo_ours "$PORT" "$OURS_RDMA_SERVER" -s "$PEER_ADDR" -p "$PORT" --accept-timeout 30
  run echo_stock_client 30 rdma_client -s "$PEER_ADDR" -p "$PORT"
  expect_rc 0 "stock rdma_client with our rdma_server across the wire"
  remote_finish echo_ours 20
  expect_rc 0 "our rdma_server (stock client) on the peer"

  # udaddy (UD, address handles to another host): ours both ends, and the stock server.
  next_port
  pair_server udaddy "$PORT" "$OURS_UDADDY" -b "$PEER_ADDR" --port "$PORT" -c 2 -C 20 --json --accept-timeout 30
  run udaddy_client 30 "$OURS_UDADDY" -s "$PEER_ADDR" --port "$PORT" -c 2 -C 20 --json
  expect_rc 0 "udaddy across the wire"
  remote_finish udaddy 20
  expect_rc 0 "our udaddy server on the peer"
  expect_jq '.messages.received == 40 and .messages.lost == 0' udaddy_client.out
  pair_server udaddy_stock 7174 udaddy -b "$PEER_ADDR" -c 2
  run udaddy_client2 30 "$OURS_UDADDY" -s "$PEER_ADDR" -c 2 --json
  expect_rc 0 "our udaddy client with the stock server across the wire"
  remote_finish udaddy_stock 20
  expect_rc 0 "stock udaddy server on the peer"

  # ucmatose: 4 connections, ours both ends, then stock client against ours.
  next_port
  pair_server ucmatose "$PORT" "$OURS_UCMATOSE" -b "$PEER_ADDR" -p "$PORT" -c 4 --json --accept-timeout 30
  run ucmatose_client 60 "$OURS_UCMATOSE" -s "$PEER_ADDR" -p "$PORT" -c 4 --json
  expect_rc 0 "ucmatose across the wire"
  remote_finish ucmatose 20
  expect_rc 0 "our ucmatose server on the peer"
  expect_jq '.connections_ready == 4 and .messages.lost == 0' ucmatose_client.out
  next_port
  pair_server ucmatose_ours "$PORT" "$OURS_UCMATOSE" -b "$PEER_ADDR" -p "$PORT" -c 4 --accept-timeout 30
  run ucmatose_stock_client 60 ucmatose -s "$PEER_ADDR" -p "$PORT" -c 4
  expect_rc 0 "stock ucmatose client with our server across the wire"
  remote_finish ucmatose_ours 20
  expect_rc 0 "our ucmatose server (stock client) on the peer"

  # mckey: a receiver on the peer joins the group; the sender here reaches it over the wire.
  # The receiver joins before anything is sent: a late join simply misses messages.
  remote_start mckey_rx "$OURS_MCKEY" -m 239.1.57.1 -b "$PEER_ADDR" -c 2 -C 10 --json --first-timeout 30 \
    --log-level info
  remote_wait_line mckey_rx joined 30
  run mckey_tx 30 "$OURS_MCKEY" -m 239.1.57.1 -b "$WIRE_ADDR" -s -C 10 --settle 0 --json
  expect_rc 0 "mckey sender across the wire"
  remote_finish mckey_rx 30
  expect_rc 0 "mckey receiver on the peer"
  expect_jq '.messages.received == 20 and .messages.lost == 0' mckey_rx.out

  # send_bw: every operation, bandwidth and latency, ours on both hosts.
  local op test
  for op in send write read; do
    for test in bw lat; do
      next_port
      pair_server "bw_server_${op}_$test" "$PORT" "$OURS_SEND_BW" --bind "$PEER_ADDR" -p "$PORT" --json --accept-timeout 30
      run "bw_${op}_$test" 90 "$OURS_SEND_BW" "$PEER_ADDR" -p "$PORT" --op "$op" --test "$test" -n 500 --json
      expect_rc 0 "send_bw --op $op --test $test across the wire"
      remote_finish "bw_server_${op}_$test" 20
      expect_rc 0 "send_bw server on the peer (--op $op --test $test)"
      expect_jq '.outcome == "completed" and (.rows | length == 1) and .rows[0].iterations == 500' "bw_${op}_$test.out"
    done
    note "send_bw --op $op across the wire: $(jq -c '.rows[0] | {bytes, bw_average_mib_per_s}' "$T/bw_${op}_bw.out"), latency $(jq -c '.rows[0] | {bytes, t_median_us, t_p99_us}' "$T/bw_${op}_lat.out")"
  done
}

# pair_client_ended NAME TIMEOUT: the client ended non-zero, within TIMEOUT + 2 s of the
# fault (FAULT_MS, set by the caller), with a JSON report.
pair_client_ended() {
  local name=$1 timeout=$2
  [[ $RC -ne 124 ]] || fail "$name still running 60 s after the fault"
  [[ $RC -ne 0 ]] || fail "$name exited 0 after the fault"
  ((FAULT_MS <= (timeout + 2) * 1000)) || fail "$name ended ${FAULT_MS} ms after the fault (limit $(((timeout + 2) * 1000)))"
  jq -e '.outcome and .exit_code != 0' "$T/$name.out" > /dev/null || fail "$name: no JSON report after the fault"
  expect_schema "$(jq -r .tool "$T/$name.out")" "$name.out"
}

# fault_run NAME FAULT_DELAY FAULT_FUNCTION -- CLIENT...: start CLIENT (run with
# --log-level debug, so it says when it is connected) here, wait until it is connected and
# FAULT_DELAY seconds more, inject the fault, wait for the client. FAULT_MS runs from the
# moment the peer injected the fault (its clock related to ours by peer_clock, within
# PEER_CLOCK_ERROR_US) to the client's exit.
fault_run() {
  local name=$1 delay=$2 fault=$3
  shift 4
  export ENDED=$T/$name.ended
  start "$name" bash -c '"$@"; rc=$?; echo "$EPOCHREALTIME" > "$ENDED"; exit $rc' _ "$@" --log-level debug
  local i
  for ((i = 0; i < 300; i++)); do
    grep -q -- "-> established" "$T/$name.err" 2> /dev/null && break
    tick 0.1
  done
  grep -q -- "-> established" "$T/$name.err" || fail "$name did not connect within 30 s"
  tick "$delay"
  "$fault"
  finish "$name" 60
  local ended
  ended=$(< "$T/$name.ended")
  FAULT_MS=$(((${ended/./} - FAULT_DONE_AT) / 1000))
}

FAULT_SERVER=""
kill_fault_server() { remote_signal "$FAULT_SERVER" KILL || fail "could not kill $FAULT_SERVER"; }
# Clearing IFF_UP through sysfs is `ip link set down` without starting a process.
link_down_fault() { remote_fault write 0x1002 /sys/class/net/@WIRE_NETDEV@/flags || fail "could not drop the link"; }

# ctest: pair
case_pair_faults() {
  require_peer
  peer_clock
  note "peer clock ahead by $((PEER_CLOCK_AHEAD_US / 1000)) ms (within $((PEER_CLOCK_ERROR_US / 1000)) ms)"
  restore 'remote_run link_up 10 bash -c "ip link set \"\$WIRE_NETDEV\" up"'
  local timeout=3
  # The server process is killed mid-run: its kernel tears the connection down, so the
  # client learns of it from the CM (or its completions stop) and ends with its rows so far.
  next_port
  FAULT_SERVER=bw_killed
  pair_server bw_killed "$PORT" "$OURS_SEND_BW" --bind "$PEER_ADDR" -p "$PORT" --json --accept-timeout 30
  fault_run bw_killed_client 2 kill_fault_server -- \
    "$OURS_SEND_BW" "$PEER_ADDR" -p "$PORT" -s 4096 -D 60 --timeout "$timeout" --json
  pair_client_ended bw_killed_client "$timeout"
  expect_jq '(.outcome == "peer_disconnected" or .outcome == "timed_out" or .outcome == "failed")
    and (.rows | length == 1) and .rows[0].iterations > 0' bw_killed_client.out
  note "send_bw server killed: client exit $RC after ${FAULT_MS} ms, $(jq -c '{outcome, iterations: .rows[0].iterations}' "$T/bw_killed_client.out")"

  next_port
  FAULT_SERVER=rping_killed
  pair_server rping_killed "$PORT" "$OURS_RPING" -s -a "$PEER_ADDR" -p "$PORT"
  fault_run rping_killed_client 2 kill_fault_server -- \
    "$OURS_RPING" -c -a "$PEER_ADDR" -p "$PORT" -C 0 --timeout "$timeout" --json
  pair_client_ended rping_killed_client "$timeout"
  expect_jq '.iterations.completed > 0' rping_killed_client.out
  note "rping server killed: client exit $RC after ${FAULT_MS} ms, $(jq -c '{outcome, iterations: .iterations.completed}' "$T/rping_killed_client.out")"
  tick 2  # let the peer's CM retire the killed connection before the next one

  # The server's link goes down mid-transfer: nothing tells the client; its completions
  # stop, and the silence bound (--timeout) ends the run. No warm-up: with the default 100
  # unmeasured messages of 64 KiB, the fault 2 s after the connection once came before the
  # first measured completion (e4e7396's suite: "0 messages done", no row to report).
  next_port
  pair_server bw_link "$PORT" "$OURS_SEND_BW" --bind "$PEER_ADDR" -p "$PORT" --json --accept-timeout 30 --timeout 30
  fault_run bw_link_client 2 link_down_fault -- \
    "$OURS_SEND_BW" "$PEER_ADDR" -p "$PORT" -s 65536 -D 60 --warmup 0 --timeout "$timeout" --json
  pair_client_ended bw_link_client "$timeout"
  expect_jq '(.outcome == "timed_out" or .outcome == "failed") and (.rows | length == 1) and .rows[0].iterations > 0' bw_link_client.out
  note "peer link down mid-transfer: client exit $RC after ${FAULT_MS} ms, $(jq -c '{outcome, iterations: .rows[0].iterations, error: .errors[0].message}' "$T/bw_link_client.out")"
  remote_run link_up_again 10 bash -c 'ip link set "$WIRE_NETDEV" up'
  remote_stop bw_link
  tick 2

  # Nobody listens on the peer: the peer's CM rejects the connection at once. A wrong port
  # (a server on the neighbouring one) is the same to the client.
  next_port
  pair_server wrong_port_server "$PORT" "$OURS_SEND_BW" --bind "$PEER_ADDR" -p "$PORT" --accept-timeout 300
  local tool
  for tool in send_bw rping rdma_client ucmatose udaddy; do
    case $tool in
      send_bw) run "noserver_$tool" 30 "$OURS_SEND_BW" "$PEER_ADDR" -p $((PORT + 1)) --timeout "$timeout" --json ;;
      rping) run "noserver_$tool" 30 "$OURS_RPING" -c -a "$PEER_ADDR" -p $((PORT + 1)) --timeout "$timeout" --json ;;
      rdma_client) run "noserver_$tool" 30 "$OURS_RDMA_CLIENT" -s "$PEER_ADDR" -p $((PORT + 1)) --timeout "$timeout" --json ;;
      ucmatose) run "noserver_$tool" 30 "$OURS_UCMATOSE" -s "$PEER_ADDR" -p $((PORT + 1)) --timeout "$timeout" --json ;;
      udaddy) run "noserver_$tool" 30 "$OURS_UDADDY" -s "$PEER_ADDR" --port $((PORT + 1)) --timeout "$timeout" --json ;;
    esac
    # The tool's own clock: loading a process in the busy TCG guest takes seconds by itself.
    FAULT_MS=$(jq '.duration_s * 1000 | floor' "$T/noserver_$tool.out" 2> /dev/null || echo 999999)
    pair_client_ended "noserver_$tool" "$timeout"
    note "$tool, nobody on the port: exit $RC after ${FAULT_MS} ms (${ELAPSED_MS} ms with process start), $(jq -c '{outcome, error: .errors[0].message}' "$T/noserver_$tool.out")"
  done
  remote_signal wrong_port_server TERM || fail "could not stop the server"
  remote_finish wrong_port_server 10
  expect_rc 143 "send_bw server after SIGTERM"

  # Peers that do not speak the protocol. A stock rdma_server accepts anything with no
  # private data: our send_bw client must refuse its missing answer, and our rping client
  # must not take its 16-byte reply for a buffer advert it can act on.
  next_port
  pair_server alien "$PORT" rdma_server -s "$PEER_ADDR" -p "$PORT"
  run alien_bw 30 "$OURS_SEND_BW" "$PEER_ADDR" -p "$PORT" --timeout "$timeout" --json
  FAULT_MS=$(jq '.duration_s * 1000 | floor' "$T/alien_bw.out" 2> /dev/null || echo 999999)
  pair_client_ended alien_bw "$timeout"
  expect_jq '.errors[0].message | test("answer|private data|protocol|version"; "i")' alien_bw.out
  note "send_bw client against a stock rdma_server: exit $RC after ${FAULT_MS} ms, $(jq -c '.errors[0].message' "$T/alien_bw.out")"
  remote_stop alien
  # A stock rdma_client sends no hello to our send_bw server: refused with a reason, and the
  # server goes on to serve a real client.
  next_port
  pair_server bw_refuses "$PORT" "$OURS_SEND_BW" --bind "$PEER_ADDR" -p "$PORT" --json --accept-timeout 30
  run alien_client 30 rdma_client -s "$PEER_ADDR" -p "$PORT"
  [[ $RC -ne 0 && $RC -ne 124 ]] || fail "stock rdma_client against send_bw: exit $RC"
  run after_alien 60 "$OURS_SEND_BW" "$PEER_ADDR" -p "$PORT" -n 200 --json
  expect_rc 0 "send_bw client after a stranger was refused"
  remote_finish bw_refuses 20
  expect_rc 0 "send_bw server that refused a stranger"
  expect_jq '(.refused | length) == 1 and .outcome == "completed"' bw_refuses.out
  expect_schema send_bw bw_refuses.out
  note "send_bw server refused a stock rdma_client: $(jq -c '.refused[0]' "$T/bw_refuses.out")"
}

# The crafted peer (tests/peer/crafted_peer.cpp) on the other host, across the wire: answers
# and hellos that are garbage or of another version, lengths, addresses and rkeys outside
# what was registered, silence (crafted_cases.sh, with its hooks pointed at the peer).
# ctest: pair long
case_pair_crafted() {
  require_peer
  peer_clock
  CRAFTED_START=remote_start
  CRAFTED_FINISH=remote_finish
  CRAFTED_WAIT_LISTENING=remote_wait_listening
  CRAFTED_CLOCK_AHEAD_US=$PEER_CLOCK_AHEAD_US
  crafted_send_bw_server_side "$WIRE_ADDR" "$PEER_ADDR"
  crafted_send_bw_client_side "$WIRE_ADDR" "$PEER_ADDR"
  crafted_rping "$WIRE_ADDR" "$PEER_ADDR"
  crafted_echo "$WIRE_ADDR" "$PEER_ADDR"
}
