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

# pingmesh_pair_pinglist: the two guests' pinglist (here, peer) where the peer reads it too
# ($T is this guest's own /tmp), removed when the case ends; sets PAIR_PINGLIST.
pingmesh_pair_pinglist() {
  pingmesh_pinglist pinglist here "$WIRE_ADDR" peer "$PEER_ADDR"
  PAIR_PINGLIST=$RXEVM_RPC/$$-pinglist
  cp "$T/pinglist" "$PAIR_PINGLIST"
  restore "rm -f $PAIR_PINGLIST"
}

# pingmesh_lines NAME: $T/NAME.out's JSON lines apart: the windows' and state changes' in
# NAME.lines, the report (the last line) in NAME.report.
pingmesh_lines() {
  jq -c 'select(has("event"))' "$T/$1.out" > "$T/$1.lines" || : > "$T/$1.lines"
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

# ctest: integration sanitized
case_pingmesh_two_nodes() {
  require_device
  local a=10.55.0.1 b=10.55.0.2
  next_port
  pingmesh_pinglist pinglist node-a "$a" node-b "$b"
  local common=(--pinglist "$T/pinglist" -p "$PORT" --window 1 --rate 20 --json)
  # node-b's /metrics on its own address, for a scraper at 10.55.0.2 only.
  local metrics=$b:$((PORT + 1))
  # node-b outlives node-a long enough to be scraped twice on a loaded host.
  start node_b "$OURS_PINGMESH" "${common[@]}" --name node-b --duration 14 --metrics "$metrics" --metrics-allow "$b/32"
  run node_a 30 "$OURS_PINGMESH" "${common[@]}" --name node-a --duration 6 --prom-file "$T/node-a.prom"
  expect_rc 0 "rdma_pingmesh node-a"
  # node-b still runs: its /metrics, as Prometheus would scrape it, from the allowed address,
  # and from another address: closed before a byte is read (no HTTP answer), one log line,
  # counted.
  curl -s --max-time 5 --interface "$b" "http://$metrics/metrics" > "$T/node-b.scrape" || fail "scraping node-b from $b"
  local refused
  refused=$(curl -s --max-time 5 --interface "$a" -o /dev/null -w '%{http_code}' "http://$metrics/metrics")
  [[ $refused == 000 ]] || fail "a scrape from $a outside --metrics-allow got HTTP $refused, not a closed connection"
  "${RDMAKIT_PYTHON:-/usr/bin/python3}" "$HARNESS_ROOT/tests/integration/openmetrics_check.py" "$T/node-b.scrape" \
    rdmakit_pingmesh_probes_answered rdmakit_pingmesh_path_state > "$T/scrape.out" 2>&1 ||
    fail "node-b's /metrics: $(cat "$T/scrape.out")"
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
  expect_jq '.pingmesh.paths[0].peer == "node-a" and .pingmesh.paths[0].answered > 50 and .pingmesh.scrapes == 1
    and .pingmesh.scrapes_refused == 1' node_b.report
  expect_grep "refused $a port [0-9]*: not in --metrics-allow" node_b.err
  # The textfile: Prometheus text that Prometheus' own parser takes (node_exporter reads it
  # in pingmesh_consumers).
  "${RDMAKIT_PYTHON:-/usr/bin/python3}" "$HARNESS_ROOT/tests/integration/openmetrics_check.py" "$T/node-a.prom" \
    rdmakit_pingmesh_probes_sent rdmakit_pingmesh_rtt_seconds > "$T/prom_check.out" 2>&1 ||
    fail "node-a.prom is not Prometheus text: $(cat "$T/prom_check.out")"
  pingmesh_expect_schema node_a
  note "node-b's /metrics: $(wc -l < "$T/node-b.scrape") lines, $(grep -c '^rdmakit_pingmesh' "$T/node-b.scrape") samples"
  note "node-a: $(jq -c '.pingmesh.paths[0] | {sent, answered, lost}' "$T/node_a.report"), last window rtt $(jq -s -c '[.[] | select(.event == "window")][-1].rtt_us' "$T/node_a.lines") us, cpu $(jq .pingmesh.cpu_seconds "$T/node_a.report") s in 6 s"
}

# prometheus_query ADDRESS QUERY: the number of series Prometheus at ADDRESS answers QUERY
# with (0 when it does not answer yet).
prometheus_query() {
  curl -s --max-time 5 "http://$1/api/v1/query" --data-urlencode "query=$2" 2> /dev/null |
    jq -r 'if .status == "success" then .data.result | length else 0 end' 2> /dev/null || echo 0
}

# What monitoring really reads, from the packages users run: Debian's node_exporter reads
# node-a's textfile (it refused OpenMetrics: node_textfile_scrape_error 1, "unknown metric
# type stateset"), and Debian's Prometheus scrapes node-b's /metrics (OpenMetrics, as it asks)
# and node_exporter; both nodes' answered counts and path states arrive in Prometheus.
# ctest: integration
case_pingmesh_consumers() {
  require_device
  local a=10.55.0.1 b=10.55.0.2
  next_port
  pingmesh_pinglist pinglist node-a "$a" node-b "$b"
  local common=(--pinglist "$T/pinglist" -p "$PORT" --window 1 --rate 10)
  local metrics=$b:$((PORT + 1)) exporter=127.0.0.1:$((PORT + 2)) prometheus=127.0.0.1:$((PORT + 3))
  mkdir -p "$T/textfile" "$T/tsdb"
  printf '%s\n' "global: {scrape_interval: 1s, scrape_timeout: 1s}" "scrape_configs:" \
    "  - {job_name: pingmesh, static_configs: [{targets: ['$metrics']}]}" \
    "  - {job_name: node, static_configs: [{targets: ['$exporter']}]}" > "$T/prometheus.yml"
  start prometheus prometheus --config.file "$T/prometheus.yml" --storage.tsdb.path "$T/tsdb" \
    --web.listen-address "$prometheus"
  start exporter prometheus-node-exporter --collector.disable-defaults --collector.textfile \
    --collector.textfile.directory "$T/textfile" --web.listen-address "$exporter"
  # node-b's /metrics answers its subnet (the default), where Prometheus scrapes from.
  start node_b "$OURS_PINGMESH" "${common[@]}" --name node-b --duration 300 --metrics "$metrics"
  start node_a "$OURS_PINGMESH" "${common[@]}" --name node-a --duration 300 --prom-file "$T/textfile/node-a.prom"
  local query i found=false
  # Both ends' answered counts and node-a's path state as a gauge, through Prometheus.
  query='count(rdmakit_pingmesh_probes_answered_total > 0) == 2 and count(rdmakit_pingmesh_path_state{job="node"} == 1) == 1'
  for ((i = 0; i < 120; i++)); do
    if [[ $(prometheus_query "$prometheus" "$query") != 0 ]]; then
      found=true
      break
    fi
    tick 1
  done
  curl -s --max-time 5 "http://$exporter/metrics" > "$T/exporter.scrape" || fail "scraping node_exporter at $exporter"
  curl -s --max-time 5 "http://$prometheus/api/v1/targets" > "$T/targets.json" || fail "Prometheus' targets"
  $found || fail "Prometheus never held both nodes' answered probes: $(jq -c '[.data.activeTargets[] | {scrapeUrl, health, lastError}]' "$T/targets.json")"
  expect_grep '^node_textfile_scrape_error 0$' exporter.scrape
  if grep -q 'error gathering metrics' "$T/exporter.err"; then fail "node_exporter: $(grep -m 1 'error' "$T/exporter.err")"; fi
  expect_grep '^rdmakit_pingmesh_probes_answered_total{' exporter.scrape
  expect_jq '[.data.activeTargets[] | .health] == ["up", "up"]' targets.json
  # What /metrics answers each kind of scraper: OpenMetrics to Prometheus' Accept, text to none.
  "${RDMAKIT_PYTHON:-/usr/bin/python3}" "$HARNESS_ROOT/tests/integration/openmetrics_check.py" "http://$metrics/metrics" \
    rdmakit_pingmesh_probes_answered rdmakit_pingmesh_path_state > "$T/negotiated.out" 2>&1 ||
    fail "node-b's /metrics: $(cat "$T/negotiated.out")"
  local process
  for process in node_a node_b exporter prometheus; do kill -TERM "$(eval echo "\$PID_$process")"; done
  finish node_a 30
  expect_rc 143 "rdma_pingmesh node-a, stopped by SIGTERM"
  finish node_b 30
  expect_rc 143 "rdma_pingmesh node-b, stopped by SIGTERM"
  finish exporter 10
  finish prometheus 30
  note "Prometheus held both nodes after $i s; node_exporter: $(grep -c '^rdmakit_pingmesh' "$T/exporter.scrape") pingmesh samples"
}

# The exchange of device times, on rxe (no completion timestamps) with --host-stamps: probes
# ask for stamps, each answer is followed by its stamps, and the prober takes the round trip
# from its completions less the responder's. Then a node without stamps as the peer: the
# stamping prober waits for no stamps, the other asks for none.
# ctest: integration sanitized
case_pingmesh_host_stamps() {
  require_device
  local a=10.55.0.1 b=10.55.0.2
  next_port
  pingmesh_pinglist pinglist node-a "$a" node-b "$b"
  # Each node answers only while it runs, and starts probing once its own set-up is done, which
  # under ASan in a loaded guest may put either first: an answer timeout of 2 s leaves the
  # probes of a node's last 2 s pending rather than lost, so two runs of the same length may
  # end up to 2 s apart (with 1 s, node-a once ended 1.2 s before node-b stopped probing,
  # and node-b's last probes were lost).
  local common=(--pinglist "$T/pinglist" -p "$PORT" --window 1 --rate 20 --answer-timeout 2 --json)
  start node_b "$OURS_PINGMESH" "${common[@]}" --name node-b --duration 7 --host-stamps
  run node_a 30 "$OURS_PINGMESH" "${common[@]}" --name node-a --duration 7 --host-stamps
  expect_rc 0 "rdma_pingmesh node-a, --host-stamps"
  finish node_b 30
  expect_rc 0 "rdma_pingmesh node-b, --host-stamps"
  pingmesh_lines node_a
  pingmesh_lines node_b
  local name
  for name in node_a node_b; do
    # A fifth of the answers measured with stamps at least: an answer whose stamps leave no
    # network time is measured on the hosts' clocks (about half under ASan in a loaded guest).
    expect_jq '.pingmesh.clock == "host-completions" and (.pingmesh.paths[0] | .answered > 50 and .lost == 0
      and .rtt_device_samples * 5 >= .answered and .stamps_missing * 10 <= .answered)
      and (.pingmesh.ignored.stamps_unmatched // 0) * 10 <= .pingmesh.paths[0].answered' "$name.report"
  done
  expect_lines_jq '[.[] | select(.event == "window")] | .[2:] | all(.rtt_us.p50 > 0)' node_a.lines
  pingmesh_expect_schema node_a
  note "with stamps: node-a $(jq -c '.pingmesh.paths[0] | {answered, rtt_device_samples, stamps_missing}' "$T/node_a.report"), last window rtt $(jq -s -c '[.[] | select(.event == "window")][-1].rtt_us' "$T/node_a.lines") us"
  next_port
  common=(--pinglist "$T/pinglist" -p "$PORT" --window 1 --rate 20 --answer-timeout 2 --json)
  start plain_b "$OURS_PINGMESH" "${common[@]}" --name node-b --duration 5
  run stamped_a 30 "$OURS_PINGMESH" "${common[@]}" --name node-a --duration 5 --host-stamps
  expect_rc 0 "rdma_pingmesh node-a, --host-stamps, its peer without"
  finish plain_b 30
  expect_rc 0 "rdma_pingmesh node-b without --host-stamps"
  pingmesh_lines stamped_a
  pingmesh_lines plain_b
  expect_jq '.pingmesh.clock == "host-completions" and (.pingmesh.paths[0] | .answered > 30 and .lost == 0
    and .rtt_device_samples == 0 and .stamps_missing == 0)' stamped_a.report
  expect_jq '.pingmesh.clock == "software" and .pingmesh.paths[0].answered > 30 and .pingmesh.ignored == {}' plain_b.report
}

# Garbage in the pinglist, datagrams that are not probes, a peer outside the pinglist: each
# refused or counted as the man page says.
# ctest: integration sanitized
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
  # What no peer of ours sends, from an address node-a's pinglist names: each counted, and only
  # the first of a true answer sent twice taken.
  next_port
  start forged_node "$OURS_PINGMESH" --pinglist "$T/both" --name node-a -p "$PORT" --window 1 --duration 8 --json
  wait_listening "$PORT"
  run forger 30 "$TEST_BIN/crafted_peer" --mode pingmesh-forger -a 10.55.0.1 --bind 10.55.0.2 -p "$PORT" --timeout 6
  expect_rc 0 "crafted_peer --mode pingmesh-forger"
  finish forged_node 20
  expect_rc 0 "node-a, sent what no peer sends"
  pingmesh_lines forged_node
  expect_jq '.pingmesh.ignored | .short >= 1 and .foreign >= 1 and .other_version >= 1 and .malformed >= 1' \
    forged_node.report
  expect_jq '.pingmesh.paths[0] | .unexpected >= 2 and .answered >= 1' forged_node.report
  note "node-a, forged datagrams: $(jq -c '.pingmesh.ignored' "$T/forged_node.report"), path $(jq -c '.pingmesh.paths[0] | {answered, unexpected, late}' "$T/forged_node.report")"

  # A metrics port that is taken: exit 2 before any probing.
  local metrics=127.0.0.1:$((PORT + 1))
  start holder "$OURS_PINGMESH" --pinglist "$T/both" --name node-a -p "$((PORT + 2))" --duration 6 --metrics "$metrics" \
    --log-level info
  wait_for_line holder.err "serving /metrics" 10
  run taken 10 "$OURS_PINGMESH" --pinglist "$T/both" --name node-b -p "$((PORT + 2))" --duration 2 --metrics "$metrics" --json
  expect_rc 2 "--metrics on a port taken"
  expect_jq '.outcome == "usage_error"' taken.out
  finish holder 20

  # SIGHUP rereads the pinglist at once: the new list is put in place with the old one's
  # modification time, so that only the signal can have told the node.
  next_port
  pingmesh_pinglist reloaded.list node-a 10.55.0.1 node-x 10.55.0.9
  start reloaded "$OURS_PINGMESH" --pinglist "$T/reloaded.list" --name node-a -p "$PORT" --window 1 --duration 4 --json
  wait_for_line reloaded.out '"event":"window"' 10
  pingmesh_pinglist next.list node-a 10.55.0.1 node-y 10.55.0.8
  touch -r "$T/reloaded.list" "$T/next.list"
  mv "$T/next.list" "$T/reloaded.list"
  kill -HUP "$PID_reloaded"
  finish reloaded 20
  expect_rc 0 "node-a, sent SIGHUP"
  expect_grep "reloaded.list reread on SIGHUP: 2 peers" reloaded.err
  pingmesh_lines reloaded
  expect_jq '[.pingmesh.paths[].peer] == ["node-y"]' reloaded.report
}

# SIGTERM while diag-connect's diagnosis of a dead peer is under way (its SIDR probe and the
# agent's answer take --timeout each): the node ends at once with its report, the diagnosis
# given up. It used to wait for it: a 3 s --duration run ended after 13-14 s, and a loaded
# guest's ASan node outlasted its case's 20 s.
# ctest: integration
case_pingmesh_stop_during_diagnosis() {
  require_device
  next_port
  pingmesh_pinglist dead.list node-a 10.55.0.1 node-y 10.55.0.8
  start node "$OURS_PINGMESH" --pinglist "$T/dead.list" --name node-a -p "$PORT" --window 1 --json --log-level info
  wait_for_line node.err "diagnosing the path to node-y (10.55.0.8)" 30
  local stopping=${EPOCHREALTIME/./} ms
  kill -TERM "$PID_node"
  finish node 20
  ms=$(((${EPOCHREALTIME/./} - stopping) / 1000))
  expect_rc 143 "rdma_pingmesh, SIGTERM during a diagnosis"
  ((ms <= 2000)) || fail "SIGTERM during a diagnosis: the node took $ms ms to end"
  expect_grep "the diagnosis of 10.55.0.8 was given up: the run ended" node.err
  pingmesh_lines node
  expect_jq '.outcome == "interrupted"' node.report
  note "SIGTERM during a diagnosis: ended in $ms ms"
}

# pingmesh_wait_changes NAME STATE COUNT SECONDS: until NAME's output has COUNT changes to STATE.
pingmesh_wait_changes() {
  poll_until "$4" "$1 did not change to $2 $3 time(s) within $4 s: $(grep -o '"from":"[a-z]*"[^}]*"to":"[a-z]*"' "$T/$1.out")" \
    pingmesh_has_changes "$@"
}
pingmesh_has_changes() { (($(grep -c "\"event\":\"state\".*\"to\":\"$2\"" "$T/$1.out") >= $3)); }

# pingmesh_diagnosed_after NAME TIME: NAME has logged a diagnosis at or after TIME (unix seconds).
pingmesh_diagnosed_after() {
  jq -e --argjson after "$2" 'select(.event == "diagnosis" and .time >= $after)' "$T/$1.out" 2> /dev/null | grep -q .
}

# pingmesh_windows_between NAME ADDRESS FROM TO: how many of NAME's windows of the path to
# ADDRESS closed after FROM and by TO (unix seconds).
pingmesh_windows_between() {
  jq -s --arg a "$2" --argjson from "$3" --argjson to "$4" \
    '[.[] | select(.event == "window" and .address == $a and .time > $from and .time <= $to)] | length' "$T/$1.lines"
}

# pingmesh_drop_peer_roce: every RoCE packet from the peer dropped here (table
# inet rdmakit_pm, deleted again when the case ends).
pingmesh_drop_peer_roce() {
  nft add table inet rdmakit_pm \; add chain inet rdmakit_pm input '{ type filter hook input priority 0; }' \; \
    add rule inet rdmakit_pm input ip saddr "$PEER_ADDR" udp dport 4791 drop || fail "nft here"
  restore "nft delete table inet rdmakit_pm 2> /dev/null || true"
}

# ctest: pair
case_pair_pingmesh() {
  require_peer
  require_root
  next_port
  pingmesh_pair_pinglist
  local pinglist=$PAIR_PINGLIST
  # An answer timeout under the window: the last probe before a fault is counted lost in the
  # next window at the latest, so the path is down by the second window boundary. With the
  # timeout as long as the window, a fault just before a boundary took three (on a loaded host).
  local common=(--pinglist "$pinglist" -p "$PORT" --window 1 --answer-timeout 0.5 --rate 10 --json)
  remote_start peer_mesh "$OURS_PINGMESH" "${common[@]}" --name peer --duration 120
  start here "$OURS_PINGMESH" "${common[@]}" --name here --duration 120
  pingmesh_wait_changes here ok 1 20

  # The peer's process killed: down; started again (a new QP): ok once resolved again. First,
  # so that the path's one diagnosis in 10 minutes is the kill's.
  remote_signal peer_mesh KILL
  local killed=${EPOCHREALTIME}
  pingmesh_wait_changes here down 1 15
  # The diagnosis (diag-bind run beside, a process start in the guest) must meet the peer
  # still dead: the restart waits for it.
  wait_for_line here.out '"event":"diagnosis"' 30
  local restarted=${EPOCHREALTIME}
  remote_start peer_mesh2 "$OURS_PINGMESH" "${common[@]}" --name peer --duration 100
  pingmesh_wait_changes here ok 2 20
  # All RoCE from the peer dropped here: down within 2 windows. Each fault's time is taken
  # once it is in place (nft or the RPC can take a window on a loaded host).
  pingmesh_drop_peer_roce
  local dropped=${EPOCHREALTIME}
  pingmesh_wait_changes here down 2 15
  nft delete table inet rdmakit_pm
  local lifted=${EPOCHREALTIME}
  pingmesh_wait_changes here ok 3 15
  # SIGTERM, as systemd stops it: interrupted (143), the report still has the path.
  kill -TERM "$PID_here"
  finish here 20
  expect_rc 143 "rdma_pingmesh here, stopped by SIGTERM"
  # Started with the drop in place: the path's diagnosis finds the rule here, and the fix it
  # prints, run as printed, brings the path up.
  pingmesh_drop_peer_roce
  start here_fix "$OURS_PINGMESH" "${common[@]}" --name here --duration 60
  wait_for_line here_fix.out '"event":"diagnosis"' 30
  local fix
  fix=$(jq -r 'select(.event == "diagnosis") | .diagnosis.verdict.fix' "$T/here_fix.out" | head -n 1)
  [[ $fix == "nft delete rule inet rdmakit_pm input handle "* ]] ||
    fail "the diagnosis of the dropped path printed no fix for the rule: $(grep '"diagnosis"' "$T/here_fix.out")"
  local fixed=${EPOCHREALTIME}
  bash -c "$fix" || fail "the printed fix failed: $fix"
  pingmesh_wait_changes here_fix ok 1 20
  kill -TERM "$PID_here_fix"
  finish here_fix 20
  expect_rc 143 "rdma_pingmesh here, started behind the drop"
  pingmesh_lines here_fix
  local fix_to_ok
  fix_to_ok=$(jq -n --argjson f "$fixed" --argjson at "$(pingmesh_changed_at here_fix "$PEER_ADDR" ok "$fixed")" \
    '($at - $f) * 100 | round / 100')
  note "the dropped path's diagnosis: $(jq -r 'select(.event == "diagnosis") | .diagnosis.verdict.summary' "$T/here_fix.lines" | head -n 1); fixed with '$fix', ok $fix_to_ok s later"
  remote_signal peer_mesh2 TERM
  remote_finish peer_mesh2 20
  expect_rc 143 "rdma_pingmesh on the peer (restarted), stopped by SIGTERM"
  pingmesh_lines here
  expect_jq '.outcome == "interrupted" and .exit_code == 143 and .pingmesh.paths[0].answered > 0' here.report
  local down_at back_at killed_at restarted_ok_at
  down_at=$(pingmesh_changed_at here "$PEER_ADDR" down "$dropped")
  back_at=$(pingmesh_changed_at here "$PEER_ADDR" ok "$lifted")
  killed_at=$(pingmesh_changed_at here "$PEER_ADDR" down "$killed")
  restarted_ok_at=$(pingmesh_changed_at here "$PEER_ADDR" ok "$restarted")
  # The probes lost while the drop held time out in the window the path comes back in; they
  # belong to the outage, so the path goes from down straight to ok.
  local detours
  detours=$(jq -c --arg a "$PEER_ADDR" --argjson from "$lifted" --argjson to "$back_at" \
    'select(.event == "state" and .address == $a and .time > $from and .time < $to)' "$T/here.lines")
  [[ -z $detours ]] || fail "on its way back after the drop the path went: $detours"
  local windows
  for windows in "$(pingmesh_windows_between here "$PEER_ADDR" "$dropped" "$down_at")" \
    "$(pingmesh_windows_between here "$PEER_ADDR" "$killed" "$killed_at")"; do
    ((windows <= 2)) || fail "a path went down $windows windows after its fault, not within 2"
  done
  local figures
  figures=$(jq -c -n --argjson d "$dropped" --argjson da "$down_at" --argjson l "$lifted" --argjson ba "$back_at" \
    --argjson k "$killed" --argjson ka "$killed_at" --argjson r "$restarted" --argjson ra "$restarted_ok_at" \
    '{drop_to_down: ($da - $d), lift_to_ok: ($ba - $l), kill_to_down: ($ka - $k), restart_to_ok: ($ra - $r)}
     | map_values(. * 100 | round / 100)')
  # The kill's diagnosis asked the peer's rdma_pingmesh itself (SIDR at its port), where
  # nothing listened.
  expect_lines_jq "[.[] | select(.event == \"diagnosis\")][0].diagnosis | .capture.attempt.port == $PORT
    and .capture.attempt.port_space == \"udp\" and .verdict.cause == \"no_listener\"" here.lines
  pingmesh_expect_schema here
  note "faults (s from injection to the state change, --window 1): $figures"
  note "the kill's diagnosis: $(jq -r 'select(.event == "diagnosis") | .diagnosis.verdict.summary' "$T/here.lines" | head -n 1)"
}

# pingmesh_peer_second_node: a second node on the peer (its wire netdev's 10.57.0.11), so that
# this node has two paths; its address is removed again when the case ends.
pingmesh_peer_second_node() {
  remote_run second_address 20 bash -c 'ip addr add 10.57.0.11/24 dev "$WIRE_NETDEV"'
  [[ $RC -eq 0 ]] || fail "a second address on the peer: $(cat "$T/second_address.err")"
  restore "remote_run second_address_undo 20 bash -c 'ip addr del 10.57.0.11/24 dev \"\$WIRE_NETDEV\"'"
}

# The faults that take windows of their own (label pair_long): 1% of the peer's RoCE packets
# dropped -> lossy with the loss measured; 20 ms added to the peer's sends -> slow against the
# learned baseline; this node's wire netdev down -> every path down, the node reported, with
# diag-connect's verdict attached.
# ctest: pair long
case_pair_pingmesh_faults() {
  require_peer
  require_root
  next_port
  pingmesh_peer_second_node
  pingmesh_pinglist pinglist here "$WIRE_ADDR" peer "$PEER_ADDR"
  pingmesh_pinglist pinglist3 here "$WIRE_ADDR" peer "$PEER_ADDR" peer2 10.57.0.11
  local pinglist=$RXEVM_RPC/$$-pinglist pinglist3=$RXEVM_RPC/$$-pinglist3
  cp "$T/pinglist" "$pinglist"
  cp "$T/pinglist3" "$pinglist3"
  restore "rm -f $pinglist $pinglist3"

  # 1% of what the peer sends dropped here, 60 s at 50 probes a second in windows of 10 s.
  local lossy=(--pinglist "$pinglist" -p "$PORT" --window 10 --rate 50 --loss-threshold 0.5 --json)
  remote_start peer_lossy "$OURS_PINGMESH" "${lossy[@]}" --name peer --duration 80
  start here_lossy "$OURS_PINGMESH" "${lossy[@]}" --name here --duration 75
  wait_for_line here_lossy.out '"to":"ok"' 30
  local dropped=${EPOCHREALTIME}
  nft add table inet rdmakit_pm \; add chain inet rdmakit_pm input '{ type filter hook input priority 0; }' \; \
    add rule inet rdmakit_pm input ip saddr "$PEER_ADDR" udp dport 4791 numgen random mod 100 \< 1 drop || fail "nft here"
  restore "nft delete table inet rdmakit_pm 2> /dev/null || true"
  finish here_lossy 90
  expect_rc 0 "rdma_pingmesh here (1% dropped)"
  nft delete table inet rdmakit_pm
  remote_stop peer_lossy
  pingmesh_lines here_lossy
  local lossy_at loss
  lossy_at=$(pingmesh_changed_at here_lossy "$PEER_ADDR" lossy "$dropped")
  loss=$(jq -s --argjson after "$dropped" --arg a "$PEER_ADDR" '[.[] | select(.event == "window" and .address == $a
    and .time > $after + 10)] | (map(.lost) | add) / (map(.lost + .answered) | add) * 100 | . * 100 | round / 100' \
    "$T/here_lossy.lines")
  jq -e -n --argjson l "$loss" '$l >= 0.5 and $l <= 2' > /dev/null || fail "1% dropped, $loss% measured"
  jq -e -n --argjson at "$lossy_at" --argjson d "$dropped" '$at - $d <= 60' > /dev/null ||
    fail "lossy only $(jq -n "$lossy_at - $dropped") s after 1% was dropped"
  note "1% dropped: lossy after $(jq -n "$lossy_at - $dropped | . * 100 | round / 100") s, $loss% lost in the windows after"

  # 20 ms more on every packet the peer sends, once the baseline is learned (6 windows of 2 s).
  next_port
  local slow=(--pinglist "$pinglist" -p "$PORT" --window 2 --rate 10 --json)
  remote_start peer_slow "$OURS_PINGMESH" "${slow[@]}" --name peer --duration 45
  start here_slow "$OURS_PINGMESH" "${slow[@]}" --name here --duration 40
  tick 20
  local delayed=${EPOCHREALTIME}
  remote_run netem 20 bash -c 'tc qdisc add dev "$WIRE_NETDEV" root netem delay 20ms'
  [[ $RC -eq 0 ]] || fail "netem on the peer: $(cat "$T/netem.err")"
  restore "remote_run netem_undo 20 bash -c 'tc qdisc del dev \"\$WIRE_NETDEV\" root'"
  finish here_slow 60
  expect_rc 0 "rdma_pingmesh here (20 ms added)"
  remote_run netem_off 20 bash -c 'tc qdisc del dev "$WIRE_NETDEV" root'
  remote_stop peer_slow
  pingmesh_lines here_slow
  local slow_at
  slow_at=$(pingmesh_changed_at here_slow "$PEER_ADDR" slow "$delayed")
  note "20 ms added: slow after $(jq -n "$slow_at - $delayed | . * 100 | round / 100") s: $(jq -r --arg a "$PEER_ADDR" 'select(.event == "state" and .address == $a and .to == "slow") | .why' "$T/here_slow.lines" | head -n 1)"

  # This node's wire netdev down: both paths down in one window, the node reported, and
  # diag-connect's verdict on the first path attached.
  next_port
  local node=(--pinglist "$pinglist3" -p "$PORT" --window 1 --rate 10 --json)
  remote_start peer_node "$OURS_PINGMESH" "${node[@]}" --name peer --duration 30
  remote_start peer2_node "$OURS_PINGMESH" "${node[@]}" --name peer2 --duration 30
  start here_node "$OURS_PINGMESH" "${node[@]}" --name here --duration 20
  # Both paths ok first: a peer that was not listening yet when this node first asked makes
  # its path go down, and be diagnosed, before the fault.
  pingmesh_wait_changes here_node ok 2 15
  tick 3
  local downed=${EPOCHREALTIME}
  ip link set dev "$WIRE_NETDEV" down
  restore "ip link set dev $WIRE_NETDEV up"
  wait_for_line here_node.out '"peer":null' 15
  poll_until 20 "no diagnosis after the netdev went down: $(grep '"diagnosis"' "$T/here_node.out")" \
    pingmesh_diagnosed_after here_node "$downed"
  # The netdev is put back up by the fix the verdict printed.
  local fix
  fix=$(jq -r --argjson after "$downed" \
    'select(.event == "diagnosis" and .time >= $after) | .diagnosis.verdict.fix' "$T/here_node.out" | head -n 1)
  [[ $fix == "ip link set $WIRE_NETDEV up" ]] || fail "diag-connect's fix with this node's netdev down: '$fix'"
  bash -c "$fix" || fail "the printed fix failed: $fix"
  finish here_node 40
  expect_rc 0 "rdma_pingmesh here (its netdev down)"
  remote_stop peer_node
  remote_stop peer2_node
  pingmesh_lines here_node
  local node_at
  node_at=$(jq -r --argjson after "$downed" 'select(.event == "state" and .peer == null and .to == "down"
    and .time >= $after) | .time' "$T/here_node.lines" | head -n 1)
  [[ -n $node_at ]] || fail "the node was not reported when its netdev went down"
  expect_lines_jq '[.[] | select(.event == "diagnosis")] | length >= 1 and all(.diagnosis.verdict.cause | type == "string")' \
    here_node.lines
  pingmesh_expect_schema here_node
  note "netdev down: the node reported after $(jq -n "$node_at - $downed | . * 100 | round / 100") s; diag-connect: $(jq -r --argjson after "$downed" 'select(.event == "diagnosis" and .time >= $after) | .diagnosis.verdict.summary' "$T/here_node.lines" | head -n 1)"
}

# 50 ms more on the peer's sends at the default window (10 s), rate (10/s) and slow factor
# (3): the baseline is the median p99 of the first six ok windows (a minute), so the delay
# goes in after seven; slow within two windows of it (label pair_long). Not 20 ms: in the
# TCG guests a 10 s window's p99 is about 10 ms (idle vCPUs woken), so 3 x the baseline is
# about 29 ms, and 20 ms more on a 3 ms median went slow in the third window, or flapped.
# ctest: pair long
case_pair_pingmesh_slow() {
  require_peer
  require_root
  next_port
  pingmesh_pair_pinglist
  local pinglist=$PAIR_PINGLIST
  local defaults=(--pinglist "$pinglist" -p "$PORT" --json)
  remote_start peer_slow "$OURS_PINGMESH" "${defaults[@]}" --name peer --duration 125
  start here_slow "$OURS_PINGMESH" "${defaults[@]}" --name here --duration 115
  wait_for_line here_slow.out '"to":"ok"' 30
  # Six ok windows after the first (unknown -> ok) one: the baseline is learned.
  local deadline=$((SECONDS + 90))
  until (($(grep -c '"event":"window"' "$T/here_slow.out") >= 8)); do
    ((SECONDS < deadline)) || fail "fewer than 8 windows in 90 s"
    tick 1
  done
  local delayed=${EPOCHREALTIME}
  remote_run netem 20 bash -c 'tc qdisc add dev "$WIRE_NETDEV" root netem delay 50ms'
  [[ $RC -eq 0 ]] || fail "netem on the peer: $(cat "$T/netem.err")"
  restore "remote_run netem_undo 20 bash -c 'tc qdisc del dev \"\$WIRE_NETDEV\" root'"
  finish here_slow 140
  expect_rc 0 "rdma_pingmesh here (50 ms added, default window)"
  remote_run netem_off 20 bash -c 'tc qdisc del dev "$WIRE_NETDEV" root'
  remote_stop peer_slow
  pingmesh_lines here_slow
  local slow_at windows
  slow_at=$(pingmesh_changed_at here_slow "$PEER_ADDR" slow "$delayed")
  windows=$(pingmesh_windows_between here_slow "$PEER_ADDR" "$delayed" "$slow_at")
  ((windows <= 2)) || fail "slow $windows windows after 50 ms were added, not within 2"
  # Nothing but unknown -> ok before the delay: no false alarm while the baseline was learned.
  expect_lines_jq "[.[] | select(.event == \"state\" and .time < $delayed)] | length == 1 and .[0].to == \"ok\"" \
    here_slow.lines
  pingmesh_expect_schema here_slow
  note "50 ms added at the default window: slow after $(jq -n "$slow_at - $delayed | . * 100 | round / 100") s: $(jq -r --arg a "$PEER_ADDR" 'select(.event == "state" and .address == $a and .to == "slow") | .why' "$T/here_slow.lines" | head -n 1)"
}

# Ten minutes clean at the default rates and window: no state change after the first ok
# (label pair_long).
# ctest: pair long
case_pair_pingmesh_clean() {
  require_peer
  next_port
  pingmesh_pair_pinglist
  local pinglist=$PAIR_PINGLIST
  local common=(--pinglist "$pinglist" -p "$PORT" --json)
  local metrics=127.0.0.1:$((PORT + 1))
  remote_start peer_clean "$OURS_PINGMESH" "${common[@]}" --name peer --duration 620
  start here "$OURS_PINGMESH" "${common[@]}" --name here --duration 610 --metrics "$metrics" --prom-file "$T/here.prom"
  # Near the end, both as Prometheus would read them: over HTTP and from the textfile.
  tick 600
  curl -s --max-time 5 "http://$metrics/metrics" > "$T/here.scrape" || fail "scraping http://$metrics/metrics"
  local scraped
  for scraped in here.scrape here.prom; do
    "${RDMAKIT_PYTHON:-/usr/bin/python3}" "$HARNESS_ROOT/tests/integration/openmetrics_check.py" "$T/$scraped" \
      rdmakit_pingmesh_probes_answered rdmakit_pingmesh_rtt_seconds > "$T/$scraped.check" 2>&1 ||
      fail "$scraped is not OpenMetrics: $(cat "$T/$scraped.check")"
  done
  finish here 100
  expect_rc 0 "rdma_pingmesh here, 10 minutes"
  remote_finish peer_clean 60
  pingmesh_lines here
  expect_lines_jq '[.[] | select(.event == "state")] | length == 1 and .[0].to == "ok"' here.lines
  expect_lines_jq '[.[] | select(.event == "window")] | .[1:] | all(.state == "ok" and .lost == 0)' here.lines
  expect_jq '.pingmesh.paths[0].lost == 0 and .pingmesh.scrapes == 1' here.report
  pingmesh_expect_schema here
  note "10 minutes: $(jq -c '.pingmesh.paths[0] | {sent, answered, lost, late}' "$T/here.report"), cpu $(jq .pingmesh.cpu_seconds "$T/here.report") s"
}
