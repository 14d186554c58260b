# udaddy, ucmatose and mckey cases: ours with ours, ours with the stock tools both ways,
# JSON validated, lost datagrams and missing peers ending within the timeout, bad flags.

# expect_bounded FILE SECONDS: the run's own duration (not ASan start-up) stayed within SECONDS.
expect_bounded() {
  jq -e ".duration_s <= $2" "$T/$1" > /dev/null || fail "$1 ran $(jq .duration_s "$T/$1") s, bound $2 s"
}

# The report structure all three tools share.
GROUP_JSON='(.steps | type == "array" and length > 0 and all(has("step") and has("wall_ms") and has("per_connection_us")))
  and (.connections | type == "array") and (.messages | has("sent") and has("received") and has("lost"))'

require_stock() { command -v "$1" > /dev/null || { echo "SKIP: stock $1 missing"; exit 77; }; }

# ctest: integration sanitized quick
case_udaddy_self() {
  require_device
  next_port
  start server "$OURS_UDADDY" -b "$RXE_ADDR" --port "$PORT" -c 2 -C 20 --json --accept-timeout 20
  wait_listening "$PORT"
  run client 30 "$OURS_UDADDY" -s "$RXE_ADDR" --port "$PORT" -c 2 -C 20 --json
  expect_rc 0 "our udaddy client with our server"
  finish server 10
  expect_rc 0 "our udaddy server"
  expect_jq "$GROUP_JSON" client.out
  expect_jq "$GROUP_JSON" server.out
  expect_schema udaddy client.out
  expect_schema udaddy server.out
  expect_jq '.outcome == "completed" and .messages.sent == 40 and .messages.received == 40 and .messages.lost == 0' \
    client.out
  expect_jq '[.steps[].step] | sort == (["create_id","resolve_addr","resolve_route","create_qp","connect","transfer"] | sort)' client.out
  expect_jq '.connections | length == 2 and all(.remote_qpn > 0 and .received == 20)' client.out
  expect_jq '.outcome == "completed" and .messages.received == 40 and ([.steps[].step] | index("accept") != null)' \
    server.out
  note "client setup $(jq .setup.per_connection_ms "$T/client.out") ms/connection"
  # A datagram larger than the path MTU is refused up front, naming the MTU.
  run mtu 30 "$OURS_UDADDY" -s "$RXE_ADDR" --port "$PORT" -S 9000
  expect_rc 2 "udaddy -S 9000"
  expect_grep "larger than the active MTU" mtu.err
}

# port_7174: the stock udaddy listens on that one port
# ctest: integration port_7174
case_udaddy_stock() {
  require_device
  require_stock udaddy
  # The stock udaddy has no port option: it always uses 7174.
  start stock udaddy -b "$RXE_ADDR" -c 2
  wait_listening 7174
  run client 30 "$OURS_UDADDY" -s "$RXE_ADDR" -c 2 --json
  expect_rc 0 "our udaddy client with the stock server"
  finish stock 10
  expect_rc 0 "stock udaddy server"
  expect_grep "data transfers complete" stock.out
  expect_jq '.outcome == "completed" and .messages.received == 20 and .messages.lost == 0' client.out

  start server "$OURS_UDADDY" -b "$RXE_ADDR" -c 2 --json --accept-timeout 20
  wait_listening 7174
  run stock_client 30 udaddy -s "$RXE_ADDR" -c 2
  expect_rc 0 "stock udaddy client with our server"
  expect_grep "data transfers complete" stock_client.out
  finish server 10
  expect_rc 0 "our udaddy server"
  expect_jq '.outcome == "completed" and .messages.received == 20 and .messages.sent == 20' server.out
  expect_jq '.connections | all(.remote_qpn > 0)' server.out
}

# ctest: integration port_7174
case_udaddy_lost() {
  require_device
  require_stock udaddy
  # A stock server that takes 5 datagrams of our 10 drops the rest and answers 5: the
  # client must stop at the timeout with the count, not hang like the stock client.
  start stock udaddy -b "$RXE_ADDR" -C 5
  wait_listening 7174
  run client 30 "$OURS_UDADDY" -s "$RXE_ADDR" -C 10 --timeout 2 --json
  expect_rc 1 "udaddy client missing 5 replies"
  finish stock 10
  expect_jq '.outcome == "timed_out" and .messages.received == 5 and .messages.lost == 5' client.out
  expect_jq '.errors[0].message | test("5 message\\(s\\) missing")' client.out
  expect_bounded client.out 4
  # Nobody listening: SIDR goes unanswered.
  next_port
  run nobody 30 "$OURS_UDADDY" -s "$RXE_ADDR" --port "$PORT" --timeout 2 --json
  expect_rc 1 "udaddy without a server"
  expect_jq '.outcome == "failed" and .errors[0].call == "rdma_connect"' nobody.out
  expect_bounded nobody.out 4
  # A server whose client never comes stops at --accept-timeout.
  run lonely 30 "$OURS_UDADDY" -b "$RXE_ADDR" --port "$PORT" --accept-timeout 1 --json
  expect_rc 1 "udaddy server without clients"
  expect_jq '.outcome == "timed_out" and .connections_ready == 0' lonely.out
  expect_bounded lonely.out 3
}

# ucmatose_setup C: our ucmatose -c C, server and client; the client's setup rate is
# checked by the caller.
ucmatose_setup() {
  local c=$1
  next_port
  start "server$c" "$OURS_UCMATOSE" -b "$RXE_ADDR" -p "$PORT" -c "$c" --json --accept-timeout 30
  wait_listening "$PORT"
  run "client$c" 60 "$OURS_UCMATOSE" -s "$RXE_ADDR" -p "$PORT" -c "$c" --json --timeout 10
  expect_rc 0 "ucmatose -c $c"
  finish "server$c" 20
  expect_rc 0 "our ucmatose server -c $c"
}

# alone: compares setup cost per connection at -c 8 and -c 64
# ctest: integration alone
case_ucmatose_scaling() {
  require_device
  local c per_8 per_64 try ratios=()
  for c in 1 8 64; do
    ucmatose_setup "$c"
    expect_jq "$GROUP_JSON" "client$c.out"
    expect_schema ucmatose "client$c.out"
    expect_jq ".outcome == \"completed\" and .connections_ready == $c and .messages.received == $((c * 10))" \
      "client$c.out"
    expect_jq "(.connections | length == $c) and .messages.received == $((c * 10)) and .messages.sent == $((c * 10))" \
      "server$c.out"
    expect_jq '[.steps[].step] | sort == (["create_id","resolve_addr","resolve_route","create_qp","connect","transfer","disconnect"] | sort)' \
      "client$c.out"
    note "-c $c: $(jq -c '.setup' "$T/client$c.out")"
  done
  # Setup is concurrent: 64 connections cost little more each than 8. A guest starved by
  # another beside it has measured 1.34x once; the best of three pairs of runs tells a real
  # loss of concurrency (several times, every time) from that noise.
  for try in 1 2 3; do
    if ((try > 1)); then
      ucmatose_setup 8
      ucmatose_setup 64
    fi
    per_8=$(jq .setup.per_connection_ms "$T/client8.out")
    per_64=$(jq .setup.per_connection_ms "$T/client64.out")
    ratios+=("$(jq -n "$per_64 / $per_8 * 100 | round / 100")")
    jq -en "$per_64 <= 1.2 * $per_8" > /dev/null && break
  done
  jq -en "$per_64 <= 1.2 * $per_8" > /dev/null ||
    fail "setup per connection at -c 64 above 1.2x that at -c 8 in three tries (ratios ${ratios[*]})"
  note "setup per connection, -c 64 over -c 8: ${ratios[*]}"
}

# ctest: integration quick
case_ucmatose_stock() {
  require_device
  require_stock ucmatose
  next_port
  start stock ucmatose -b "$RXE_ADDR" -p "$PORT" -c 4
  wait_listening "$PORT"
  run client 30 "$OURS_UCMATOSE" -s "$RXE_ADDR" -p "$PORT" -c 4 --json
  expect_rc 0 "our ucmatose client with the stock server"
  finish stock 10
  expect_rc 0 "stock ucmatose server"
  expect_grep "disconnected" stock.out
  expect_jq '.outcome == "completed" and .messages.received == 40 and .messages.sent == 40' client.out
  expect_jq '.connections | all(.state == "disconnected")' client.out
  # Each RC QP tells a peer that found no receive posted to wait 0.64 ms, not the CM's 655 ms.
  expect_jq '.connections | all(.rnr_nak_timer == 12)' client.out

  next_port
  start server "$OURS_UCMATOSE" -b "$RXE_ADDR" -p "$PORT" -c 4 -m --json --accept-timeout 20
  wait_listening "$PORT"
  run stock_client 30 ucmatose -s "$RXE_ADDR" -p "$PORT" -c 4
  expect_rc 0 "stock ucmatose client with our server"
  expect_grep "data transfers complete" stock_client.out
  finish server 10
  expect_rc 0 "our ucmatose server (-m)"
  expect_jq '.outcome == "completed" and .messages.received == 40 and (.migrate_ms | type == "number")' server.out
  expect_jq '.connections | all(.rnr_nak_timer == 12)' server.out
}

# ctest: integration
case_ucmatose_no_peer() {
  require_device
  next_port
  run nobody 30 "$OURS_UCMATOSE" -s "$RXE_ADDR" -p "$PORT" --timeout 2 --json
  expect_rc 1 "ucmatose without a server"
  expect_jq '.outcome == "failed" and .errors[0].call == "rdma_connect" and (.errors[0].hint | length > 0)' nobody.out
  expect_bounded nobody.out 4
  # A client that connects fewer connections than the server waits for: the server stops
  # after --timeout of silence with the one it has.
  start server "$OURS_UCMATOSE" -b "$RXE_ADDR" -p "$PORT" -c 2 --timeout 2 --json --accept-timeout 60
  wait_listening "$PORT"
  start client "$OURS_UCMATOSE" -s "$RXE_ADDR" -p "$PORT" -c 1 --timeout 2 --json
  finish server 15
  expect_rc 1 "ucmatose server missing a connection"
  expect_jq '.outcome == "timed_out" and .connections_ready == 1' server.out
  # The server's clock also runs while the client process starts, which in a busy guest took
  # over 3 s (7.3 s in all against a bound of 6; under ASan beside a build, 11.2 s): 20 s
  # still tells the 2 s silence bound from --accept-timeout's 60 s.
  expect_bounded server.out 20
  finish client 15
  [[ $RC -ne 0 ]] || fail "the client of a server that gave up exited 0"
}

# One connection of a group fails on purpose: the client asks for 4, the server takes 3 and
# rejects the fourth. That connection ends alone; the other 3 carry their messages, the
# report counts 3 ready and 1 failed (its step, call and errno) and the client exits 1.
# ctest: integration sanitized
case_ucmatose_one_rejected() {
  require_device
  next_port
  start server "$OURS_UCMATOSE" -b "$RXE_ADDR" -p "$PORT" -c 3 --json --accept-timeout 30
  wait_listening "$PORT"
  run client 60 "$OURS_UCMATOSE" -s "$RXE_ADDR" -p "$PORT" -c 4 --json --timeout 10
  expect_rc 1 "ucmatose -c 4 against a server that takes 3"
  finish server 20
  expect_rc 0 "our ucmatose server -c 3 that rejected a fourth request"
  expect_schema ucmatose client.out
  expect_jq "$GROUP_JSON" client.out
  expect_jq '.outcome == "failed" and .connections_ready == 3 and .connections_failed == 1
    and .messages.received == 30 and .messages.sent == 30
    and (.errors[0].message | test("^1 of 4 connection\\(s\\) failed")) and .errors[0].call == "rdma_connect"
    and ([.connections[] | select(.state == "failed")] | length == 1 and
         (.[0] | .failed_step == "connect" and .failure.call == "rdma_connect" and (.failure.errno_name | length > 0)))
    and ([.steps[] | select(.step == "connect")][0].failed == 1)
    and ([.connections[] | select(.state == "disconnected")] | length == 3)' client.out
  expect_jq '.outcome == "completed" and .connections_ready == 3 and .connections_failed == 0
    and .messages.received == 30' server.out
  expect_schema ucmatose server.out
  note "client: $(jq -r '.errors[0].message' "$T/client.out")"
}

# ctest: integration sanitized quick
case_mckey_self() {
  require_device
  start receiver "$OURS_MCKEY" -m 239.1.7.1 -b "$RXE_ADDR" -c 2 --json --log-level info
  wait_for_line receiver.err "joined"
  run sender 30 "$OURS_MCKEY" -m 239.1.7.1 -b "$RXE_ADDR" -s --settle 0 --json
  expect_rc 0 "our mckey sender"
  finish receiver 10
  expect_rc 0 "our mckey receiver"
  expect_jq "$GROUP_JSON" receiver.out
  expect_jq "$GROUP_JSON" sender.out
  expect_schema mckey receiver.out
  expect_schema mckey sender.out
  expect_jq '.outcome == "completed" and .role == "sender" and .messages.sent == 10' sender.out
  expect_jq '.outcome == "completed" and .messages.received == 20 and .messages.lost == 0' receiver.out
  expect_jq '.join_latency_us.count == 2 and .join_latency_us.max > 0' receiver.out
  expect_jq '[.steps[].step] | sort == (["create_id","bind_addr","resolve_addr","create_qp","join","receive","leave"] | sort)' receiver.out
  note "join latency p50 $(jq .join_latency_us.p50 "$T/receiver.out") us"
  # RoCE v2 cannot join IPv6 groups (the kernel answers ENOTSUPP): said plainly, exit 77.
  run ipv6 30 "$OURS_MCKEY" -m ff0e::1:7 -b "$RXE_ADDR6" --first-timeout 2 --json
  if [[ $RC -eq 77 ]]; then
    expect_jq '.outcome == "unsupported" and (.errors[0].message | test("IPv4 groups only"))' ipv6.out
  else
    expect_rc 1 "mckey IPv6 receiver without a sender (the join worked)"
  fi
  # A send-only full-member join (-o) delivers like a full one.
  start receiver2 "$OURS_MCKEY" -m 239.1.7.7 -b "$RXE_ADDR" --json --log-level info
  wait_for_line receiver2.err "joined"
  run sender2 30 "$OURS_MCKEY" -m 239.1.7.7 -b "$RXE_ADDR" -s -o --settle 0 --json
  expect_rc 0 "our mckey sender (send-only join)"
  finish receiver2 10
  expect_rc 0 "our mckey receiver of a send-only member"
  expect_jq '.messages.received == 10' receiver2.out
}

# ctest: integration
case_mckey_stock() {
  require_device
  require_stock mckey
  # The stock receiver prints "joined" once its join completed (line-buffered for us).
  start stock stdbuf -oL mckey -m 239.1.7.2 -b "$RXE_ADDR"
  wait_for_line stock.out "joined dgid"
  run sender 30 "$OURS_MCKEY" -m 239.1.7.2 -b "$RXE_ADDR" -s --settle 0 --json
  expect_rc 0 "our mckey sender to the stock receiver"
  finish stock 15
  expect_rc 0 "stock mckey receiver"
  expect_grep "data transfers complete" stock.out

  start receiver "$OURS_MCKEY" -m 239.1.7.3 -b "$RXE_ADDR" --json --log-level info
  wait_for_line receiver.err "joined"
  run stock_sender 30 mckey -m 239.1.7.3 -b "$RXE_ADDR" -s
  expect_rc 0 "stock mckey sender"
  finish receiver 15
  expect_rc 0 "our mckey receiver of the stock sender"
  expect_jq '.outcome == "completed" and .messages.received == 10' receiver.out
}

# ctest: integration
case_mckey_lost() {
  require_device
  # Nobody sends: the receiver gives up after --first-timeout with all 10 counted lost.
  run lonely 30 "$OURS_MCKEY" -m 239.1.7.4 -b "$RXE_ADDR" --first-timeout 2 --json
  expect_rc 1 "mckey receiver without a sender"
  expect_jq '.outcome == "timed_out" and .messages.lost == 10 and .messages.received == 0' lonely.out
  expect_bounded lonely.out 4
  # A sender of 4 to a receiver of 10: 6 lost, reported after --timeout of silence.
  start receiver "$OURS_MCKEY" -m 239.1.7.5 -b "$RXE_ADDR" --timeout 2 --json --log-level info
  wait_for_line receiver.err "joined"
  run sender 30 "$OURS_MCKEY" -m 239.1.7.5 -b "$RXE_ADDR" -s -C 4 --settle 0
  expect_rc 0 "mckey sender of 4"
  finish receiver 15
  expect_rc 1 "mckey receiver of 4 out of 10"
  expect_jq '.outcome == "timed_out" and .messages.received == 4 and .messages.lost == 6' receiver.out
  # Ctrl-C while waiting: a clean stop with the partial report.
  start interrupted "$OURS_MCKEY" -m 239.1.7.8 -b "$RXE_ADDR" --json --log-level info
  wait_for_line interrupted.err "joined"
  eval "kill -INT \$PID_interrupted"
  finish interrupted 10
  expect_rc 130 "mckey receiver after Ctrl-C"
  expect_jq '.outcome == "interrupted" and .connections_ready == 1 and .messages.received == 0' interrupted.out
  expect_schema mckey interrupted.out
  # What rxe cannot do ends plainly with 77.
  run mgid 30 "$OURS_MCKEY" -M ff12:401b::7 -b "$RXE_ADDR" --json
  expect_rc 77 "mckey -M on RoCE"
  expect_jq '.outcome == "unsupported" and (.errors[0].message | test("InfiniBand port"))' mgid.out
  run noloop 30 "$OURS_MCKEY" -m 239.1.7.6 -b "$RXE_ADDR" -l -C 0 --json
  if [[ $RC -eq 77 ]]; then
    expect_jq '.outcome == "unsupported" and (.errors[0].message | test("loopback"))' noloop.out
  else
    expect_rc 0 "mckey -l"
  fi
}

# ctest: nodevice
case_group_bad_flags() {
  local tool args
  for args in "udaddy --bogus" "udaddy -c 0" "udaddy -P tcp" "udaddy -P udp -p 0x2" "udaddy -f mac" "udaddy -S 0" \
    "ucmatose -P udp" "ucmatose -c 5000" "ucmatose -a 40" "ucmatose -p 0" \
    "mckey" "mckey -M ff12::1" "mckey -m 239.1.1.1 -o" "mckey -m 239.1.1.1 -p 0x106" "mckey -m 239.1.1.1 -M ff12::1"; do
    tool=${args%% *}
    case $tool in
      udaddy) run bad 10 "$OURS_UDADDY" ${args#udaddy} ;;
      ucmatose) run bad 10 "$OURS_UCMATOSE" ${args#ucmatose} ;;
      mckey) run bad 10 "$OURS_MCKEY" ${args#mckey} ;;
    esac
    expect_rc 2 "$args"
    grep -q . "$T/bad.err" || fail "$args: no message on stderr"
  done
}
