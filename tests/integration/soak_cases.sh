# Soak: a persistent server (rping -P, rdma_server -P, send_bw -P) serves many clients, one
# after another and at once, with its open descriptors and resident memory measured; they
# must stay flat. Misbehaving clients (killed mid-run, or speaking another protocol) come in
# between, and the server must shrug them off.

# server_usage PID: "FDS RSS_KIB ANON_KIB" of a running process. RssAnon (heap, stacks) is
# what a leak grows; VmRSS also counts file pages of the program and its libraries, which
# the kernel drops and faults back in as it likes (one run read 4668 -> 1164 -> 4856 KiB).
server_usage() {
  local fds
  fds=$(find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2> /dev/null | wc -l)
  echo "$fds $(awk '/^VmRSS:/ {rss = $2} /^RssAnon:/ {anon = $2} END {print rss, anon}' "/proc/$1/status")"
}

# concurrent_burst NAME COUNT: COUNT clients ("${SOAK_BURST_CLIENT[@]}") at once; all must pass.
concurrent_burst() {
  local c
  for ((c = 0; c < $2; c++)); do
    start "$1$c" "${SOAK_BURST_CLIENT[@]}"
  done
  for ((c = 0; c < $2; c++)); do
    finish "$1$c" 180
    expect_rc 0 "concurrent client $c of $2 ($1)"
  done
}

# soak TOOL MISBEHAVE SERVER_COMMAND...: starts the persistent server on $PORT, warms it up,
# runs SOAK_SEQUENTIAL clients ("${SOAK_CLIENT[@]}") one by one with MISBEHAVE (a function
# bringing in clients that die or speak another protocol) halfway, then SOAK_CONCURRENT at
# once, measuring the server's descriptors and RSS; stops it with SIGINT and checks its report.
soak() {
  local tool=$1 misbehave=$2
  shift 2
  local sequential=${SOAK_SEQUENTIAL:-200} concurrent=${SOAK_CONCURRENT:-20} pid i failed=0
  start soak_server "$@"
  wait_listening "$PORT"
  eval "pid=\$PID_soak_server"
  # Warm up first, one by one and then all at once: the first connections allocate what
  # the server keeps for later ones (glibc gives each concurrent thread its own malloc arena).
  for ((i = 0; i < 10; i++)); do
    timeout 60 "${SOAK_CLIENT[@]}" > /dev/null 2>&1 || failed=$((failed + 1))
  done
  concurrent_burst warmup "$concurrent"
  tick 1
  local fds_before rss_before anon_before fds_after rss_after anon_after
  read -r fds_before rss_before anon_before <<< "$(server_usage "$pid")"
  for ((i = 0; i < sequential; i++)); do
    timeout 60 "${SOAK_CLIENT[@]}" > /dev/null 2>&1 || failed=$((failed + 1))
    kill -0 "$pid" 2> /dev/null || fail "the server died after $i sequential clients"
    if ((i == sequential / 2)); then
      "$misbehave"
      kill -0 "$pid" 2> /dev/null || fail "a misbehaving client took the server down"
    fi
  done
  ((failed == 0)) || fail "$failed of $((sequential + 10)) sequential clients failed"
  local fds_middle rss_middle anon_middle
  read -r fds_middle rss_middle anon_middle <<< "$(server_usage "$pid")"
  concurrent_burst together "$concurrent"
  tick 1  # the server's last connections finish their teardown
  kill -0 "$pid" 2> /dev/null || fail "the server died during the soak"
  read -r fds_after rss_after anon_after <<< "$(server_usage "$pid")"
  kill -INT "$pid"
  finish soak_server 30
  expect_rc 130 "persistent server after the soak"
  expect_schema "$tool" soak_server.out
  local served
  served=$(jq '.connections | length' "$T/soak_server.out")
  note "$tool -P: $served connections; open fds $fds_before -> $fds_middle -> $fds_after, RssAnon $anon_before -> $anon_middle -> $anon_after KiB, VmRSS $rss_before -> $rss_middle -> $rss_after KiB (after warm-up, after $sequential sequential, after $concurrent concurrent)"
  ((fds_after == fds_before)) || fail "open descriptors grew from $fds_before to $fds_after"
  # Allocator noise and the report's growing connection list allowed; a leak of 4 KiB per
  # connection would not be (about 900 KiB over 220 connections).
  ((anon_after - anon_before <= 768)) || fail "RssAnon grew from $anon_before to $anon_after KiB"
  local clients=$((sequential + 2 * concurrent + 10))
  expect_jq ".connections | length >= $clients" soak_server.out
  expect_jq "[.connections[] | select(.outcome == \"completed\")] | length >= $clients" soak_server.out
}

# The clients are the stock rping (it starts faster in the TCG guest than any C++ program),
# so what is soaked is our server.
rping_misbehaves() {
  # A client that dies mid-run, and one that speaks another protocol (rdma_client: a
  # 16-byte message the server cannot take for an advert of a usable buffer).
  start victim "$STOCK_RPING" -c -a "$RXE_ADDR" -p "$PORT" -C 0
  tick 1
  eval "kill -9 \$PID_victim"
  finish victim 5
  run stranger 10 rdma_client -s "$RXE_ADDR" -p "$PORT"
}

# ctest: soak
case_rping_soak() {
  require_device
  next_port
  SOAK_CLIENT=("$STOCK_RPING" -c -a "$RXE_ADDR" -p "$PORT" -C 2 -S 64)
  SOAK_BURST_CLIENT=("$STOCK_RPING" -c -a "$RXE_ADDR" -p "$PORT" -C 20 -S 64)
  soak rping rping_misbehaves "$OURS_RPING" -s -P -a "$RXE_ADDR" -p "$PORT" --json
}

# Clients: the stock rdma_client, one exchange each.
echo_misbehaves() {
  # rping speaks another protocol: its 16-byte advert reads as a message, the server
  # answers, and rping then waits for an RDMA READ that never comes; killed mid-run.
  start victim "$STOCK_RPING" -c -a "$RXE_ADDR" -p "$PORT" -C 0
  tick 1
  eval "kill -9 \$PID_victim"
  finish victim 5
  # Our send_bw client wants an answer in the accept's private data; it gets none.
  run stranger 20 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -n 10 --timeout 3
}

# ctest: soak
case_rdma_server_soak() {
  require_device
  next_port
  SOAK_CLIENT=(rdma_client -s "$RXE_ADDR" -p "$PORT")
  SOAK_BURST_CLIENT=("${SOAK_CLIENT[@]}")
  soak rdma_server echo_misbehaves "$OURS_RDMA_SERVER" -P -s "$RXE_ADDR" -p "$PORT" --timeout 3 --json
}

# Clients: our send_bw (no stock peer speaks its key exchange), small tests; the server runs
# one test at a time, so the concurrent ones queue and need a patient --timeout.
send_bw_misbehaves() {
  start victim "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -D 30 -s 4096
  tick 2
  eval "kill -9 \$PID_victim"
  finish victim 5
  # The stock rdma_client sends no hello: refused with a reason, the server goes on.
  run stranger 10 rdma_client -s "$RXE_ADDR" -p "$PORT"
}

# ctest: soak
case_send_bw_soak() {
  require_device
  next_port
  SOAK_CLIENT=("$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -n 20 -s 4096 --warmup 0 --timeout 60)
  SOAK_BURST_CLIENT=("${SOAK_CLIENT[@]}")
  soak send_bw send_bw_misbehaves "$OURS_SEND_BW" -P --bind "$RXE_ADDR" -p "$PORT" --timeout 3 --json
  expect_jq '.refused | length >= 1' soak_server.out
}
