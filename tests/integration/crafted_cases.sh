# Crafted peers (tests/peer/crafted_peer.cpp): a peer that breaks the wire protocol on
# purpose, one misdeed per run: CM private data that is garbage or of another version, a
# buffer length, address or rkey outside what was registered, a message of the wrong
# size, silence. Our tool must never trust it: it exits 1 within its --timeout + 4 s of the
# misdeed (timed here, from the wall clock the crafted peer prints), with a JSON report that
# names the problem and matches its schema; a server that goes on serving after refusing a
# client serves a real one afterwards. Under the sanitizer build the same cases show that
# nothing the peer says causes an out-of-bounds access.
#
# Each case function takes OURS (where our servers listen) and CRAFTED (where the crafted
# servers listen); one host passes its RDMA address twice. A two-host case points the
# CRAFTED_* hooks below at the remote_* helpers, so the crafted peer runs on the other host.

CRAFTED_PEER=$TEST_BIN/crafted_peer  # a test program: build/tests/bin, not beside the tools
CRAFTED_START=start
CRAFTED_FINISH=finish
CRAFTED_WAIT_LISTENING=wait_listening
CRAFTED_CLOCK_AHEAD_US=0  # the crafted peer's clock minus ours (two hosts: see peer_clock)
CRAFTED_TIMEOUT=3         # our tools' --timeout in these cases

# crafted NAME MODE ADDRESS PORT [ARGS...]: start the crafted peer. It waits 10 s at most
# for our tool at each step, longer than our tool waits for it, and 60 s for our client to
# come: the first start of a sanitizer build in an emulated guest has taken over 30 s.
crafted() {
  local name=$1 mode=$2 address=$3 port=$4
  shift 4
  "$CRAFTED_START" "$name" "$CRAFTED_PEER" --mode "$mode" -a "$address" -p "$port" --timeout 10 \
    --accept-timeout 60 "$@"
}

# crafted_done NAME: waits for the crafted peer NAME, which must have done its misdeed.
# Sets MISDEED_US (when, in microseconds of our clock), CRAFTED_MODE and CRAFTED_END (how
# our tool left it: disconnected, stayed, refused); RC stays our tool's. (One jq for all:
# every process started costs in an emulated guest.)
crafted_done() {
  local name=$1 ours=${RC:-0}
  "$CRAFTED_FINISH" "$name" 70
  [[ $RC -eq 0 ]] || fail "crafted peer $name: exit $RC (our tool: exit $ours); it said: $(tail -n 5 "$T/$name.err" 2> /dev/null)"
  read -r MISDEED_US CRAFTED_MODE CRAFTED_END <<< "$(jq -r '"\(.misdeed_at_us) \(.mode) \(.peer)"' "$T/$name.out")"
  [[ $MISDEED_US =~ ^[0-9]+$ ]] || fail "crafted peer $name did not do its misdeed"
  MISDEED_US=$((MISDEED_US - CRAFTED_CLOCK_AHEAD_US))
  RC=$ours
}

# start_timed NAME COMMAND...: start, noting when it ends in $T/NAME.ended (EPOCHREALTIME).
start_timed() {
  local name=$1
  shift
  start "$name" bash -c 'ended=$1; shift; "$@"; rc=$?; echo "$EPOCHREALTIME" > "$ended"; exit $rc' _ \
    "$T/$name.ended" "$@"
}
ended_us() { local at; at=$(< "$T/$1.ended"); echo "${at/./}"; }

# expect_no_sanitizer NAME: no ASan/UBSan report in $T/NAME.err (sanitizer build).
expect_no_sanitizer() {
  local err
  err=$(< "$T/$1.err")
  [[ $err != *Sanitizer* && $err != *"runtime error:"* ]] || fail "$1: sanitizer report"
}

# expect_crafted_failure TOOL NAME ENDED_US OUTCOME ERROR [FILTER]: our TOOL (output
# NAME.out) exited 1 at ENDED_US, within --timeout + 4 s of the last crafted peer's misdeed,
# with a report whose outcome is OUTCOME, one of whose errors matches the regex ERROR, that
# satisfies the jq FILTER too, and that matches the tool's schema; no sanitizer spoke.
expect_crafted_failure() {
  # The wall clock also pays the process's exit, under ASan its leak scan: 2.4 s of it beside
  # a busy guest and a build (5423 ms against a bound of timeout + 2 s). Timeout + 4 s is
  # still below the 10 s the crafted peer waits, so a tool that waited for the peer fails.
  local tool=$1 name=$2 ended=$3 outcome=$4 error=$5 filter=${6:-true} ms limit=$(((CRAFTED_TIMEOUT + 4) * 1000))
  expect_rc 1 "$tool ($name) after the crafted peer's $CRAFTED_MODE"
  expect_no_sanitizer "$name"  # its report exits 1 too: it must not pass for a refusal
  ms=$(((ended - MISDEED_US) / 1000))
  ((ms <= limit)) || fail "$name ended $ms ms after the crafted peer's $CRAFTED_MODE (limit $limit ms)"
  expect_jq ".outcome == \"$outcome\" and .exit_code == 1 and ([.errors[].message] | any(test(\"$error\")))
    and ($filter)" "$name.out"
  expect_schema "$tool" "$name.out"
  note "$CRAFTED_MODE -> $tool exit 1, $ms ms after the misdeed, $(jq -r '"run \(.duration_s * 1000 | floor) ms: \(.errors[0].message)"' "$T/$name.out")"
}

# Our send_bw client against crafted servers: each answer is refused or its fault seen.
crafted_send_bw_server_side() {
  local crafted_address=$2 i=0 mode args outcome error ended
  while IFS='|' read -r -u 3 mode args outcome error; do
    i=$((i + 1))
    next_port
    crafted "peer_$i" "$mode" "$crafted_address" "$PORT"
    "$CRAFTED_WAIT_LISTENING" "$PORT"
    # shellcheck disable=SC2086
    run "client_$i" 60 "$OURS_SEND_BW" "$crafted_address" -p "$PORT" $args --timeout "$CRAFTED_TIMEOUT" --json
    ended=${EPOCHREALTIME/./}
    crafted_done "peer_$i"
    # A failed work completion's status reaches the error record.
    expect_crafted_failure send_bw "client_$i" "$ended" "$outcome" "$error" \
      '.rows == [] and (if .errors[0].message | test("completion failed") then .errors[0].completion.status > 0 else true end)'
    expect_wait_bounded "client_$i.out" $((CRAFTED_TIMEOUT + 2))
    # The client hung up: the crafted server saw it go.
    [[ $CRAFTED_END == disconnected ]] || fail "$CRAFTED_MODE: the crafted server saw our client end as '$CRAFTED_END'"
  done 3<< 'EOF'
bw-server-garbage|-s 4096 -n 100|failed|answer: the peer is not send_bw
bw-server-version|-s 4096 -n 100|failed|answer: the peer speaks protocol version 3
bw-server-short-length|-s 4096 -n 100|failed|buffer holds 4095 bytes, 4096 needed
bw-server-bad-rkey|--op write -s 4096 -n 100|failed|remote access error
bw-server-bad-rkey|--lat --op write -s 64 -n 100|failed|remote access error
bw-server-bad-address|--op read -s 4096 -n 100|failed|remote access error
bw-server-bad-address|--lat --op read -s 64 -n 100|failed|remote access error
bw-server-silent|-s 4096 -n 100|timed_out|no completion for 3000 ms
EOF
}

# Crafted clients against our send_bw server: refused with a reason each, after which the
# server serves a real client; a client lying about its reply buffer fails the test.
crafted_send_bw_client_side() {
  local ours=$1 mode reason
  next_port
  start server "$OURS_SEND_BW" --bind "$ours" -p "$PORT" --max-size 65536 --max-memory 1M --timeout "$CRAFTED_TIMEOUT" \
    --json --accept-timeout 120
  wait_listening "$PORT"
  while IFS='|' read -r -u 3 mode reason; do
    crafted "peer_${mode//-/_}" "$mode" "$ours" "$PORT"
    crafted_done "peer_${mode//-/_}"
    expect_jq ".peer == \"refused\" and (.detail | test(\"$reason\"))" "peer_${mode//-/_}.out"
  done 3<< 'EOF'
bw-client-garbage|hello: the peer is not send_bw
bw-client-version|hello: the peer speaks protocol version 3
bw-client-huge|1073741824-byte messages asked for; this server allows 65536
bw-client-greedy|4 MiB of buffers asked for \\(64 queue pairs\\); this server allows 1 MiB \\(--max-memory\\)
EOF
  run real 60 "$OURS_SEND_BW" "$ours" -p "$PORT" -s 4096 -n 200 --json
  expect_rc 0 "our send_bw client after four crafted ones were refused"
  finish server 20
  expect_rc 0 "send_bw server that refused four crafted clients"
  expect_no_sanitizer server
  expect_jq '.outcome == "completed" and (.refused | length == 4) and .rows[0].iterations == 300' server.out
  expect_jq '[.refused[].reason] as $r | ($r[0] | test("not send_bw")) and ($r[1] | test("version 3"))
    and ($r[2] | test("--max-size")) and ($r[3] | test("--max-memory"))' server.out
  expect_schema send_bw server.out
  note "send_bw server refused: $(jq -c '[.refused[].reason]' "$T/server.out")"

  # A write latency test whose hello names a reply buffer the client never registered: the
  # server's answering write fails, and so does the test, with the reason.
  next_port
  start_timed victim "$OURS_SEND_BW" --bind "$ours" -p "$PORT" --timeout "$CRAFTED_TIMEOUT" --json --accept-timeout 60
  wait_listening "$PORT"
  crafted peer_reply bw-client-bad-reply-rkey "$ours" "$PORT"
  finish victim 70
  crafted_done peer_reply
  expect_crafted_failure send_bw victim "$(ended_us victim)" failed "remote access error" \
    '.test.test == "lat" and .test.operation == "write"'

  # A client accepted for a SEND stream that then sends nothing, its connection kept up: the
  # server ends that test after --timeout instead of polling for it for ever.
  next_port
  start_timed silent_victim "$OURS_SEND_BW" --bind "$ours" -p "$PORT" --timeout "$CRAFTED_TIMEOUT" --json \
    --accept-timeout 60
  wait_listening "$PORT"
  crafted peer_silent bw-client-silent "$ours" "$PORT"
  finish silent_victim 70
  crafted_done peer_silent
  expect_crafted_failure send_bw silent_victim "$(ended_us silent_victim)" timed_out "for $((CRAFTED_TIMEOUT * 1000)) ms" \
    '.test.test == "bw" and .test.operation == "send"'
}

# Crafted clients against our rping server: adverts naming memory they never registered,
# and a message shorter than an advert. A plain server fails on each; a persistent one
# records each connection's failure and serves a real client afterwards.
crafted_rping() {
  local ours=$1 i=0 mode error
  local -a modes=()
  while IFS='|' read -r -u 3 mode error; do
    i=$((i + 1))
    modes+=("$mode")
    next_port
    start_timed "server_$i" "$OURS_RPING" -s -a "$ours" -p "$PORT" --timeout "$CRAFTED_TIMEOUT" --json
    wait_listening "$PORT"
    crafted "peer_$i" "$mode" "$ours" "$PORT"
    finish "server_$i" 70
    crafted_done "peer_$i"
    expect_crafted_failure rping "server_$i" "$(ended_us "server_$i")" failed "$error" '.iterations.completed == 0'
  done 3<< 'EOF'
rping-client-bad-rkey|RDMA_READ failed: remote access error
rping-client-bad-address|RDMA_READ failed: remote access error
rping-client-short-message|peer sent a 8-byte message
EOF
  next_port
  start pserver "$OURS_RPING" -s -P -a "$ours" -p "$PORT" --timeout "$CRAFTED_TIMEOUT" --json
  wait_listening "$PORT"
  for mode in "${modes[@]}"; do
    crafted "ppeer_${mode//-/_}" "$mode" "$ours" "$PORT"
    crafted_done "ppeer_${mode//-/_}"
  done
  run real 60 "$OURS_RPING" -c -a "$ours" -p "$PORT" -C 10 -V --json
  expect_rc 0 "our rping client after three crafted ones"
  local pid
  eval "pid=\$PID_pserver"
  kill -INT "$pid"
  finish pserver 20
  expect_rc 130 "persistent rping server after SIGINT"
  expect_no_sanitizer pserver
  expect_schema rping pserver.out
  expect_jq '(.connections | length == 4) and .iterations.completed == 10' pserver.out
  expect_jq '[.connections[] | select(.outcome == "completed")] | length == 1 and .[0].iterations == 10' pserver.out
  expect_jq '[.connections[] | select(.outcome == "failed") | .error] as $e | ($e | length == 3)
    and ([$e[] | select(test("remote access error"))] | length == 2) and any($e[]; test("8-byte message"))' pserver.out
}

# rdma_server against crafted clients (a garbage message announcing 2^32 - 1 exchanges, then
# silence; a 2-byte message), rdma_client against crafted servers (a reply longer than the
# 16 bytes it posted, which the device refuses: rxe completes that receive with "local QP
# operation error", hardware with "local length error"; a 2-byte reply).
crafted_echo() {
  local ours=$1 crafted_address=$2 mode outcome error completed i=0 ended
  while IFS='|' read -r -u 3 mode outcome completed error; do
    i=$((i + 1))
    next_port
    start_timed "server_$i" "$OURS_RDMA_SERVER" -s "$ours" -p "$PORT" --timeout "$CRAFTED_TIMEOUT" --json \
      --accept-timeout 60
    wait_listening "$PORT"
    crafted "peer_$i" "$mode" "$ours" "$PORT"
    finish "server_$i" 70
    crafted_done "peer_$i"
    expect_crafted_failure rdma_server "server_$i" "$(ended_us "server_$i")" "$outcome" "$error" \
      ".iterations.completed == $completed"
  done 3<< 'EOF'
echo-client-garbage|timed_out|1|a message from the client
echo-client-short|failed|0|peer sent a 2-byte message
EOF
  while IFS='|' read -r -u 3 mode error; do
    i=$((i + 1))
    next_port
    crafted "peer_$i" "$mode" "$crafted_address" "$PORT"
    "$CRAFTED_WAIT_LISTENING" "$PORT"
    run "client_$i" 60 "$OURS_RDMA_CLIENT" -s "$crafted_address" -p "$PORT" -C 3 --timeout "$CRAFTED_TIMEOUT" --json
    ended=${EPOCHREALTIME/./}
    crafted_done "peer_$i"
    expect_crafted_failure rdma_client "client_$i" "$ended" failed "$error" ".iterations.completed == 0"
    expect_wait_bounded "client_$i.out" $((CRAFTED_TIMEOUT + 2))
  done 3<< 'EOF'
echo-server-garbage|local (length|QP operation) error
echo-server-short|peer sent a 2-byte message
EOF
}

# ctest: integration sanitized_only
case_crafted_send_bw_server_side() { require_device; crafted_send_bw_server_side "$RXE_ADDR" "$RXE_ADDR"; }
# ctest: integration sanitized_only
case_crafted_send_bw_client_side() { require_device; crafted_send_bw_client_side "$RXE_ADDR" "$RXE_ADDR"; }
# ctest: integration sanitized_only
case_crafted_rping() { require_device; crafted_rping "$RXE_ADDR" "$RXE_ADDR"; }
# ctest: integration sanitized_only
case_crafted_echo() { require_device; crafted_echo "$RXE_ADDR" "$RXE_ADDR"; }
