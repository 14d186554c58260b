# diag-connect: the agent and the client in one guest, bad agents and bad input, and (in two
# guests, scripts/rxe-vm.sh --pair) each cause broken for real, named, fixed with the fix
# the tool printed, and then gone.

# connect NAME SECONDS ARGS...: diag-connect ARGS --json into $T/NAME.out; sets RC.
connect() {
  local name=$1 seconds=$2
  shift 2
  run "$name" "$seconds" "$OURS_DIAG_CONNECT" "$@" --json
  [[ -s $T/$name.out ]] || fail "$name: no report (exit $RC): $(head -c 400 "$T/$name.err")"
  if [[ -n ${RDMAKIT_CAPTURE_DIR:-} ]]; then cp "$T/$name.out" "$RDMAKIT_CAPTURE_DIR/$name.json"; fi
}

# expect_connect_cause NAME CAUSE EXIT: the report names CAUSE and diag-connect exited EXIT.
expect_connect_cause() {
  local name=$1 cause=$2 exit_code=$3
  local seen
  seen=$(jq -r '.verdict.cause' "$T/$name.out")
  [[ $seen == "$cause" && $RC -eq $exit_code ]] ||
    fail "$name: cause $seen, exit $RC; expected $cause, exit $exit_code: $(jq -c '.verdict' "$T/$name.out")"
  expect_schema diag-connect "$name.out"
  note "$name: $cause in ${ELAPSED_MS:-?} ms: $(jq -r '.verdict.summary' "$T/$name.out")"
}

# printed_fix NAME: the fix the verdict printed.
printed_fix() { jq -r '.verdict.fix' "$T/$1.out"; }

# start_local_agent: the agent on RXE_ADDR, its rdma_cm listener on AGENT_PROBE_PORT and its
# side channel on AGENT_SIDE_PORT (the case's next two ports), awaited until it listens.
start_local_agent() {
  next_port
  AGENT_PROBE_PORT=$PORT
  next_port
  AGENT_SIDE_PORT=$PORT
  start agent "$OURS_DIAG_CONNECT" --serve --bind "$RXE_ADDR" -p "$AGENT_PROBE_PORT" --agent-port "$AGENT_SIDE_PORT" \
    --json "$@"
  wait_listening "$AGENT_PROBE_PORT"
}

# stop_local_agent: SIGTERM; the agent ends cleanly (exit 0) with its tally in agent.out.
stop_local_agent() {
  kill -TERM "$PID_agent"
  finish agent 10
  expect_rc 0 "the agent, stopped with SIGTERM"
}

# ctest: integration
case_connect_self() {
  require_device
  start_local_agent
  local probe=$AGENT_PROBE_PORT aport=$AGENT_SIDE_PORT
  # --timeout 20: what is checked is that the agent answers, not how fast; a sanitized agent
  # in a loaded guest has taken over 5 s (the default) to build its view.
  connect works 40 "$RXE_ADDR" -p "$probe" --agent-port "$aport" -b "$RXE_ADDR2" --timeout 20
  expect_connect_cause works ok 0
  expect_jq '.capture.agent.status == "ok" and .capture.attempt.peer_is_agent' works.out
  expect_jq '[.capture.attempt.data[] | select(.status == "ok")] | length == 9' works.out
  expect_jq '[.capture.attempt.steps[] | select(.status == "ok") | .name] | index("connect") != null' works.out
  note "steps (ms): $(jq -c '[.capture.attempt.steps[] | {(.name): .ms}] | add' "$T/works.out")"
  # Without the agent: the local steps and the data check (the listener is still an agent).
  connect no_agent 30 "$RXE_ADDR" -p "$probe" --no-agent
  expect_connect_cause no_agent ok 0
  expect_jq '.capture.agent.status == "not_tried"' no_agent.out
  # Human output: the steps, the verdict.
  run human 30 "$OURS_DIAG_CONNECT" "$RXE_ADDR" -p "$probe" --agent-port "$aport"
  expect_rc 0 "diag-connect, human output"
  expect_grep "verdict" human.out
  # The agent stops cleanly on SIGTERM with its tally.
  stop_local_agent
  expect_jq '.agent.answers >= 2 and .agent.connections >= 3' agent.out
  expect_schema diag-connect agent.out
  # A stock listener (rping -s) is not an agent: the connection is the check, no data check.
  next_port
  start stock_server rping -s -a "$RXE_ADDR" -p "$PORT" -C 1
  wait_listening "$PORT"
  connect stock 30 "$RXE_ADDR" -p "$PORT" --no-agent
  expect_connect_cause stock ok 0
  expect_jq '.capture.attempt.peer_is_agent == false and (.capture.attempt.data | length) == 0' stock.out
  kill "$PID_stock_server" 2> /dev/null
  finish stock_server 10
}

# ctest: integration
case_connect_no_listener() {
  require_device
  next_port
  local probe=$PORT
  next_port
  connect nobody 30 "$RXE_ADDR" -p "$probe" --agent-port "$PORT" --timeout 3
  expect_connect_cause nobody no_listener 1
  expect_jq '.capture.attempt.rejection.reason == 8 and .capture.agent.status == "refused"' nobody.out
  # Other tools: the hint names diag-connect; --diagnose runs it in-process.
  run rping_client 30 "$OURS_RPING" -c -a "$RXE_ADDR" -p "$probe" -C 1 --json --diagnose
  [[ $RC -ne 0 ]] || fail "rping to nobody exited 0"
  expect_jq ".errors[0].hint | contains(\"diag-connect $RXE_ADDR -p $probe\")" rping_client.out
  expect_jq '.diagnosis.tool == "diag-connect" and .diagnosis.verdict.cause == "no_listener"' rping_client.out
  expect_grep "diag-connect: no_listener" rping_client.err
}

# A fake agent: python3 answering ANSWER (garbage, oversize, silent) on PORT.
fake_agent() {
  local name=$1 port=$2 kind=$3
  start "$name" python3 -c '
import socket, struct, sys, time
kind = sys.argv[2]
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[3], int(sys.argv[1]))); s.listen(1)
print("ready", flush=True)
c, _ = s.accept()
# The key handshake of an agent without --key-file (lib/net/key_handshake.hpp): hello,
# the 72-byte answer of the client, verdict "accepted"; then the request, and the answer as
# one untagged frame (lib/net/sealed_frames.hpp): a 4-byte length, then the bytes.
head = bytes.fromhex("52444b480201") + bytes(2)
frame = lambda payload: struct.pack(">I", len(payload)) + payload
c.sendall(head + bytes(32)); got = b""
while len(got) < 72:
    chunk = c.recv(72 - len(got))
    if not chunk: break
    got += chunk
c.sendall(head + bytes(32)); c.recv(2048)
if kind == "garbage": c.sendall(frame(b"{\"version\": 1, \"view\": {\"netdevs\": 7}}"))
elif kind == "oversize": c.sendall(frame(b"[" + b"1," * 200000 + b"1]"))
elif kind == "silent": time.sleep(30)
c.close()' "$port" "$kind" "$RXE_ADDR"
  wait_for_line "$name.out" ready 20
}

# ctest: integration sanitized
case_connect_bad_agent() {
  require_device
  local kind
  for kind in garbage oversize silent; do
    next_port
    local probe=$PORT
    next_port
    fake_agent "fake_$kind" "$PORT" "$kind"
    connect "bad_$kind" 30 "$RXE_ADDR" -p "$probe" --agent-port "$PORT" --timeout 3
    expect_jq '.capture.agent.status == "'"$([[ $kind == silent ]] && echo timeout || echo invalid)"'"' "bad_$kind.out"
    expect_connect_cause "bad_$kind" no_listener 1
    note "agent $kind: $(jq -r '.capture.agent.detail' "$T/bad_$kind.out")"
    eval "kill \"\$PID_fake_$kind\"" 2> /dev/null
    finish "fake_$kind" 5
  done
}

# ctest: integration sanitized
case_connect_agent_safety() {
  require_device
  start_local_agent
  local probe=$AGENT_PROBE_PORT aport=$AGENT_SIDE_PORT
  # Not a diag-connect client: rping's connect is rejected by the agent.
  run rping_client 20 "$OURS_RPING" -c -a "$RXE_ADDR" -p "$probe" -C 1
  [[ $RC -ne 0 ]] || fail "rping's connect to the agent was accepted"
  # Garbage and an over-long request on the side channel: refused (by the key handshake, which
  # comes first: neither is one), the agent goes on.
  exec {garbage}<> "/dev/tcp/$RXE_ADDR/$aport" && printf 'GET / HTTP/1.0\n' >&"$garbage"
  exec {garbage}>&-
  exec {long}<> "/dev/tcp/$RXE_ADDR/$aport" && head -c 5000 /dev/zero | tr '\0' x >&"$long"
  exec {long}>&-
  # What this checks is that the agent still answers, not how fast. Under --under-load a
  # sanitized agent took over 5 s to build its answer (its host's view, the nftables ruleset
  # too): its own deadline for the client then hung up on it (fixed: the client's time to
  # read starts once the answer is ready), and the client's default 5 s wait would have
  # given up as well. So the client waits 20 s, and the contact's status is checked.
  connect after 40 "$RXE_ADDR" -p "$probe" --agent-port "$aport" --timeout 20
  expect_connect_cause after ok 0
  [[ $(jq -r '.capture.agent.status' "$T/after.out") == ok ]] ||
    fail "no answer from the agent after the garbage: $(jq -c '.capture.agent' "$T/after.out")"
  note "the agent answered after the garbage in $(jq '.capture.agent.ms' "$T/after.out") ms"
  # It binds only where told: the side channel is not on the other address.
  connect elsewhere 30 "$RXE_ADDR2" -p "$probe" --agent-port "$aport" --timeout 2
  expect_jq '.capture.agent.status == "refused"' elsewhere.out
  stop_local_agent
  expect_jq '.agent.rejected >= 1 and .agent.unauthenticated >= 2 and .agent.answers >= 1' agent.out
}

# cap_field PID FIELD: a capability mask (CapEff, CapPrm, CapBnd ...) from /proc/PID/status.
cap_field() {
  local line
  while IFS= read -r line; do
    [[ $line == "$2:"* ]] && { echo "${line##*$'\t'}"; return; }
  done < "/proc/$1/status"
}

# Started as root, the agent keeps CAP_NET_ADMIN only (bit 12): the client still gets its
# firewall (the ruleset is read over netlink, which asks for that capability; the view keeps
# rules that touch RoCE v2's port, so the case adds an accept on it) and a probe connection
# works: the drop came before rdma_cm was opened (lib/diag/privileges.hpp says why).
# ctest: integration
case_connect_agent_privileges() {
  require_device
  require_root
  nft add table inet rdmakit_caps \; add chain inet rdmakit_caps input \
    '{ type filter hook input priority 0; }' \; add rule inet rdmakit_caps input udp dport 4791 counter accept ||
    fail "nft add table inet rdmakit_caps"
  restore "nft delete table inet rdmakit_caps"
  next_port
  local probe=$PORT
  next_port
  local aport=$PORT
  start agent "$OURS_DIAG_CONNECT" --serve --bind "$RXE_ADDR" -p "$probe" --agent-port "$aport" --json \
    --log-level info
  wait_listening "$probe"
  wait_for_line agent.err "side channel on TCP" 20
  local field
  for field in CapPrm CapEff CapBnd; do
    [[ $(cap_field "$PID_agent" "$field") == 0000000000001000 ]] ||
      fail "the agent's $field is $(cap_field "$PID_agent" "$field"), not CAP_NET_ADMIN alone"
  done
  [[ $(cap_field "$PID_agent" CapInh) == 0000000000000000 && $(cap_field "$PID_agent" CapAmb) == 0000000000000000 ]] ||
    fail "the agent kept inheritable or ambient capabilities"
  [[ $(cap_field "$PID_agent" NoNewPrivs) == 1 ]] || fail "the agent's no_new_privs is not set"
  # Started as root, it became nobody for good: real, effective, saved and filesystem ids, and
  # no group but nobody's own.
  local uid gid
  uid=$(id -u nobody)
  gid=$(id -g nobody)
  [[ $(awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/$PID_agent/status") == "$uid $uid $uid $uid" ]] ||
    fail "the agent's user ids: $(grep '^Uid:' "/proc/$PID_agent/status"), not nobody's ($uid)"
  [[ $(awk '/^Gid:/ {print $2, $3, $4, $5}' "/proc/$PID_agent/status") == "$gid $gid $gid $gid" &&
    $(awk '/^Groups:/ {print $2}' "/proc/$PID_agent/status") == "$gid" ]] ||
    fail "the agent's groups: $(grep -E '^(Gid|Groups):' "/proc/$PID_agent/status" | tr '\n' ' ')"
  expect_grep "capabilities: kept cap_net_admin, dropped" agent.err
  expect_grep "running as user nobody (uid $uid, gid $gid)" agent.err
  note "$(grep -o 'capabilities: .*' "$T/agent.err")"
  connect kept 30 "$RXE_ADDR" -p "$probe" --agent-port "$aport"
  expect_connect_cause kept ok 0
  expect_jq '.capture.peer.view.firewall.readable and
    ([.capture.peer.view.firewall.rules[] | select(.table == "rdmakit_caps" and (.text | contains("udp dport 4791")))]
      | length == 1)' kept.out
  expect_jq '[.capture.attempt.data[] | select(.status == "ok")] | length == 9' kept.out
  stop_local_agent
  expect_jq '.agent.answers >= 1 and .agent.connections >= 1' agent.out
}

# ctest: nodevice
case_connect_bad_flags() {
  local args
  for args in "nohost.invalid" "10.0.0.1 -p 0" "10.0.0.1 -p 70000" "10.0.0.1 --ps sdp" "--serve 10.0.0.1" \
    "10.0.0.1 --no-listen" "--serve --bind nohost.invalid" "" "--replay /nonexistent.json" \
    "10.0.0.1 --agent nohost.invalid" "10.0.0.1 --agent-port 0" "--serve --gid-index 1" "10.0.0.1 --gid-index -1" \
    "10.0.0.1 --gid-index x" "10.0.0.1 --user nobody" "--serve --user no-such-user-rdmakit"; do
    # shellcheck disable=SC2086  # the words are the arguments
    run bad 10 "$OURS_DIAG_CONNECT" $args --json
    expect_rc 2 "diag-connect $args"
    expect_jq '.outcome == "usage_error"' bad.out
  done
}

# Every fixture, hand-made or captured, replays to the cause it is named after (a file
# "CAUSE.json" or "CAUSE-variant.json").
# ctest: nodevice
case_connect_replay() {
  local fixture cause
  for fixture in "$here/../fixtures/connect"/*.json "$here/../fixtures/connect/captured"/*.json; do
    cause=$(basename "$fixture" .json)
    cause=${cause%%-*}
    run replay 10 "$OURS_DIAG_CONNECT" --replay "$fixture" --json
    [[ $(jq -r .verdict.cause "$T/replay.out") == "$cause" ]] || fail "$fixture replays to $(jq -r .verdict.cause "$T/replay.out")"
    expect_schema diag-connect replay.out
  done
  # --gid-index on a capture: the same tables, another index. 0 is link-local on both guests,
  # fine on one link; 2 is fd57::2, an IPv6 entry for an IPv4 path.
  run replay_index 10 "$OURS_DIAG_CONNECT" --replay "$here/../fixtures/connect/captured/ok.json" --gid-index 0 --json
  expect_jq '.verdict.cause == "ok" and .capture.attempt.gid_index == 0 and .arguments.gid_index == 0' replay_index.out
  run replay_index 10 "$OURS_DIAG_CONNECT" --replay "$here/../fixtures/connect/captured/ok.json" --gid-index 2 --json
  expect_jq '.verdict.cause == "gid_index_mismatch" and .verdict.exit_code == 1' replay_index.out
  expect_schema diag-connect replay_index.out
}

# ---- two guests: each cause for real ----

# gid_index_of REPORT SIDE ADDRESS: the index of ADDRESS's RoCE v2 entry in the GID tables
# of SIDE (local or peer.view) in REPORT's capture, as read from sysfs; "" when none.
gid_index_of() {
  jq -r --arg gid "::ffff:$3" '[.capture.'"$2"'.devices[].ports[].gids[] | select(.gid == $gid and .type == "RoCE v2")
    | .index][0] // ""' "$T/$1.out"
}

# pair_gid_index AGENT_ARGS...: --gid-index, the index another stack is given, on both guests.
pair_gid_index() {
  local client_index server_index
  connect gid_baseline 30 "$PEER_ADDR" "$@"
  expect_connect_cause gid_baseline ok 0
  client_index=$(gid_index_of gid_baseline local "$WIRE_ADDR")
  [[ -n $client_index ]] || fail "no RoCE v2 GID of $WIRE_ADDR here"

  # gid_index_mismatch: the server's wire address deleted and added again after another one,
  # which takes its freed index, so that one index no longer fits both guests.
  remote_run gid_shuffle 20 bash -c 'ip addr del "$WIRE_ADDR/24" dev "$WIRE_NETDEV" &&
    ip addr add 10.57.9.9/24 dev "$WIRE_NETDEV" && ip addr add "$WIRE_ADDR/24" dev "$WIRE_NETDEV"'
  local unshuffle='ip addr del 10.57.9.9/24 dev "$WIRE_NETDEV"; ip addr del "$WIRE_ADDR/24" dev "$WIRE_NETDEV";
    ip addr add "$WIRE_ADDR/24" dev "$WIRE_NETDEV"'
  GID_SHUFFLED=1
  restore "[[ -z \${GID_SHUFFLED:-} ]] || remote_run gid_unshuffle 20 bash -c '$unshuffle'"
  [[ $RC -eq 0 ]] || fail "moving the peer's wire address: $(cat "$T/gid_shuffle.err")"
  tick 2
  connect gid_index_mismatch 30 "$PEER_ADDR" --gid-index "$client_index" "$@"
  server_index=$(gid_index_of gid_index_mismatch peer.view "$PEER_ADDR")
  [[ -n $server_index && $server_index != "$client_index" ]] ||
    fail "the peer's index of $PEER_ADDR did not move from $client_index: '$server_index'"
  expect_connect_cause gid_index_mismatch gid_index_mismatch 1
  expect_jq '.verdict.fix == "" and (.verdict.next | contains("perftest -x '"$client_index"' on the client, -x '"$server_index"' on the server"))' gid_index_mismatch.out
  note "gid_index_mismatch: here $WIRE_ADDR at $client_index, the peer's $PEER_ADDR at $server_index"
  remote_run gid_unshuffle_now 20 bash -c "$unshuffle"
  [[ $RC -eq 0 ]] || fail "putting the peer's wire address back: $(cat "$T/gid_unshuffle_now.err")"
  GID_SHUFFLED=
  tick 2
  connect gid_index_fixed 30 "$PEER_ADDR" --gid-index "$client_index" "$@"
  expect_connect_cause gid_index_fixed ok 0

  # gid_link_local: the peer reached through a gateway (itself), at an address outside this
  # guest's subnets; index 0 is the link-local entry on both, which no router forwards.
  remote_run routed_address 20 bash -c 'ip addr add 10.61.0.1/32 dev "$WIRE_NETDEV"'
  [[ $RC -eq 0 ]] || fail "10.61.0.1 on the peer: $(cat "$T/routed_address.err")"
  restore "remote_run routed_address_undo 20 bash -c 'ip addr del 10.61.0.1/32 dev \"\$WIRE_NETDEV\" 2> /dev/null || true'"
  ip route add 10.61.0.1/32 via "$PEER_ADDR"
  # The case removes both itself below; these run only when it stops before.
  restore "ip route del 10.61.0.1/32 via $PEER_ADDR 2> /dev/null || true"
  connect gid_link_local 30 10.61.0.1 --gid-index 0 "$@"
  expect_connect_cause gid_link_local gid_link_local 1
  expect_jq '.verdict.evidence[0] == "client: ip route get 10.61.0.1: via '"$PEER_ADDR"' dev '"$WIRE_NETDEV"'"' gid_link_local.out
  expect_jq '.verdict.next | contains("-x '"$client_index"' on the client")' gid_link_local.out
  connect gid_link_local_fixed 30 10.61.0.1 --gid-index "$client_index" "$@"
  expect_connect_cause gid_link_local_fixed ok 0
  # Without an index, what a stack left at 0 would meet is a warning.
  connect gid_default 30 10.61.0.1 "$@"
  expect_connect_cause gid_default ok 0
  expect_jq '[.verdict.warnings[] | select(contains("stacks left at index 0 fail across the router"))] | length == 1' \
    gid_default.out
  ip route del 10.61.0.1/32 via "$PEER_ADDR"
  remote_run routed_address_gone 20 bash -c 'ip addr del 10.61.0.1/32 dev "$WIRE_NETDEV"'
}

# peer_agent NAME ARGS...: (re)start the agent on the peer with ARGS, its side channel on the
# management network too (it listens on every address).
peer_agent() {
  local name=$1
  shift
  [[ -n ${PEER_AGENT:-} ]] && remote_stop "$PEER_AGENT"
  PEER_AGENT=$name
  remote_start "$name" "$OURS_DIAG_CONNECT" --serve "$@" --log-level info
  remote_wait_line "$name" "side channel" 30
}

# fix_on_peer NAME: run the fix NAME's verdict printed, on the peer.
fix_on_peer() {
  local fix
  fix=$(printed_fix "$1")
  [[ $(jq -r .verdict.fix_host "$T/$1.out") == server ]] || fail "$1: the fix is not for the server: $fix"
  remote_run "fix_$1" 20 bash -c "$fix"
  [[ $RC -eq 0 ]] || fail "$1: the printed fix failed on the peer: $fix: $(cat "$T/fix_$1.err")"
  note "$1: fixed on the server with: $fix"
}

# fix_here NAME: run the fix NAME's verdict printed, here.
fix_here() {
  local fix
  fix=$(printed_fix "$1")
  [[ $(jq -r .verdict.fix_host "$T/$1.out") == client ]] || fail "$1: the fix is not for the client: $fix"
  bash -c "$fix" || fail "$1: the printed fix failed here: $fix"
  note "$1: fixed on the client with: $fix"
}

# ctest: pair
case_pair_connect() {
  require_peer
  local agent=(--agent "$PEER_MGMT_ADDR" --timeout 3)
  peer_agent agent_listening
  connect baseline 30 "$PEER_ADDR" "${agent[@]}"
  expect_connect_cause baseline ok 0

  # Nobody listens: the agent runs without its rdma_cm listener.
  peer_agent agent_quiet --no-listen
  connect no_listener 30 "$PEER_ADDR" "${agent[@]}"
  expect_connect_cause no_listener no_listener 1
  peer_agent agent_listening2
  connect no_listener_fixed 30 "$PEER_ADDR" "${agent[@]}"
  expect_connect_cause no_listener_fixed ok 0

  # The wrong port space.
  connect wrong_port_space 30 "$PEER_ADDR" --ps udp "${agent[@]}"
  expect_connect_cause wrong_port_space wrong_port_space 1

  pair_gid_index "${agent[@]}"

  # nftables drops RoCE v2 (UDP 4791) on the server.
  remote_run nft 20 nft add table inet rdmakit_dc \; add chain inet rdmakit_dc input \
    '{ type filter hook input priority 0; }' \; add rule inet rdmakit_dc input udp dport 4791 drop
  [[ $RC -eq 0 ]] || fail "nft on the peer: $(cat "$T/nft.err")"
  restore "remote_run nft_undo 20 nft delete table inet rdmakit_dc"
  connect firewall 30 "$PEER_ADDR" "${agent[@]}"
  expect_connect_cause firewall firewall_roce 1
  fix_on_peer firewall
  connect firewall_fixed 30 "$PEER_ADDR" "${agent[@]}"
  expect_connect_cause firewall_fixed ok 0

  # Large messages die: the server's MTU lowered to 1000. rxe's UDP packets would be
  # fragmented and reassembled, so a NIC that cannot take frames beyond its MTU is emulated
  # with an nftables rule dropping longer packets.
  remote_run mtu 20 bash -c 'ip link set dev "$WIRE_NETDEV" mtu 1000 && nft add table inet rdmakit_mtu \; add chain inet rdmakit_mtu input "{ type filter hook input priority 0; }" \; add rule inet rdmakit_mtu input ip length \> 1000 drop'
  [[ $RC -eq 0 ]] || fail "lowering the MTU on the peer: $(cat "$T/mtu.err")"
  # Below 1280 the kernel takes IPv6 off the netdev, and raising the MTU again brings back the
  # link-local address only: the undo, and the fix below, add the peer's own back, for the
  # cases after this one that go over IPv6.
  local readd6='ip -6 addr replace "$WIRE_ADDR6/64" dev "$WIRE_NETDEV" nodad'
  restore "remote_run mtu_undo 20 bash -c 'ip link set dev \"\$WIRE_NETDEV\" mtu 1500; nft delete table inet rdmakit_mtu; $readd6'"
  connect mtu 60 "$PEER_ADDR" "${agent[@]}"
  expect_connect_cause mtu mtu_mismatch 1
  fix_on_peer mtu
  remote_run mtu_emulation_off 20 bash -c "nft delete table inet rdmakit_mtu && $readd6"
  [[ $RC -eq 0 ]] || fail "the peer's IPv6 address back: $(cat "$T/mtu_emulation_off.err")"
  connect mtu_fixed 30 "$PEER_ADDR" "${agent[@]}"
  expect_connect_cause mtu_fixed ok 0

  # The peer address sits on a netdev without RDMA: the server's rxe1 deleted.
  peer_agent agent_quiet2 --no-listen
  remote_run rxe_delete 20 rdma link delete rxe1
  [[ $RC -eq 0 ]] || fail "rdma link delete rxe1 on the peer: $(cat "$T/rxe_delete.err")"
  # The printed fix re-creates the device under a name of its own (rxe_<netdev>); the pair
  # cases after this one know the peer's device as rxe1, so whatever sits on the wire gets it.
  local rxe_back='[[ -e /sys/class/infiniband/rxe1 ]] && exit 0
for dev in /sys/class/infiniband/*; do
  if [[ $(cat "$dev/parent" 2> /dev/null) == "$WIRE_NETDEV" ]]; then exec rdma dev set "${dev##*/}" name rxe1; fi
done
exec rdma link add rxe1 type rxe netdev "$WIRE_NETDEV"'
  restore "remote_run rxe_undo 20 bash -c '$rxe_back'"
  connect peer_not_rdma 30 "$PEER_ADDR" "${agent[@]}"
  expect_connect_cause peer_not_rdma peer_not_rdma 1
  fix_on_peer peer_not_rdma
  peer_agent agent_listening3
  connect peer_not_rdma_fixed 30 "$PEER_ADDR" "${agent[@]}"
  expect_connect_cause peer_not_rdma_fixed ok 0

  # A wrong static neighbour entry here.
  ip neigh replace "$PEER_ADDR" lladdr 02:de:ad:be:ef:00 dev "$WIRE_NETDEV" nud permanent
  restore "ip neigh del $PEER_ADDR dev $WIRE_NETDEV"
  connect neighbour 30 "$PEER_ADDR" "${agent[@]}"
  expect_connect_cause neighbour neighbour_wrong 1
  fix_here neighbour
  connect neighbour_fixed 30 "$PEER_ADDR" "${agent[@]}"
  expect_connect_cause neighbour_fixed ok 0

  # A host on the subnet that does not answer.
  connect unresolved 30 "${PEER_ADDR%.*}.99" --no-agent --timeout 3
  expect_connect_cause unresolved neighbour_unresolved 1

  # An address outside this host's subnets: no route.
  remote_run outside 20 bash -c 'ip addr add 10.59.0.1/24 dev "$WIRE_NETDEV"'
  restore "remote_run outside_undo 20 bash -c 'ip addr del 10.59.0.1/24 dev \"\$WIRE_NETDEV\"'"
  connect no_route 30 10.59.0.1 "${agent[@]}"
  expect_connect_cause no_route no_route 1
  fix_here no_route
  connect no_route_fixed 30 10.59.0.1 "${agent[@]}"
  expect_connect_cause no_route_fixed ok 0

  # The source this host routes from has no RDMA: the peer's management address.
  # No route helps (the peer holds that address on a netdev without RDMA too): the verdict
  # names the peer's RDMA address instead, and connecting there works.
  connect source 30 "$PEER_MGMT_ADDR" "${agent[@]}"
  expect_connect_cause source source_not_rdma 1
  expect_jq '.verdict.fix == ""' source.out
  local instead
  instead=$(jq -r '.verdict.next | capture("on an RDMA netdev: (?<address>[0-9a-f.:]+) ").address' "$T/source.out")
  [[ -n $instead ]] || fail "source_not_rdma names no address to use: $(jq -r .verdict.next "$T/source.out")"
  connect source_fixed 30 "$instead" "${agent[@]}"
  expect_connect_cause source_fixed ok 0
  note "source: connected instead to $instead, as the verdict said"

  # Strict reverse-path filtering with an asymmetric route on the server.
  ip addr add 10.57.0.12/24 dev "$WIRE_NETDEV"
  restore "ip addr del 10.57.0.12/24 dev $WIRE_NETDEV"
  remote_run rp 20 bash -c 'sysctl -qw net.ipv4.conf.all.rp_filter=1 "net.ipv4.conf.$WIRE_NETDEV.rp_filter=1" && ip route add 10.57.0.12/32 dev plainnet0'
  [[ $RC -eq 0 ]] || fail "rp_filter on the peer: $(cat "$T/rp.err")"
  restore "remote_run rp_undo 20 bash -c 'ip route del 10.57.0.12/32 dev plainnet0; sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.\$WIRE_NETDEV.rp_filter=0'"
  connect rp_filter 30 "$PEER_ADDR" -b 10.57.0.12 "${agent[@]}"
  expect_connect_cause rp_filter rp_filter 1
  fix_on_peer rp_filter
  connect rp_filter_fixed 30 "$PEER_ADDR" -b 10.57.0.12 "${agent[@]}"
  expect_connect_cause rp_filter_fixed ok 0

  # RoCE v1 cannot be forced on rxe: it has RoCE v2 GIDs only, and rdma_cm refuses the mode
  # (tests/fixtures/connect/roce_mode_mismatch.json is derived from a capture instead).
  mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
  mkdir -p "/sys/kernel/config/rdma_cm/$WIRE_DEV"
  restore "rmdir /sys/kernel/config/rdma_cm/$WIRE_DEV"
  if echo "IB/RoCE v1" 2> /dev/null > "/sys/kernel/config/rdma_cm/$WIRE_DEV/ports/1/default_roce_mode"; then
    fail "rxe accepted RoCE v1 as rdma_cm's default: make roce_mode_mismatch a live reproduction"
  fi

  # Last (the link goes down): the server's link down; the agent answers over management.
  remote_run link_down 20 bash -c 'ip link set dev "$WIRE_NETDEV" down'
  restore "remote_run link_undo 20 bash -c 'ip link set dev \"\$WIRE_NETDEV\" up'"
  connect port_down 30 "$PEER_ADDR" "${agent[@]}"
  expect_connect_cause port_down peer_port_down 1
  fix_on_peer port_down
  tick 2
  connect port_down_fixed 30 "$PEER_ADDR" "${agent[@]}"
  expect_connect_cause port_down_fixed ok 0
  remote_stop "$PEER_AGENT"
}

# The agent in rdma_cm's UDP port space answers a service ID resolution (SIDR) with a UD
# QP and holds nothing after it: before, each SIDR request took one of --max-connections'
# probe slots, with an RC QP, for the connection lifetime (30 s), so the fifth in a row was
# rejected as busy.
# ctest: integration
case_connect_agent_udp() {
  require_device
  next_port
  local probe=$PORT k
  next_port
  local aport=$PORT
  start agent "$OURS_DIAG_CONNECT" --serve --bind "$RXE_ADDR" -p "$probe" --agent-port "$aport" --ps udp \
    --max-connections 4 --json --log-level info
  wait_for_line agent.err "side channel on TCP" 20
  for k in 1 2 3 4 5 6; do
    connect "udp_$k" 30 "$RXE_ADDR" -p "$probe" --agent-port "$aport" --ps udp --timeout 5
    expect_connect_cause "udp_$k" ok 0
  done
  expect_jq '[.capture.attempt.steps[] | select(.name == "connect")][0].detail | test("^SIDR reply: UD QPN [0-9]+")' \
    udp_6.out
  stop_local_agent
  expect_jq '.agent.connections == 6 and .agent.rejected == 0' agent.out
  [[ $(grep -c "answered a service ID resolution" "$T/agent.err") -eq 6 ]] || fail "not six SIDR answers logged"
}
