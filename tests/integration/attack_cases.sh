# The attack table (issue 55): a listener attacked from outside its allow list and from
# inside it, each cell an attack by tests/integration/attack.py while an allowed scraper asks
# for its page. In every cell the listener stays up, its RSS stays within a stated bound of
# where it started, and the allowed scraper is answered within 2 s; at the end SIGTERM ends it
# within 2 s with its report.

ATTACK_RSS_BOUND_KIB=16384  # what an attack may add to the listener's resident memory

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# attack ARGS...: tests/integration/attack.py ARGS.
attack() { "${RDMAKIT_PYTHON:-/usr/bin/python3}" "$HARNESS_ROOT/tests/integration/attack.py" "$@"; }

# flood_from_inside PORT: from $RXE_ADDR2 (inside the default allow list) to $RXE_ADDR:PORT,
# 300 silent connections held 8 s in the background (ATTACKER; its account in silent.attack),
# then 64 KiB of garbage (garbage.attack).
flood_from_inside() {
  attack silent "$RXE_ADDR" "$1" --count 300 --hold 8 --source "$RXE_ADDR2" --ready "$T/silent.ready" \
    > "$T/silent.attack" 2>&1 &
  ATTACKER=$!
  attack_ready silent
  attack garbage "$RXE_ADDR" "$1" --bytes 65536 --hold 2 --source "$RXE_ADDR2" > "$T/garbage.attack" 2>&1
}

# attack_ready NAME: until attack.py's connections for NAME are all open (its --ready file);
# a Python start in a loaded guest takes a second or more.
attack_ready() { poll_until 30 "the attack $1 did not get going in 30 s" test -e "$T/$1.ready"; }

# stopped_under_attack NAME TOOL: SIGTERM to the listener started as NAME; it must end within
# 2 s with a report that matches TOOL's schema. STOPPED_MS: how long it took.
stopped_under_attack() {
  local name=$1 tool=$2 started=${EPOCHREALTIME/./} pid_var="PID_$1"
  kill -TERM "${!pid_var}"
  finish "$name" 10
  STOPPED_MS=$(((${EPOCHREALTIME/./} - started) / 1000))
  ((STOPPED_MS <= 2000)) || fail "SIGTERM under attack: $tool took $STOPPED_MS ms to end"
  [[ -s $T/$name.out ]] || fail "no report after SIGTERM (exit $RC): $(head -c 400 "$T/$name.err")"
  expect_schema "$tool" "$name.out"
}

# attack_cell NAME PID URL ATTACK_ARGS...: one cell against the process PID serving URL: the
# attack in the background; while it holds, an allowed scrape (from 127.0.0.1) within 2 s
# and the process's RSS; then the attack's own account (NAME.attack).
attack_cell() {
  local name=$1 pid=$2 url=$3 attacker code rss peak=0 k
  shift 3
  attack "$@" --ready "$T/$name.ready" \
    > "$T/$name.attack" 2>&1 &
  attacker=$!
  attack_ready "$name"
  code=$(curl -s --max-time 2 --interface 127.0.0.1 -o "$T/$name.scrape" -w '%{http_code}' "$url")
  for k in 1 2 3; do
    rss=$(rss_kib "$pid") || fail "$name: the listener is gone"
    ((rss > peak)) && peak=$rss
    tick 0.5
  done
  wait "$attacker" || fail "$name: the attack itself failed: $(cat "$T/$name.attack")"
  kill -0 "$pid" 2> /dev/null || fail "$name: the listener is gone"
  [[ $code == 200 ]] || fail "$name: the allowed scrape got HTTP $code within 2 s during the attack"
  ((peak - ATTACK_BASE_RSS <= ATTACK_RSS_BOUND_KIB)) ||
    fail "$name: RSS rose from $ATTACK_BASE_RSS to $peak KiB (bound +$ATTACK_RSS_BOUND_KIB)"
  note "$name: $(cat "$T/$name.attack"); scrape $code; RSS $ATTACK_BASE_RSS -> $peak KiB"
}

# ctest: integration
case_metrics_attacks() {
  require_device
  local a=10.55.0.1 b=10.55.0.2
  next_port
  pingmesh_pinglist pinglist node-a "$a" node-b "$b"
  local url=http://$b:$((PORT + 1))/metrics
  start node "$OURS_PINGMESH" --pinglist "$T/pinglist" --name node-b -p "$PORT" --window 1 --json \
    --metrics "$b:$((PORT + 1))" --metrics-allow "$b/32,127.0.0.1/32" --log-level info
  poll_until 10 "rdma_pingmesh does not serve /metrics after 10 s" grep -q "serving /metrics" "$T/node.err"
  tick 1
  ATTACK_BASE_RSS=$(rss_kib "$PID_node")
  local outside=(--source "$a") inside=(--source "$b")
  attack_cell outside_silent "$PID_node" "$url" silent "$b" $((PORT + 1)) --count 300 --hold 4 "${outside[@]}"
  expect_jq '.opened + .refused == 300 and .answered == 0' outside_silent.attack
  attack_cell outside_header "$PID_node" "$url" header "$b" $((PORT + 1)) --bytes $((10 << 20)) --hold 4 "${outside[@]}"
  expect_jq '.answered == 0 and .closed == 1 and .sent < 10485760' outside_header.attack
  attack_cell inside_silent "$PID_node" "$url" silent "$b" $((PORT + 1)) --count 300 --hold 4 "${inside[@]}"
  # Two held (the address's share) until the request deadline, the rest closed at accept;
  # nothing answered. How many it closed within the hold is not asserted: beyond the backlog
  # of 16, a silent client's connection stays half-open on the server (SYN cookies) until it
  # sends, so the count is the guest's timing (0 of 300 in two runs, 298 in others).
  expect_jq '.opened + .refused == 300 and .answered == 0' inside_silent.attack
  attack_cell inside_header "$PID_node" "$url" header "$b" $((PORT + 1)) --bytes $((10 << 20)) --hold 4 "${inside[@]}"
  # The kernel's socket buffers take a megabyte or two before the close is seen; the listener
  # itself held 8 KiB (its RSS above).
  expect_jq '.closed == 1 and .sent < 10485760' inside_header.attack
  attack_cell inside_garbage "$PID_node" "$url" garbage "$b" $((PORT + 1)) --bytes 65536 --hold 4 "${inside[@]}"
  expect_jq '.closed == 1' inside_garbage.attack
  attack_cell inside_chunked "$PID_node" "$url" chunked "$b" $((PORT + 1)) --bytes $((10 << 20)) --hold 4 "${inside[@]}"
  expect_jq '.closed == 1 and .sent < 10485760' inside_chunked.attack
  attack_cell inside_drip "$PID_node" "$url" drip "$b" $((PORT + 1)) --hold 4 "${inside[@]}"
  expect_jq '.closed == 1 and .answered == 0' inside_drip.attack
  expect_grep "refused $a port [0-9]*: not in --metrics-allow" node.err
  # SIGTERM while 300 silent connections knock: it ends within 2 s, with its report.
  attack silent "$b" $((PORT + 1)) \
    --count 300 --hold 4 "${inside[@]}" --ready "$T/stop.ready" > "$T/stop.attack" 2>&1 &
  local attacker=$! stopping
  attack_ready stop
  stopping=${EPOCHREALTIME/./}
  kill -TERM "$PID_node"
  finish node 10
  local ms=$(((${EPOCHREALTIME/./} - stopping) / 1000))
  wait "$attacker" || true
  expect_rc 143 "rdma_pingmesh after SIGTERM under attack"
  ((ms <= 2000)) || fail "SIGTERM under attack: the listener took $ms ms to end"
  tail -n 1 "$T/node.out" > "$T/node.report"
  expect_jq '.outcome == "interrupted" and .pingmesh.scrapes >= 7 and .pingmesh.scrapes_refused >= 300' node.report
  note "SIGTERM under attack: ended in $ms ms; $(jq -c '.pingmesh | {scrapes, scrapes_refused}' "$T/node.report")"
}

# diag-connect's agent: 300 silent side-channel connections and 64 KiB of garbage from one
# address of its subnet while diag-connect asks from another. Before, the agent served its
# side channel one client at a time (three 5 s deadlines each) on the thread that takes its
# rdma_cm events: six silent connections filled its accept queue and a keyed client's connect
# step took 5854 ms. Now each client has a thread (16 at once, 4 from one address; the rest
# closed unread) and the probes' events wait for none of them.
# ctest: integration
case_agent_attacks() {
  require_device
  start_local_agent
  local probe=$AGENT_PROBE_PORT aport=$AGENT_SIDE_PORT attacker
  flood_from_inside "$aport"
  connect during 30 "$RXE_ADDR" -p "$probe" --agent-port "$aport" --timeout 3
  expect_connect_cause during ok 0
  expect_jq '.capture.agent.status == "ok"' during.out
  local connect_ms
  connect_ms=$(jq '[.capture.attempt.steps[] | select(.name == "connect")][0].ms' "$T/during.out")
  # A few ms alone; a loaded guest's scheduling, not the side channel, is what may add to it.
  jq -e "$connect_ms < 1500" <<< "null" > /dev/null || fail "the probe's connect step took $connect_ms ms during the attack"
  wait "$ATTACKER" || fail "the attack failed: $(cat "$T/silent.attack")"
  # The four it served got the handshake's first message (the agent speaks first), nothing more.
  expect_jq '.opened + .refused == 300 and .closed >= 296 and .answered <= 4' silent.attack
  # The refusals of the flood (too many at once, or --peer-rate's 60 in 10 s) were logged at a
  # rate, not a line each.
  local lines
  lines=$(grep -c "refused\|closed a side-channel client" "$T/agent.err" || true)
  ((lines <= 30)) || fail "$lines lines of refusals for 300 connections"
  # SIGTERM while 300 more knock: within 2 s, with its tally.
  attack silent "$RXE_ADDR" "$aport" \
    --count 300 --hold 4 --source "$RXE_ADDR2" --ready "$T/stop.ready" > "$T/stop.attack" 2>&1 &
  attacker=$!
  attack_ready stop
  local stopping=${EPOCHREALTIME/./} ms
  stop_local_agent
  ms=$(((${EPOCHREALTIME/./} - stopping) / 1000))
  wait "$attacker" || true
  ((ms <= 2000)) || fail "SIGTERM under attack: the agent took $ms ms to end"
  # 600 silent connections: four at a time served (and cut at their deadline), the rest closed
  # unread, as too many at once or, past 60 in 10 s, too fast (--peer-rate's default).
  expect_jq '.agent.busy + .refused_peers.too_fast >= 580 and .agent.answers == 1' agent.out
  note "agent under attack: connect step $connect_ms ms; $(cat "$T/silent.attack"); SIGTERM in $ms ms; $(jq -c '.agent' "$T/agent.out")"
}

# rdma_smoke --serve's control port: it made one peer's key handshake at a time with a 10 s
# deadline each, so an allowed host's silent connections kept the real peer waiting 10 s
# apiece. Now the handshakes run side by side (16 seats, 4 from one address; the rest closed
# unread): 300 silent connections and 64 KiB of garbage from another allowed address, and the
# peer's handshake still passes within 2 s; then SIGTERM under 300 more ends a second serving
# side within 2 s with its report.
# peer_served NAME CONTROL FIRST: rdma_smoke --peer (rping, forward) against the serving
# side on CONTROL, in the background; SERVED_MS: from its start to the serving side's
# "peer" line (its handshake passed) in $T/serving_NAME.err.
peer_served() {
  local name=$1 control=$2 first=$3 started
  started=${EPOCHREALTIME/./}
  start "peer_$name" "$OURS_SMOKE" --peer "$RXE_ADDR" -p "$first" --control-port "$control" --tools rping \
    --direction forward --key-file "$T/key" --json
  poll_until 10 "$name: the peer's handshake did not pass in 10 s" grep -qs "peer [^ ]*$RXE_ADDR:" \
    "$T/serving_$name.err"
  SERVED_MS=$(((${EPOCHREALTIME/./} - started) / 1000))
}

# serve NAME CONTROL FIRST: rdma_smoke --serve, keyed, in the background as serving_NAME.
serve() {
  start "serving_$1" "$OURS_SMOKE" --serve "$RXE_ADDR" -p "$3" --control-port "$2" --accept-timeout 120 \
    --key-file "$T/key" --json
  wait_for_line "serving_$1.err" "control port" 20
}

# ctest: integration
case_smoke_serve_attacks() {
  require_device
  head -c 32 /dev/urandom | base64 > "$T/key"
  chmod 600 "$T/key"
  next_port
  local control=$PORT first attacker baseline peak=0 rss k
  next_port
  first=$PORT
  # The baseline: how long the peer takes to get through with no attack (its own start, on
  # this guest, under this load); the attack may add 2 s to it at most.
  serve quiet "$control" "$first"
  peer_served quiet "$control" "$first"
  baseline=$SERVED_MS
  finish peer_quiet 120
  expect_rc 0 "rdma_smoke --peer, no attack"
  finish serving_quiet 60
  next_port
  control=$PORT
  serve attacked "$control" "$first"
  ATTACK_BASE_RSS=$(rss_kib "$PID_serving_attacked")
  flood_from_inside "$control"
  peer_served attacked "$control" "$first"
  for k in 1 2 3; do
    rss=$(rss_kib "$PID_serving_attacked") || break
    ((rss > peak)) && peak=$rss
    tick 0.5
  done
  ((SERVED_MS <= baseline + 2000)) ||
    fail "the peer's handshake passed after $SERVED_MS ms during the attack ($baseline ms without)"
  ((peak - ATTACK_BASE_RSS <= ATTACK_RSS_BOUND_KIB)) ||
    fail "RSS rose from $ATTACK_BASE_RSS to $peak KiB (bound +$ATTACK_RSS_BOUND_KIB)"
  finish peer_attacked 120
  expect_rc 0 "rdma_smoke --peer during the attack"
  finish serving_attacked 60
  expect_rc 0 "rdma_smoke --serve, its peer served during the attack"
  wait "$ATTACKER" || fail "the attack failed: $(cat "$T/silent.attack")"
  expect_jq '.smoke.passed == 1' serving_attacked.out
  local lines
  lines=$(grep -c "refused" "$T/serving_attacked.err" || true)
  ((lines <= 30)) || fail "$lines lines of refusals for 300 connections"
  note "smoke --serve under attack: the peer through in $SERVED_MS ms ($baseline ms without); RSS $ATTACK_BASE_RSS -> $peak KiB; $(cat "$T/silent.attack")"

  # SIGTERM while 300 knock: within 2 s, with its report.
  next_port
  control=$PORT
  serve stopped "$control" "$first"
  attack silent "$RXE_ADDR" "$control" \
    --count 300 --hold 4 --source "$RXE_ADDR2" --ready "$T/stop.ready" > "$T/stop.attack" 2>&1 &
  attacker=$!
  attack_ready stop
  stopped_under_attack serving_stopped rdma_smoke
  wait "$attacker" || true
  note "SIGTERM under attack: ended in $STOPPED_MS ms, exit $RC"
}

# A persistent rdma_cm server (rping -s -P) against an allowed host's rdma_cm connections that
# come up and say nothing (crafted_peer --mode cm-hold, from $RXE_ADDR2: 300 tried one after
# another, held 8 s; the server's --timeout, 20 s, outlasts them so that the counts are exact).
# Without a cap per address they took all of --max-clients (64) until the server's --timeout
# dropped them, and every other client was refused ("already serving 64 clients"): shown first
# with --max-per-peer 0. With the default (half of --max-clients) the
# host holds 32, the rest of its connections are refused, and a client from $RXE_ADDR is
# served within 2 s of its time without the attack; RSS stays within the bound; SIGTERM during
# the attack ends the server within 2 s with its report.
# hold NAME PORT COUNT HOLD: the cm-hold attack in the background (HOLDER), until it has tried
# every connection.
hold() {
  "$CRAFTED_PEER" --mode cm-hold -a "$RXE_ADDR" -p "$2" --bind "$RXE_ADDR2" --count "$3" --hold "$4" \
    --ready "$T/$1.ready" > "$T/$1.hold" 2> "$T/$1.hold.err" &
  HOLDER=$!
  poll_until 60 "$1: the cm-hold attack did not get through its connections in 60 s" test -e "$T/$1.ready"
}

# pinged NAME PORT: three pings from $RXE_ADDR; PINGED_MS from the client's start to its end.
pinged() {
  local started=${EPOCHREALTIME/./}
  run "$1" 30 "$OURS_RPING" -c -a "$RXE_ADDR" -I "$RXE_ADDR" -p "$2" -C 3 --timeout 5 --json
  PINGED_MS=$(((${EPOCHREALTIME/./} - started) / 1000))
}

# ctest: integration
case_persistent_attacks() {
  require_device
  local port baseline peak=0 rss k
  next_port
  port=$PORT
  # Without the cap per address: the attack takes every slot.
  start open_server "$OURS_RPING" -s -P -a "$RXE_ADDR" -p "$port" --timeout 20 --max-per-peer 0 --json
  wait_listening "$port"
  hold open "$port" 70 3
  pinged starved "$port"
  [[ $RC -ne 0 ]] || fail "with --max-per-peer 0 the client was served beside 64 silent connections"
  expect_grep "already serving 64 clients" starved.err
  wait "$HOLDER" || fail "the attack failed: $(cat "$T/open.hold.err")"
  expect_jq '.counts.held == 64 and .counts.refused == 6' open.hold
  kill -TERM "$PID_open_server"
  finish open_server 10
  note "--max-per-peer 0: $(jq -c .counts "$T/open.hold"); the client: $(head -c 200 "$T/starved.err")"

  # The default: half the slots for one address.
  next_port
  port=$PORT
  start server "$OURS_RPING" -s -P -a "$RXE_ADDR" -p "$port" --timeout 20 --json --log-level info
  wait_listening "$port"
  pinged quiet "$port"
  expect_rc 0 "rping -c, no attack"
  baseline=$PINGED_MS
  ATTACK_BASE_RSS=$(rss_kib "$PID_server")
  hold attacked "$port" 300 8
  pinged during "$port"
  expect_rc 0 "rping -c during the attack"
  for k in 1 2 3; do
    rss=$(rss_kib "$PID_server") || fail "the server is gone"
    ((rss > peak)) && peak=$rss
    tick 0.5
  done
  ((PINGED_MS <= baseline + 2000)) || fail "the client took $PINGED_MS ms during the attack ($baseline ms without)"
  ((peak - ATTACK_BASE_RSS <= ATTACK_RSS_BOUND_KIB)) ||
    fail "RSS rose from $ATTACK_BASE_RSS to $peak KiB (bound +$ATTACK_RSS_BOUND_KIB)"
  wait "$HOLDER" || fail "the attack failed: $(cat "$T/attacked.hold.err")"
  expect_jq '.counts.held == 32 and .counts.refused == 268 and .counts.failed == 0' attacked.hold
  local lines
  lines=$(grep -c "refused" "$T/server.err" || true)
  ((lines <= 30)) || fail "$lines lines of refusals for 268 connections"
  note "rping -s -P under attack: the client in $PINGED_MS ms ($baseline ms without); RSS $ATTACK_BASE_RSS -> $peak KiB; $(jq -c .counts "$T/attacked.hold")"

  # SIGTERM while 32 are held: within 2 s, with the report.
  hold stop "$port" 40 8
  stopped_under_attack server rping
  wait "$HOLDER" || true
  expect_jq '.refused_peers.too_many >= 276' server.out
  note "SIGTERM under attack: ended in $STOPPED_MS ms, exit $RC; $(jq -c .refused_peers "$T/server.out")"
}
