# --key-file: the key handshake on the two TCP side channels, the diag-connect agent's and
# rdma_smoke's control connection. Each is attacked with key_handshake.py (a client that
# speaks the handshake well or badly): a wrong key, no key, a replayed answer, half an answer,
# nothing; each is refused within the server's bound with nothing served, logged and counted,
# and the right key still works. A key file others may read is refused at start (exit 2).

KEY_HANDSHAKE=$HARNESS_ROOT/tests/integration/key_handshake.py

# make_keys: $T/key and $T/other (0600, different keys) and $T/open.key (0644).
make_keys() {
  head -c 32 /dev/urandom | base64 > "$T/key"
  head -c 32 /dev/urandom | base64 > "$T/other"
  cp "$T/key" "$T/open.key"
  chmod 600 "$T/key" "$T/other"
  chmod 644 "$T/open.key"
}

# handshake NAME PORT SERVICE MODE ARGS...: key_handshake.py against $RXE_ADDR:PORT; its line
# in $T/NAME.out, and VERDICT, SERVED and CLOSED_AFTER from it.
handshake() {
  local name=$1 port=$2
  shift 2
  run "$name" 40 "${RDMAKIT_PYTHON:-python3}" "$KEY_HANDSHAKE" "$RXE_ADDR" "$port" "$@"
  read -r _ VERDICT _ SERVED _ CLOSED_AFTER _ < "$T/$name.out" ||
    fail "$name: no result (exit $RC): $(head -c 400 "$T/$name.err")"
}

# expect_refused NAME VERDICT BOUND: the last handshake got VERDICT (none: no verdict came),
# nothing but the hello was served, and the server closed within BOUND seconds.
expect_refused() {
  local name=$1 verdict=$2 bound=$3
  [[ $VERDICT == "$verdict" ]] || fail "$name: verdict $VERDICT, expected $verdict: $(cat "$T/$name.out")"
  ((SERVED <= 40)) || fail "$name: $SERVED bytes served after the handshake was refused"
  [[ ${CLOSED_AFTER%.*} -lt $bound ]] || fail "$name: the server closed only after $CLOSED_AFTER s (bound $bound)"
  note "$name: verdict $VERDICT, closed after $CLOSED_AFTER s"
}

# ctest: integration
case_key_agent() {
  require_device
  make_keys
  next_port
  local aport=$PORT
  run open_key 10 "$OURS_DIAG_CONNECT" --serve --no-listen --bind "$RXE_ADDR" --agent-port "$aport" \
    --key-file "$T/open.key"
  expect_rc 2 "diag-connect --serve with a key file of mode 0644"
  expect_grep "mode 0644" open_key.err
  expect_grep "chmod 600" open_key.err
  next_port
  local probe=$PORT
  start agent "$OURS_DIAG_CONNECT" --serve --bind "$RXE_ADDR" -p "$probe" --agent-port "$aport" \
    --key-file "$T/key" --timeout 3 --max-connections 1 --log-level info --json
  wait_for_line agent.err "side channel on TCP" 20
  local request='{"version":1,"address":"'"$RXE_ADDR"'","port":7471,"port_space":"tcp","source":""}'
  handshake right "$aport" agent good "$T/key" "$request"
  [[ $VERDICT == 0 && $SERVED -gt 100 ]] || fail "the right key: verdict $VERDICT, $SERVED bytes answered"
  handshake wrong "$aport" agent good "$T/other" "$request"
  expect_refused wrong 2 3
  handshake nokey "$aport" agent open "$request"
  expect_refused nokey 1 3
  # A good answer recorded on one connection is a wrong key on the next: its nonce is new.
  handshake record "$aport" agent record "$T/key" "$T/recorded"
  [[ $VERDICT == 0 ]] || fail "record: verdict $VERDICT"
  handshake replay "$aport" agent replay "$T/recorded" "$request"
  expect_refused replay 2 3
  handshake half "$aport" agent half
  expect_refused half none 6
  handshake silent "$aport" agent silent
  expect_refused silent none 6
  # diag-connect itself, with no key and with another: its probe is rejected before it takes
  # the agent's one probe slot (--max-connections 1), saying why, and so is its side channel.
  connect client_nokey 30 "$RXE_ADDR" -p "$probe" --agent-port "$aport" --timeout 5
  expect_connect_cause client_nokey rejected_by_application 1
  expect_jq '.capture.agent.status == "unauthenticated" and (.capture.agent.detail | test("--key-file"))' \
    client_nokey.out
  expect_jq '.capture.attempt.rejection.private_data | test("probes need a ticket \\(diag-connect --key-file\\)")' \
    client_nokey.out
  connect client_other 30 "$RXE_ADDR" -p "$probe" --agent-port "$aport" --timeout 5 --key-file "$T/other"
  expect_connect_cause client_other rejected_by_application 1
  expect_jq '.capture.attempt.rejection.private_data | test("not from this agent.s key")' client_other.out
  # The key: the probe takes the slot and checks the data path; the agent answers.
  connect client_key 30 "$RXE_ADDR" -p "$probe" --agent-port "$aport" --timeout 5 --key-file "$T/key"
  expect_connect_cause client_key ok 0
  expect_jq '.capture.agent.status == "ok"' client_key.out
  kill -TERM "$PID_agent"
  finish agent 10
  expect_rc 0 "the agent, stopped with SIGTERM"
  expect_schema diag-connect agent.out
  # wrong, nokey, replay, half, silent, and the two diag-connects without the key.
  expect_jq '.agent.unauthenticated == 7 and .agent.answers == 2' agent.out
  expect_jq '.agent.unticketed == 2 and .agent.connections == 1 and .agent.rejected == 0' agent.out
  expect_grep "rejected a probe from $RXE_ADDR: this agent is keyed" agent.err
  local why
  for why in "wrong key" "no key" "too slow: 36 of 72" "too slow: 0 of 72"; do
    expect_grep "refused $RXE_ADDR: handshake: $why" agent.err
  done
  note "$(grep -c 'handshake:' "$T/agent.err") refusals logged; $(jq -c .agent "$T/agent.out")"
}

# ctest: integration
case_key_smoke() {
  require_device
  make_keys
  next_port
  local control=$PORT
  next_port
  run open_key 10 "$OURS_SMOKE" --serve "$RXE_ADDR" --control-port "$control" --key-file "$T/open.key"
  expect_rc 2 "rdma_smoke --serve with a key file of mode 0644"
  expect_grep "chmod 600" open_key.err
  run open_key_peer 10 "$OURS_SMOKE" --peer "$RXE_ADDR" --control-port "$control" --key-file "$T/open.key"
  expect_rc 2 "rdma_smoke --peer with a key file of mode 0644"
  # A good answer to record: a first serving side takes it (and then loses its silent peer).
  start recorder "$OURS_SMOKE" --serve "$RXE_ADDR" -p "$PORT" --control-port "$control" --accept-timeout 60 \
    --key-file "$T/key"
  wait_for_line recorder.err "control port" 20
  handshake record "$control" smoke record "$T/key" "$T/recorded"
  [[ $VERDICT == 0 ]] || fail "record: verdict $VERDICT"
  kill -TERM "$PID_recorder" 2> /dev/null
  finish recorder 10
  start serving "$OURS_SMOKE" --serve "$RXE_ADDR" -p "$PORT" --control-port "$control" --accept-timeout 120 \
    --key-file "$T/key" --json
  wait_for_line serving.err "control port" 20
  handshake wrong "$control" smoke good "$T/other"
  expect_refused wrong 2 3
  handshake nokey "$control" smoke open
  expect_refused nokey 1 3
  handshake replay "$control" smoke replay "$T/recorded"
  expect_refused replay 2 3
  handshake half "$control" smoke half
  expect_refused half none 13
  handshake silent "$control" smoke silent
  expect_refused silent none 13
  # rdma_smoke --peer without the key: one line saying the serving side needs --key-file.
  run peer_nokey 30 "$OURS_SMOKE" --peer "$RXE_ADDR" -p "$PORT" --control-port "$control" --tools rping \
    --direction forward
  [[ $RC -ne 0 ]] || fail "rdma_smoke --peer without a key was served"
  grep -q "requires one; give the client --key-file" "$T/peer_nokey.err" "$T/peer_nokey.out" ||
    fail "rdma_smoke --peer without a key did not say the serving side needs --key-file: $(head -c 400 "$T/peer_nokey.err")"
  # The right key: served, and the serving side ends as it does after any run.
  smoke right 120 --peer "$RXE_ADDR" -p "$PORT" --control-port "$control" --tools rping --direction forward \
    --key-file "$T/key"
  expect_rc 0 "rdma_smoke --peer with the key"
  finish serving 30
  expect_rc 0 "rdma_smoke --serve"
  expect_schema rdma_smoke serving.out
  # wrong, nokey, replay, half, silent and the keyless --peer.
  expect_jq '.smoke.unauthenticated == 6 and .smoke.passed == 1' serving.out
  local why
  for why in "wrong key" "no key" "too slow: 36 of 72" "too slow: 0 of 72"; do
    expect_grep "refused [^ ]*$RXE_ADDR:[0-9]*: handshake: $why" serving.err
  done
  note "$(grep -c 'handshake:' "$T/serving.err") refusals logged; the keyed run: $(jq -c '.smoke.cases[0].outcome' "$T/right.out")"
}

# relay NAME LISTEN_PORT TARGET_PORT [--flip DIR:N]: tamper_relay.py between $RXE_ADDR ports,
# in the background (its line in $T/NAME.out), ready before it returns.
relay() {
  local name=$1 listen=$2 target=$3
  shift 3
  start "$name" "${RDMAKIT_PYTHON:-python3}" "$HARNESS_ROOT/tests/integration/tamper_relay.py" "$RXE_ADDR" "$listen" \
    "$RXE_ADDR" "$target" --ready "$T/$name.ready" --hold 60 "$@"
  poll_until 20 "the relay $name did not listen in 20 s" test -e "$T/$name.ready"
}

# A host on the path relays the key handshake untouched (so both ends authenticate each other)
# and then flips one bit of what follows: the agent's answer, the client's request, the smoke
# peer's plan and the serving side's reply. Each is caught by the frames' MAC and named;
# a faithful relay (the control) is served as usual, so the relay itself is not the cause.
# ctest: integration
case_key_tamper() {
  require_device
  make_keys
  next_port
  local aport=$PORT rport
  start agent "$OURS_DIAG_CONNECT" --serve --no-listen --bind "$RXE_ADDR" --agent-port "$aport" \
    --key-file "$T/key" --timeout 5 --log-level info --json
  wait_for_line agent.err "side channel on TCP" 20
  next_port
  local probe=$PORT
  # ask NAME FLIP...: diag-connect through a relay flipping FLIP (none: faithful).
  ask() {
    local name=$1
    shift
    next_port
    rport=$PORT
    relay "relay_$name" "$rport" "$aport" "$@"
    run "$name" 40 "$OURS_DIAG_CONNECT" "$RXE_ADDR" -p "$probe" --agent-port "$rport" --timeout 5 --json \
      --key-file "$T/key"
    finish "relay_$name" 10
    [[ -s $T/$name.out ]] || fail "$name: no report (exit $RC): $(head -c 400 "$T/$name.err")"
    expect_schema diag-connect "$name.out"
  }
  ask faithful
  expect_jq '.capture.agent.status == "ok"' faithful.out
  # Byte 100 of the agent's stream: its hello and verdict are 80, the frame's length 4.
  ask answer_flipped --flip s2c:100
  expect_jq '.flipped == 100' relay_answer_flipped.out
  expect_jq '.capture.agent.status == "tampered" and (.capture.agent.detail | test("message 0 from the agent fails its MAC"))' \
    answer_flipped.out
  # Byte 80 of the client's: its handshake answer is 72, the length 4; the agent drops it.
  ask request_flipped --flip c2s:80
  expect_jq '.flipped == 80' relay_request_flipped.out
  expect_jq '.capture.agent.status != "ok"' request_flipped.out
  wait_for_line agent.err "message 0 from the client fails its MAC" 10
  kill -TERM "$PID_agent"
  finish agent 10
  expect_rc 0 "the agent, stopped with SIGTERM"
  expect_jq '.agent.answers == 2 and .agent.bad_requests == 1 and .agent.unauthenticated == 0' agent.out
  note "agent: $(jq -c .capture.agent "$T/answer_flipped.out")"

  # rdma_smoke: the serving side's reply to the plan flipped (the --peer side catches it), then
  # the peer's plan flipped (the serving side catches it). Each side ends with one line, exit 1.
  local side flip catcher
  for side in reply plan; do
    next_port
    local control=$PORT
    next_port
    local first=$PORT
    next_port
    rport=$PORT
    start "serving_$side" "$OURS_SMOKE" --serve "$RXE_ADDR" -p "$first" --control-port "$control" \
      --accept-timeout 60 --key-file "$T/key" --json
    wait_for_line "serving_$side.err" "control port" 20
    if [[ $side == reply ]]; then flip=s2c:100 catcher="peer_$side.out"; else flip=c2s:80 catcher="serving_$side.out"; fi
    relay "relay_$side" "$rport" "$control" --flip "$flip"
    run "peer_$side" 60 "$OURS_SMOKE" --peer "$RXE_ADDR" -p "$first" --control-port "$rport" --tools rping \
      --direction forward --key-file "$T/key" --json
    [[ $RC -ne 0 ]] || fail "rdma_smoke --peer went on after the $side was flipped"
    expect_schema rdma_smoke "peer_$side.out"
    finish "serving_$side" 30
    [[ $RC -ne 0 ]] || fail "rdma_smoke --serve ended 0 after the $side was flipped"
    expect_schema rdma_smoke "serving_$side.out"
    finish "relay_$side" 10
    expect_jq '.flipped != null' "relay_$side.out"
    grep -q "fails its MAC" "$T/$catcher" ||
      fail "$side flipped: $catcher does not say the message failed its MAC: $(head -c 600 "$T/$catcher")"
    note "$side flipped: $(jq -c '[.errors[]?.message, (.smoke.cases[]?.reason // empty)]' "$T/$catcher")"
  done
}
