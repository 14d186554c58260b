# send_bw cases: each operation ours with ours, a sweep whose JSON is checked row by row,
# bad inputs as usage errors, a missing peer ending within the timeout.

# Every row positive and consistent: bytes x iterations / seconds = the reported average
# (MiB/s, perftest's MB/sec).
BW_ROWS_CONSISTENT='.rows | length > 0 and all(.bytes > 0 and .iterations > 0 and .seconds > 0
  and .bw_average_mib_per_s > 0 and .bw_peak_mib_per_s >= .bw_average_mib_per_s * 0.999
  and (((.bytes * .iterations / .seconds / 1048576) - .bw_average_mib_per_s) | fabs) <= 1e-6 * .bw_average_mib_per_s + 1e-9
  and (((.iterations / .seconds / 1e6) - .message_rate_mpps) | fabs) <= 1e-6 * .message_rate_mpps + 1e-12)'

case_send_bw_operations() {
  require_device
  local op
  for op in send write read; do
    next_port
    start "server_$op" "$OURS_SEND_BW" -b "$RXE_ADDR" -p "$PORT" --json --accept-timeout 20
    wait_listening "$PORT"
    run "client_$op" 60 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" --op "$op" -s 4096 -n 2000 --json
    expect_rc 0 "send_bw --op $op"
    finish "server_$op" 15
    expect_rc 0 "send_bw server for --op $op"
    expect_jq "$BW_ROWS_CONSISTENT" "client_$op.out"
    expect_jq ".outcome == \"completed\" and (.rows | length == 1) and .rows[0].bytes == 4096
      and .rows[0].iterations == 2000 and .test.operation == \"$op\"" "client_$op.out"
    expect_jq ".outcome == \"completed\" and .test.operation == \"$op\"" "server_$op.out"
    note "--op $op 4 KiB: $(jq -c '.rows[0] | {bw_average_mib_per_s, message_rate_mpps}' "$T/client_$op.out")"
  done
  # The server counts what arrived for SEND: 2000 measured + 100 warm-up messages.
  expect_jq "$BW_ROWS_CONSISTENT" server_send.out
  expect_jq '.rows | length == 1 and .[0].iterations == 2100 and .[0].bytes == 4096' server_send.out
  # Small messages go inline where the device allows.
  expect_jq '.test.inline_bytes >= 0' client_send.out
}

case_send_bw_sweep() {
  require_device
  next_port
  start server "$OURS_SEND_BW" -b "$RXE_ADDR" -p "$PORT" --json --accept-timeout 20
  wait_listening "$PORT"
  run client 120 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -a -n 8 --warmup 1 -t 16 --json --json-file "$T/sweep.json"
  expect_rc 0 "send_bw -a"
  finish server 15
  expect_rc 0 "send_bw server for -a"
  expect_jq "$BW_ROWS_CONSISTENT" client.out
  expect_jq '[.rows[].bytes] == [range(1; 24) | pow(2; .)]' client.out
  expect_jq 'all(.rows[]; .iterations == 8)' client.out
  jq -S 'del(.duration_s)' "$T/client.out" > "$T/stdout.sorted"
  jq -S 'del(.duration_s)' "$T/sweep.json" > "$T/file.sorted"
  cmp -s "$T/stdout.sorted" "$T/file.sorted" || fail "--json-file differs from the --json report"
  expect_jq '[.rows[].bytes] == [range(1; 24) | pow(2; .)]' server.out
  note "sweep 8 MiB: $(jq -c '.rows[-1] | {bw_average_mib_per_s}' "$T/client.out")"
}

case_send_bw_bad_inputs() {
  require_device
  local args
  for args in "-s 0" "-s 2147483648" "-a -s 64" "--op atomic" "-t 0" "-n 0" "--bogus"; do
    run bad 10 "$OURS_SEND_BW" "$RXE_ADDR" $args
    expect_rc 2 "send_bw $args"
    grep -q . "$T/bad.err" || fail "send_bw $args: no message on stderr"
  done
  # Limits only the device knows: checked after address resolution, before connecting.
  next_port
  run deep 10 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -t 65536 --json
  expect_rc 2 "send_bw -t 65536"
  expect_jq '.errors[0].message | test("completion queue entries|maximum queue depth")' deep.out
  run huge 10 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -s 16777216 --json
  expect_rc 2 "send_bw -s 16 MiB (rxe allows 8 MiB messages)"
  expect_jq '.errors[0].message | test("maximum message size")' huge.out
  run wrong_device 10 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" -d mlx5_9 --json
  expect_rc 2 "send_bw -d mlx5_9"
  expect_jq '.errors[0].message | test("served by")' wrong_device.out
}

case_send_bw_no_peer() {
  require_device
  next_port
  run nobody 30 "$OURS_SEND_BW" "$RXE_ADDR" -p "$PORT" --timeout 2 --json
  expect_rc 1 "send_bw without a server"
  expect_jq '.outcome == "failed" and .errors[0].call == "rdma_connect"' nobody.out
  expect_jq '.duration_s <= 4' nobody.out
  run lonely 30 "$OURS_SEND_BW" -b "$RXE_ADDR" -p "$PORT" --accept-timeout 1 --json
  expect_rc 1 "send_bw server without a client"
  expect_jq '.outcome == "timed_out" and .duration_s <= 3' lonely.out
}
