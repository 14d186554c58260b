# rdma_pingmesh: two nodes probing each other. In one guest the two nodes are two addresses
# of rxe0's netdev (pingmesh_two_nodes, pingmesh_bad_input); across the pair's wire the
# faults are real (pair_pingmesh): RoCE from the peer dropped by nftables, the peer's
# process killed and started again. Each fault's time from injection to the state change
# is measured on this host's clock.

# pingmesh_pinglist FILE NAME ADDRESS [NAME ADDRESS...]: a pinglist in $T/FILE.
pingmesh_pinglist() {
  local file=$T/$1
  shift
  : > "$file"
  while (($# >= 2)); do
    echo "$2 $1" >> "$file"
    shift 2
  done
}

# pingmesh_lines NAME: $T/NAME.out's JSON lines apart: the windows' and state changes' in
# NAME.lines, the report (the last line) in NAME.report.
pingmesh_lines() {
  grep '"event"' "$T/$1.out" > "$T/$1.lines" || : > "$T/$1.lines"
  tail -n 1 "$T/$1.out" > "$T/$1.report"
  jq -e 'has("pingmesh")' "$T/$1.report" > /dev/null || fail "$1: the last line is not the report: $(tail -c 300 "$T/$1.out")"
}

# expect_lines_jq FILTER FILE: FILTER over $T/FILE's JSON lines as one array.
expect_lines_jq() { jq -s -e "$1" "$T/$2" > /dev/null || fail "$2 does not satisfy: $1"; }

# pingmesh_expect_schema NAME: the report and a sample of the lines (every state change, the
# first windows) against doc/schema.
pingmesh_expect_schema() {
  local k=0 line
  expect_schema rdma_pingmesh "$1.report"
  { jq -c 'select(.event != "window")' "$T/$1.lines"; jq -c 'select(.event == "window")' "$T/$1.lines" | head -n 3; } \
    > "$T/$1.sample"
  while IFS= read -r line; do
    k=$((k + 1))
    echo "$line" > "$T/$1.line$k"
    expect_schema rdma_pingmesh_line "$1.line$k"
  done < "$T/$1.sample"
}

# pingmesh_state_time NAME PEER STATE: the time (unix seconds) of NAME's first change of the
# path to PEER (an address) to STATE at or after $2 seconds; fails when there is none.
pingmesh_changed_at() {
  local name=$1 address=$2 state=$3 after=$4 at
  at=$(jq -r --arg a "$address" --arg s "$state" --argjson after "$after" \
    'select(.event == "state" and .address == $a and .to == $s and .time >= $after) | .time' "$T/$name.lines" | head -n 1)
  [[ -n $at ]] || fail "$name: the path to $address never went $state after $after: $(jq -c 'select(.event == "state")' "$T/$name.lines")"
  echo "$at"
}

case_pingmesh_two_nodes() {
  require_device
  local a=10.55.0.1 b=10.55.0.2
  next_port
  pingmesh_pinglist pinglist node-a "$a" node-b "$b"
  local common=(--pinglist "$T/pinglist" -p "$PORT" --window 1 --rate 20 --json)
  local metrics=127.0.0.1:$((PORT + 1))
  start node_b "$OURS_PINGMESH" "${common[@]}" --name node-b --duration 12 --metrics "$metrics"
  run node_a 30 "$OURS_PINGMESH" "${common[@]}" --name node-a --duration 6 --prom-file "$T/node-a.prom"
  expect_rc 0 "rdma_pingmesh node-a"
  # node-b still runs: its /metrics, as Prometheus would scrape it.
  "${RDMAKIT_PYTHON:-/usr/bin/python3}" "$HARNESS_ROOT/tests/integration/openmetrics_check.py" "http://$metrics/metrics" \
    rdmakit_pingmesh_probes_answered rdmakit_pingmesh_path_state > "$T/scrape.out" 2>&1 ||
    fail "node-b's /metrics: $(cat "$T/scrape.out")"
  curl -s "http://$metrics/metrics" > "$T/node-b.scrape"
  finish node_b 30
  expect_rc 0 "rdma_pingmesh node-b"
  pingmesh_lines node_a
  pingmesh_lines node_b
  # Every window after the first (the peer's address being looked up) is ok, with nothing lost.
  expect_lines_jq '[.[] | select(.event == "window")] | length >= 4' node_a.lines
  expect_lines_jq '[.[] | select(.event == "window")] | .[1:] | all(.state == "ok" and .lost == 0 and .rtt_us.p50 > 0)' \
    node_a.lines
  expect_jq '.pingmesh.paths | length == 1 and .[0].peer == "node-b" and .[0].lost == 0 and .[0].answered > 50' node_a.report
  expect_jq '.pingmesh.node == "node-a" and .pingmesh.clock == "software" and .outcome == "completed"' node_a.report
  expect_jq '.pingmesh.paths[0].peer == "node-a" and .pingmesh.paths[0].answered > 50 and .pingmesh.scrapes >= 2' node_b.report
  # The textfile: OpenMetrics that Prometheus' own parser takes, ending in # EOF.
  "${RDMAKIT_PYTHON:-/usr/bin/python3}" "$HARNESS_ROOT/tests/integration/openmetrics_check.py" "$T/node-a.prom" \
    rdmakit_pingmesh_probes_sent rdmakit_pingmesh_rtt_seconds > "$T/prom_check.out" 2>&1 ||
    fail "node-a.prom is not OpenMetrics: $(cat "$T/prom_check.out")"
  pingmesh_expect_schema node_a
  note "node-b's /metrics: $(wc -l < "$T/node-b.scrape") lines, $(grep -c '^rdmakit_pingmesh' "$T/node-b.scrape") samples"
  note "node-a: $(jq -c '.pingmesh.paths[0] | {sent, answered, lost}' "$T/node_a.report"), last window rtt $(jq -s -c '[.[] | select(.event == "window")][-1].rtt_us' "$T/node_a.lines") us, cpu $(jq .pingmesh.cpu_seconds "$T/node_a.report") s in 6 s"
}

# Garbage in the pinglist, datagrams that are not probes, a peer outside the pinglist: each
# refused or counted as the man page says.
case_pingmesh_bad_input() {
  require_device
  next_port
  printf '10.55.0.1 node-a\nnot an address\n' > "$T/bad.list"
  run bad_list 10 "$OURS_PINGMESH" --pinglist "$T/bad.list" --name node-a -p "$PORT" --duration 1
  expect_rc 2 "a pinglist with a garbage line"
  expect_grep "bad.list:2" bad_list.err
  pingmesh_pinglist pinglist node-a 10.55.0.1
  run not_named 10 "$OURS_PINGMESH" --pinglist "$T/pinglist" --name node-z -p "$PORT" --duration 1
  expect_rc 2 "a node the pinglist does not name, without --bind"
  # node-b is not in node-a's pinglist: its probes are counted, not answered.
  pingmesh_pinglist only_a node-a 10.55.0.1
  pingmesh_pinglist both node-a 10.55.0.1 node-b 10.55.0.2
  start node_a "$OURS_PINGMESH" --pinglist "$T/only_a" --name node-a -p "$PORT" --window 1 --duration 5 --json
  run node_b 20 "$OURS_PINGMESH" --pinglist "$T/both" --name node-b -p "$PORT" --window 1 --duration 4 --json
  finish node_a 20
  expect_rc 0 "node-a, asked by a peer it does not know"
  pingmesh_lines node_a
  pingmesh_lines node_b
  expect_jq '.pingmesh.ignored.unknown_peer_request >= 1 or .pingmesh.ignored.unknown_peer >= 1' node_a.report
  expect_jq '.pingmesh.paths[0].answered == 0 and .pingmesh.paths[0].state == "down"' node_b.report
  # A metrics port that is taken: exit 2 before any probing.
  local metrics=127.0.0.1:$((PORT + 1))
  start holder "$OURS_PINGMESH" --pinglist "$T/both" --name node-a -p "$((PORT + 2))" --duration 6 --metrics "$metrics" \
    --log-level info
  wait_for_line holder.err "serving /metrics" 10
  run taken 10 "$OURS_PINGMESH" --pinglist "$T/both" --name node-b -p "$((PORT + 2))" --duration 2 --metrics "$metrics" --json
  expect_rc 2 "--metrics on a port taken"
  expect_jq '.outcome == "usage_error"' taken.out
  finish holder 20
}

case_pair_pingmesh() {
  require_peer
  require_root
  next_port
  pingmesh_pinglist pinglist here "$WIRE_ADDR" peer "$PEER_ADDR"
  local common=(--pinglist "$T/pinglist" -p "$PORT" --window 1 --rate 10 --json)
  remote_start peer_mesh "$OURS_PINGMESH" "${common[@]}" --name peer --duration 40
  start here "$OURS_PINGMESH" "${common[@]}" --name here --duration 34
  local started=${EPOCHREALTIME}
  wait_for_line here.out '"to":"ok"' 15

  # All RoCE from the peer dropped here: down within 2 windows of 1 s.
  tick 3
  local dropped=${EPOCHREALTIME}
  nft add table inet rdmakit_pm \; add chain inet rdmakit_pm input '{ type filter hook input priority 0; }' \; \
    add rule inet rdmakit_pm input ip saddr "$PEER_ADDR" udp dport 4791 drop || fail "nft here"
  restore "nft delete table inet rdmakit_pm"
  wait_for_line here.out '"to":"down"' 10
  tick 2
  local lifted=${EPOCHREALTIME}
  nft delete table inet rdmakit_pm
  # The peer's process killed: down; started again (a new QP): ok once resolved again.
  tick 4
  local killed=${EPOCHREALTIME}
  remote_signal peer_mesh KILL
  tick 4
  local restarted=${EPOCHREALTIME}
  remote_start peer_mesh2 "$OURS_PINGMESH" "${common[@]}" --name peer --duration 20
  finish here 40
  expect_rc 0 "rdma_pingmesh here"
  remote_finish peer_mesh2 30
  expect_rc 0 "rdma_pingmesh on the peer (restarted)"
  pingmesh_lines here
  local down_at back_at killed_at restarted_ok_at
  down_at=$(pingmesh_changed_at here "$PEER_ADDR" down "$dropped")
  back_at=$(pingmesh_changed_at here "$PEER_ADDR" ok "$lifted")
  killed_at=$(pingmesh_changed_at here "$PEER_ADDR" down "$killed")
  restarted_ok_at=$(pingmesh_changed_at here "$PEER_ADDR" ok "$restarted")
  local figures
  figures=$(jq -n --argjson d "$dropped" --argjson da "$down_at" --argjson l "$lifted" --argjson ba "$back_at" \
    --argjson k "$killed" --argjson ka "$killed_at" --argjson r "$restarted" --argjson ra "$restarted_ok_at" \
    '{drop_to_down: ($da - $d), lift_to_ok: ($ba - $l), kill_to_down: ($ka - $k), restart_to_ok: ($ra - $r)}
     | map_values(. * 100 | round / 100)')
  jq -e '.drop_to_down <= 2.5 and .kill_to_down <= 2.5' <<< "$figures" > /dev/null ||
    fail "a path went down later than 2 windows of 1 s after its fault: $figures"
  pingmesh_expect_schema here
  note "faults (s from injection to the state change, --window 1): $figures; started $(jq -n "$started")"
}
