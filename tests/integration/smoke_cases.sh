# rdma_smoke: the whole suite on the guest's rxe device, with its JUnit XML validated; the
# host broken on purpose (netdev down, device deleted) and one case's port taken.

# junit_valid NAME: $T/NAME.xml validates against the JUnit schema kept in tests/schema.
junit_valid() {
  command -v xmllint > /dev/null || fail "xmllint is not installed (scripts/install-deps.sh installs libxml2-utils)"
  xmllint --noout --schema "$here/../schema/junit.xsd" "$T/$1.xml" 2> "$T/$1.xmllint" ||
    fail "$1.xml does not validate against tests/schema/junit.xsd: $(head -c 800 "$T/$1.xmllint")"
}

# smoke NAME SECONDS ARGS...: rdma_smoke ARGS --json --junit $T/NAME.xml; the report in $T/NAME.out.
smoke() {
  local name=$1 seconds=$2
  shift 2
  run "$name" "$seconds" "$OURS_SMOKE" "$@" --json --junit "$T/$name.xml"
  [[ -s $T/$name.out ]] || fail "$name: no report (exit $RC): $(head -c 600 "$T/$name.err")"
  expect_schema rdma_smoke "$name.out"
  junit_valid "$name"
}

# ctest: integration quick
case_smoke_all() {
  require_device
  next_port
  smoke all 400 "$RXE_ADDR" -p "$PORT"
  expect_rc 0 "rdma_smoke, every tool"
  expect_jq '.smoke.failed == 0 and .smoke.skipped == 0 and (.smoke.cases | length) == 8' all.out
  expect_jq '[.smoke.cases[].runs[] | select(.report == null)] | length == 0' all.out
  # A pass says what the client measured, read from its report (lib/base/stats_json).
  expect_jq '(.smoke.cases[] | select(.name == "rping") | .reason | test("^[0-9]+ round trips, median [0-9.]+ us$"))
    and (.smoke.cases[] | select(.name == "send_bw.latency") | .reason | test("^[0-9]+ B: latency median [0-9.]+ us, p99"))
    and (.smoke.cases[] | select(.name == "send_bw.bandwidth") | .reason | test("^[0-9]+ B: [0-9.]+ MiB/s, [0-9.]+ Mpps$"))' all.out
  expect_grep '<testcase name="send_bw.latency" classname="rdma_smoke.send_bw"' all.xml
  [[ $(grep -c '<testcase ' "$T/all.xml") -eq 8 ]] || fail "all.xml: not 8 test cases"
  note "$(jq -r '.smoke.cases[] | "\(.name): \(.outcome) in \(.seconds * 10 | round / 10) s, \(.reason)"' "$T/all.out")"
  # The human table, --quick and --tools.
  next_port
  next_port
  run quick 200 "$OURS_SMOKE" "$RXE_ADDR" -p "$PORT" --quick
  expect_rc 0 "rdma_smoke --quick"
  expect_grep "^4 passed, 0 failed, 0 skipped" quick.out
  expect_grep "^rping  *$RXE_ADDR  *passed" quick.out
  # What the device cannot do is a skip with the tool's own sentence: rxe (RoCE v2) joins
  # no IPv6 group.
  next_port
  next_port
  smoke ipv6 120 "$RXE_ADDR6" -p "$PORT" --tools mckey
  expect_rc 0 "rdma_smoke, mckey on an IPv6 address (a skip)"
  expect_jq '.smoke.skipped == 1 and (.smoke.cases[0].reason | test("exit 77"))' ipv6.out
  expect_grep '<skipped message="' ipv6.xml
  note "mckey on IPv6: $(jq -r '.smoke.cases[0].reason' "$T/ipv6.out")"
}

# Another process holds the port rping's case listens on: that case fails with rping's own
# error, the others pass.
# ctest: integration
case_smoke_port_taken() {
  require_device
  next_port
  local first=$PORT
  start squatter "$OURS_RPING" -s -a "$RXE_ADDR" -p "$first" --accept-timeout 120
  wait_listening "$first"
  smoke taken 300 "$RXE_ADDR" -p "$first" --skip send_bw,ucmatose
  expect_rc 1 "rdma_smoke with rping's port taken"
  expect_jq '[.smoke.cases[] | select(.outcome == "failed") | .name] == ["rping"]' taken.out
  expect_jq '.smoke.cases[] | select(.name == "rping") | .reason | test("EADDRINUSE|Address already in use")' taken.out
  expect_grep '<failure message="rping (server): ' taken.xml
  note "rping: $(jq -r '.smoke.cases[] | select(.name == "rping") | .reason' "$T/taken.out")"
  kill "$PID_squatter" 2> /dev/null
  finish squatter 10
}

# blocked_tasks: the processes in uninterruptible sleep (ps state D) and where in the kernel.
blocked_tasks() {
  local pid
  for pid in $(ps -eo pid=,stat= | awk '$2 ~ /^D/ {print $1}'); do
    echo "$pid $(tr '\0' ' ' < "/proc/$pid/cmdline" 2> /dev/null): $(tr '\n' ' ' < "/proc/$pid/stack" 2> /dev/null)"
  done
}

# delete_device_bounded SECONDS: rdma link delete of the guest's device, which waits in the
# kernel until no process holds it; past SECONDS the case fails saying which processes do.
delete_device_bounded() {
  rdma link delete "$RXE_DEV" &
  local pid=$! waited=0
  while kill -0 "$pid" 2> /dev/null; do
    ((waited++ < $1)) || fail "rdma link delete $RXE_DEV still waits after $1 s; blocked: $(blocked_tasks)"
    tick 1
  done
  wait "$pid" || fail "rdma link delete $RXE_DEV failed"
}

# The host broken: the rxe netdev down (every case fails, diag-bind's verdict first), then the
# device deleted (exit 77, the verdict in the report and the XML).
# alone: takes the rxe netdev down and deletes the device, and repairs them; its own bounds (the
# smoke runs, the device's deletion) add up to more than the common timeout, and it must end on
# them so that its exit trap repairs the guest
# ctest: integration alone timeout=400
case_smoke_broken() {
  require_device
  require_root
  restore "ip link set $RXE_NETDEV up; ip -6 addr replace $RXE_ADDR6/64 dev $RXE_NETDEV nodad"
  ip link set "$RXE_NETDEV" down
  next_port
  # With the port down, a client's rdma_cm teardown can wait in the kernel for a CM message
  # that only goes once the port is up again: rdma_smoke leaves such a process behind after
  # 10 s (its run says so) rather than wait for it, and this case brings the port back up.
  smoke down 150 "$RXE_ADDR" -p "$PORT" --timeout 2 --case-timeout 15
  expect_rc 1 "rdma_smoke with the netdev down"
  expect_jq '.smoke.passed == 0 and .smoke.failed == (.smoke.cases | length)' down.out
  expect_jq '.smoke.cases[0].name == "diag-bind" and (.smoke.cases[0].reason | test("netdev_down"))' down.out
  [[ $(grep -c '<failure ' "$T/down.xml") -eq 8 ]] || fail "down.xml: not 8 failures"
  note "$(jq -r '.smoke.cases[] | "\(.name): \(.reason)"' "$T/down.out")"
  note "left behind: $(jq -r '[.smoke.cases[].runs[] | select(.start_error // "" | test("left behind")) | .command[0]] | join(", ")' "$T/down.out")"
  ip link set "$RXE_NETDEV" up
  ip -6 addr replace "$RXE_ADDR6/64" dev "$RXE_NETDEV" nodad
  wait_port_active

  restore "rdma link add $RXE_DEV type rxe netdev $RXE_NETDEV 2>/dev/null; true"
  delete_device_bounded 60
  smoke nodevice 60 "$RXE_ADDR" -p "$PORT"
  expect_rc 77 "rdma_smoke without a device"
  expect_jq '.smoke.no_device.verdict.cause == "no_rdma_device" and (.smoke.cases | length) == 1' nodevice.out
  expect_grep 'no_rdma_device' nodevice.xml
  rdma link add "$RXE_DEV" type rxe netdev "$RXE_NETDEV"
  wait_port_active
}

# Two guests: rdma_smoke --serve on the peer, --peer here; every case across the wire in
# both directions (forward: the client here, the servers there; reverse: the other way
# round), and both sides' reports and XML.
# ctest: pair
case_pair_smoke() {
  require_peer
  next_port
  local control=$PORT
  next_port
  remote_start serving "$OURS_SMOKE" --serve "$PEER_ADDR" -p "$PORT" --control-port "$control" --accept-timeout 60 \
    --json
  smoke across 600 --peer "$PEER_ADDR" -p "$PORT" --control-port "$control"
  remote_finish serving 60
  expect_rc 0 "rdma_smoke --serve on the peer"
  expect_jq '.smoke.failed == 0 and .smoke.passed == (.smoke.cases | length) and (.smoke.cases | length) == 16' across.out
  expect_jq '[.smoke.cases[] | select(.direction == "forward" and .address == env.PEER_ADDR)] | length == 8' across.out
  expect_jq '[.smoke.cases[] | select(.direction == "reverse" and .address == env.WIRE_ADDR and (.name | endswith(".reverse")))] | length == 8' across.out
  expect_jq '[.smoke.cases[] | select(.runs | map(.role) | index("server"))] | length == 14' across.out
  # Reverse, the client ran on the serving side and this side's servers saw it.
  expect_jq '.smoke.cases[] | select(.name == "rping.reverse") | .runs[0].role == "client" and (.runs[0].command | index(env.WIRE_ADDR)) != null' across.out
  expect_jq '.role == "server" and .smoke.failed == 0 and (.smoke.cases | length) == 16' serving.out
  expect_schema rdma_smoke serving.out
  [[ $(grep -c '<testcase ' "$T/across.xml") -eq 16 ]] || fail "across.xml: not 16 test cases"
  note "$(jq -r '.smoke.cases[] | "\(.name): \(.outcome) in \(.seconds * 10 | round / 10) s, \(.reason)"' "$T/across.out")"
  # The first lines of this side's XML, for the record.
  note "$(head -n 4 "$T/across.xml")"
}

# The serving side stopped in the middle of a run (both sides in this guest): the peer fails
# the case it was on with why, keeps the cases before it, and exits 1; the serving side ends
# its servers on SIGTERM.
# ctest: integration
case_smoke_peer_lost() {
  require_device
  next_port
  local control=$PORT
  next_port
  start serving "$OURS_SMOKE" --serve "$RXE_ADDR" -p "$PORT" --control-port "$control" --accept-timeout 60 --json
  wait_for_line serving.err "control port" 20
  # Stopped a second after the peer's handshake passed (the "peer" line): a fixed 4 s from
  # here was, on a loaded host, before the peer had even connected.
  start stopper bash -c "until grep -qs '^rdma_smoke --serve: peer ' '$T/serving.err'; do sleep 0.2; done
    sleep 1; kill -TERM $PID_serving"
  smoke lost 120 --peer "$RXE_ADDR" -p "$PORT" --control-port "$control"
  expect_rc 1 "rdma_smoke --peer with the serving side stopped"
  expect_jq '(.smoke.cases | length) < 16 and (.smoke.cases[-1].reason | test("^the serving side: "))' lost.out
  finish serving 20
  [[ $RC -eq 143 ]] || fail "rdma_smoke --serve on SIGTERM: exit $RC, expected 143"
  note "stopped after $(jq '.smoke.cases | length' "$T/lost.out") cases: $(jq -r '.smoke.cases[-1].reason' "$T/lost.out")"
}

# No RDMA device at all (the build host, label nodevice): exit 77, diag-bind's verdict in the
# report and in the JUnit XML.
# ctest: nodevice
case_smoke_no_device() {
  if ls /sys/class/infiniband/ 2> /dev/null | grep -q .; then
    echo "SKIP: this host has an RDMA device"
    exit 77
  fi
  smoke nodevice 60 --tools rping
  expect_rc 77 "rdma_smoke without a device"
  expect_jq '(.smoke.no_device.verdict.cause | test("^no_rdma")) and (.smoke.cases | length) == 1' nodevice.out
  expect_grep 'no_rdma' nodevice.xml
  note "$(head -n 1 "$T/nodevice.err")"
}
