# Soak: a persistent server serves many clients, one after another and at once, with its
# open descriptors and resident memory measured; they must stay flat. The clients are the
# stock rping (it starts faster in the TCG guest than any C++ program), so what is soaked is
# our server. Misbehaving clients (killed mid-run, or speaking another protocol) come in
# between, and the server must shrug them off.

# server_usage PID: "FDS RSS_KIB" of a running process.
server_usage() {
  local fds rss
  fds=$(find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2> /dev/null | wc -l)
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$1/status")
  echo "$fds $rss"
}

# concurrent_burst NAME COUNT: COUNT stock clients at once, 20 pings each; all must pass.
concurrent_burst() {
  local c
  for ((c = 0; c < $2; c++)); do
    start "$1$c" "$STOCK_RPING" -c -a "$RXE_ADDR" -p "$PORT" -C 20 -S 64
  done
  for ((c = 0; c < $2; c++)); do
    finish "$1$c" 120
    expect_rc 0 "concurrent client $c of $2 ($1)"
  done
}

case_rping_soak() {
  require_device
  local sequential=${SOAK_SEQUENTIAL:-200} concurrent=${SOAK_CONCURRENT:-20} pid i failed=0
  next_port
  start soak_server "$OURS_RPING" -s -P -a "$RXE_ADDR" -p "$PORT" --json
  wait_listening "$PORT"
  eval "pid=\$PID_soak_server"
  # Warm up first, one by one and then all at once: the first connections allocate what
  # the server keeps for later ones (glibc gives each concurrent thread its own malloc arena).
  for ((i = 0; i < 10; i++)); do
    timeout 30 "$STOCK_RPING" -c -a "$RXE_ADDR" -p "$PORT" -C 2 -S 64 > /dev/null 2>&1 || failed=$((failed + 1))
  done
  concurrent_burst warmup "$concurrent"
  sleep 1
  local fds_before rss_before fds_after rss_after
  read -r fds_before rss_before <<< "$(server_usage "$pid")"
  for ((i = 0; i < sequential; i++)); do
    timeout 30 "$STOCK_RPING" -c -a "$RXE_ADDR" -p "$PORT" -C 2 -S 64 > /dev/null 2>&1 || failed=$((failed + 1))
    kill -0 "$pid" 2> /dev/null || fail "the server died after $i sequential clients"
    if ((i == sequential / 2)); then
      # A client that dies mid-run, and one that speaks another protocol (rdma_client: a
      # 16-byte message the server cannot take for an advert of a usable buffer).
      start victim "$STOCK_RPING" -c -a "$RXE_ADDR" -p "$PORT" -C 0
      sleep 1
      eval "kill -9 \$PID_victim"
      finish victim 5
      run stranger 10 rdma_client -s "$RXE_ADDR" -p "$PORT"
    fi
  done
  ((failed == 0)) || fail "$failed of $((sequential + 10)) sequential clients failed"
  local fds_middle rss_middle
  read -r fds_middle rss_middle <<< "$(server_usage "$pid")"
  concurrent_burst together "$concurrent"
  sleep 1  # the server's last connection threads finish their teardown
  kill -0 "$pid" 2> /dev/null || fail "the server died during the soak"
  read -r fds_after rss_after <<< "$(server_usage "$pid")"
  kill -INT "$pid"
  finish soak_server 30
  expect_rc 130 "persistent server after the soak"
  expect_schema rping soak_server.out
  local served
  served=$(jq '.connections | length' "$T/soak_server.out")
  note "rping -P: $served connections; open fds $fds_before -> $fds_middle -> $fds_after, RSS $rss_before -> $rss_middle -> $rss_after KiB (after warm-up, after $sequential sequential, after $concurrent concurrent)"
  ((fds_after == fds_before)) || fail "open descriptors grew from $fds_before to $fds_after"
  # Allocator noise and the report's growing connection list allowed; a leak of 4 KiB per
  # connection would not be (about 900 KiB over 220 connections).
  ((rss_after - rss_before <= 768)) || fail "RSS grew from $rss_before to $rss_after KiB"
  expect_jq ".connections | length >= $((sequential + 2 * concurrent + 10))" soak_server.out
  expect_jq "[.connections[] | select(.outcome == \"completed\")] | length >= $((sequential + 2 * concurrent + 10))" soak_server.out
}
