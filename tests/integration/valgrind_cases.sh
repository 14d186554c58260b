# valgrind memcheck: one run of every tool, each against a peer that is not under valgrind
# (the stock tool where one exists). A run passes when the tool does what it does without
# valgrind and memcheck reports no invalid access, no use of uninitialised memory and no
# definite or indirect leak; its summary goes into the log.

# memcheck NAME: the valgrind command line for a run named NAME (log in $T/NAME.memcheck).
memcheck() {
  MEMCHECK=(valgrind --quiet --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect
    --errors-for-leak-kinds=definite,indirect --log-file="$T/$1.memcheck")
}

# memcheck_verdict NAME RC_EXPECTED WHAT: the run's exit status, and memcheck's log clean.
memcheck_verdict() {
  [[ $RC -eq $2 ]] || fail "$3 under memcheck: exit $RC, expected $2 (99: memcheck found errors)"$'\n'"$(cat "$T/$1.memcheck")"
  if grep -qE 'Invalid (read|write|free)|uninitialised|definitely lost: [1-9]|indirectly lost: [1-9]' "$T/$1.memcheck"; then
    fail "$3: memcheck reports"$'\n'"$(cat "$T/$1.memcheck")"
  fi
  note "memcheck $3: clean (exit $RC)"
}

# ctest: valgrind
case_valgrind_tools() {
  require_device
  command -v valgrind > /dev/null || fail "valgrind is not installed (scripts/install-deps.sh installs it)"
  local wait=400

  next_port  # rping server under memcheck, stock client
  memcheck rping_server
  start rping_server "${MEMCHECK[@]}" "$OURS_RPING" -s -a "$RXE_ADDR" -p "$PORT" --timeout 60 --json
  wait_listening "$PORT" "$wait"
  run rping_peer 60 "$STOCK_RPING" -c -a "$RXE_ADDR" -p "$PORT" -C 10 -V
  expect_rc 0 "stock rping client against our server under memcheck"
  finish rping_server "$wait"
  memcheck_verdict rping_server 0 "rping -s"

  next_port  # rping client under memcheck, stock server
  start rping_stock "$STOCK_RPING" -s -a "$RXE_ADDR" -p "$PORT" -C 10
  wait_listening "$PORT"
  memcheck rping_client
  run rping_client "$wait" "${MEMCHECK[@]}" "$OURS_RPING" -c -a "$RXE_ADDR" -p "$PORT" -C 10 -V --timeout 60 --json
  memcheck_verdict rping_client 0 "rping -c"
  finish rping_stock 20

  next_port  # rdma_server under memcheck, stock rdma_client
  memcheck rdma_server
  start rdma_server "${MEMCHECK[@]}" "$OURS_RDMA_SERVER" -s "$RXE_ADDR" -p "$PORT" --timeout 60 --json
  wait_listening "$PORT" "$wait"
  run rdma_peer 60 rdma_client -s "$RXE_ADDR" -p "$PORT"
  expect_rc 0 "stock rdma_client against our rdma_server under memcheck"
  finish rdma_server "$wait"
  memcheck_verdict rdma_server 0 "rdma_server"

  next_port  # rdma_client under memcheck, stock rdma_server
  start rdma_stock rdma_server -s "$RXE_ADDR" -p "$PORT"
  wait_listening "$PORT"
  memcheck rdma_client
  run rdma_client "$wait" "${MEMCHECK[@]}" "$OURS_RDMA_CLIENT" -s "$RXE_ADDR" -p "$PORT" --timeout 60 --json
  memcheck_verdict rdma_client 0 "rdma_client"
  finish rdma_stock 20

  # udaddy client under memcheck, stock server (which has no port option: 7174)
  start udaddy_stock udaddy -b "$RXE_ADDR"
  wait_listening 7174
  memcheck udaddy
  run udaddy "$wait" "${MEMCHECK[@]}" "$OURS_UDADDY" -s "$RXE_ADDR" --timeout 60 --json
  memcheck_verdict udaddy 0 "udaddy client"
  finish udaddy_stock 20

  next_port  # ucmatose client under memcheck (2 connections), stock server
  start ucmatose_stock ucmatose -b "$RXE_ADDR" -p "$PORT" -c 2
  wait_listening "$PORT"
  memcheck ucmatose
  run ucmatose "$wait" "${MEMCHECK[@]}" "$OURS_UCMATOSE" -s "$RXE_ADDR" -p "$PORT" -c 2 --timeout 60 --json
  memcheck_verdict ucmatose 0 "ucmatose client"
  finish ucmatose_stock 20

  # mckey receiver under memcheck, stock sender
  memcheck mckey
  start mckey "${MEMCHECK[@]}" "$OURS_MCKEY" -m 239.1.7.57 -b "$RXE_ADDR" --timeout 60 --json --log-level info
  wait_for_line mckey.err "joined" "$wait"
  run mckey_stock 60 mckey -m 239.1.7.57 -b "$RXE_ADDR" -s
  finish mckey "$wait"
  memcheck_verdict mckey 0 "mckey receiver"

  next_port  # send_bw: both sides under memcheck, a short test
  memcheck send_bw_server
  start send_bw_server "${MEMCHECK[@]}" "$OURS_SEND_BW" --bind "$RXE_ADDR" -p "$PORT" --timeout 60 --json
  wait_listening "$PORT" "$wait"
  memcheck send_bw_client
  run send_bw_client "$wait" "${MEMCHECK[@]}" "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -s 4096 -n 50 --warmup 5 \
    --timeout 60 --json
  memcheck_verdict send_bw_client 0 "send_bw client"
  finish send_bw_server "$wait"
  memcheck_verdict send_bw_server 0 "send_bw server"

  memcheck diag_bind
  run diag_bind "$wait" "${MEMCHECK[@]}" "$OURS_DIAG" "$RXE_ADDR" --json
  memcheck_verdict diag_bind 0 "diag-bind"

  next_port  # diag-connect: the agent and the probe (every step and data check), both under memcheck
  local probe_port=$PORT
  next_port
  memcheck diag_connect_agent
  start diag_connect_agent "${MEMCHECK[@]}" "$OURS_DIAG_CONNECT" --serve --bind "$RXE_ADDR" -p "$probe_port" \
    --agent-port "$PORT" --timeout 60 --json
  wait_listening "$probe_port" "$wait"
  memcheck diag_connect
  run diag_connect "$wait" "${MEMCHECK[@]}" "$OURS_DIAG_CONNECT" "$RXE_ADDR" -p "$probe_port" --agent-port "$PORT" \
    --timeout 60 --json
  memcheck_verdict diag_connect 0 "diag-connect"
  kill -TERM "$PID_diag_connect_agent"
  finish diag_connect_agent "$wait"
  memcheck_verdict diag_connect_agent 0 "diag-connect --serve"
}
