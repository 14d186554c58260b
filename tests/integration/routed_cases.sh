# A router between the two guests (scripts/rxe-vm.sh --pair): the GID index that diag-bind
# advises for perftest -x crosses it, index 0 (link-local) does not.
#
# The pair's wire is one L2, where fe80 GIDs work. So the peer becomes a router with a host
# behind it: its wire netdev moves into a namespace (rdmakit_router) that forwards between
# the wire and a veth pair, whose other end (va0, 10.62.0.1) stays in the root namespace with
# an rxe device of its own (rxer). rxe's UDP socket lives in the root namespace only, so the
# RDMA end must stay there. Moving the wire netdev away deletes rxe1 on the peer; the restore
# moves it back and sets it up as rxe-vm.sh did, so the pair cases after this one find it.
#
#   b: rxe1 on the wire, 10.57.0.2 --wire-- [router ns: wire 10.57.0.1 | vr0 10.62.0.254]
#                                             --veth-- a: va0 10.62.0.1, rxer

ROUTED_ADDR=10.62.0.1

# The peer's side, run there by bash (WIRE_NETDEV is the peer's wire NIC).
# shellcheck disable=SC2016  # expanded on the peer
ROUTED_SETUP='set -e
ip netns add rdmakit_router
ip link set "$WIRE_NETDEV" netns rdmakit_router
ip -n rdmakit_router link set lo up
ip -n rdmakit_router link set "$WIRE_NETDEV" up
ip -n rdmakit_router addr add 10.57.0.1/24 dev "$WIRE_NETDEV"
ip link add va0 type veth peer name vr0 netns rdmakit_router
ip -n rdmakit_router link set vr0 up
ip -n rdmakit_router addr add 10.62.0.254/24 dev vr0
ip netns exec rdmakit_router sysctl -qw net.ipv4.ip_forward=1
ip link set va0 up
ip addr add 10.62.0.1/24 dev va0
ip route add 10.57.0.0/24 via 10.62.0.254
rdma link add rxer type rxe netdev va0'
# Undoes ROUTED_SETUP from wherever it stopped, and puts the wire back as rxe-vm.sh set it.
# shellcheck disable=SC2016  # expanded on the peer
ROUTED_UNDO='rdma link delete rxer 2> /dev/null
ip link delete va0 2> /dev/null
if [[ -e /run/netns/rdmakit_router ]]; then
  ip -n rdmakit_router link set "$WIRE_NETDEV" netns 1 2> /dev/null
  ip netns delete rdmakit_router
fi
ip link set "$WIRE_NETDEV" up || exit 1
ip addr replace 10.57.0.1/24 dev "$WIRE_NETDEV" || exit 1
ip -6 addr replace fd57::1/64 dev "$WIRE_NETDEV" nodad || exit 1
rdma link show rxe1 > /dev/null 2>&1 || rdma link add rxe1 type rxe netdev "$WIRE_NETDEV"'

# gid_index_sysfs ADDRESS: "DEVICE INDEX" of the RoCE v2 GID that holds IPv4 ADDRESS, from
# sysfs (run on either host).
gid_index_sysfs() {
  local want gid value n type dev
  local IFS=.
  # shellcheck disable=SC2046  # the address's four octets
  want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' $1)
  unset IFS
  # read, not $(<): a port has hundreds of entries, and each command substitution forks.
  for gid in /sys/class/infiniband/*/ports/1/gids/*; do
    { read -r value < "$gid"; } 2> /dev/null && [[ $value == "$want" ]] || continue
    n=${gid##*/}
    { read -r type < "${gid%/gids/*}/gid_attrs/types/$n"; } 2> /dev/null || continue
    [[ $type == "RoCE v2" ]] || continue
    dev=${gid#/sys/class/infiniband/}
    echo "${dev%%/*} $n"
    return 0
  done
  return 1
}

# routed_advice NAME WHERE ADDRESS: sets ADVICE ("DEVICE INDEX") for ADDRESS on WHERE (here
# or peer) from diag-bind --gids (its report in $T/NAME.out), which must be the entry sysfs
# holds for the address.
routed_advice() {
  local name=$1 where=$2 address=$3 sysfs
  if [[ $where == here ]]; then
    sysfs=$(gid_index_sysfs "$address")
    run "$name" 30 "$OURS_DIAG" --gids "$address" --json
  else
    remote_run "${name}_sysfs" 20 bash -c "$(declare -f gid_index_sysfs); gid_index_sysfs $address"
    sysfs=$(< "$T/${name}_sysfs.out")
    remote_run "$name" 30 "$OURS_DIAG" --gids "$address" --json
  fi
  [[ -n $sysfs ]] || fail "no RoCE v2 GID holds $address ($where)"
  expect_rc 0 "diag-bind --gids $address ($where)"
  expect_schema diag-bind "$name.out"
  ADVICE=$(jq -r '"\(.advice.device) \(.advice.index)"' "$T/$name.out")
  [[ $ADVICE == "$sysfs" ]] || fail "diag-bind --gids advises $ADVICE for $address ($where); sysfs has it at $sysfs"
}

# perftest_pair NAME ADDRESS SERVER_DEVICE SERVER_INDEX CLIENT_INDEX: ib_send_bw's server on
# the peer (-d SERVER_DEVICE -x SERVER_INDEX), its client here (rxe1, -x CLIENT_INDEX) to
# ADDRESS, both bounded; perftest's own out-of-band TCP exchange, not rdma_cm (-R). Sets RC
# (the client's), SERVER_RC and ELAPSED_MS (the client's).
perftest_pair() {
  local name=$1 address=$2 server_device=$3 server_index=$4 client_index=$5 elapsed
  next_port
  remote_start "${name}_server" timeout 25 stdbuf -oL ib_send_bw -d "$server_device" -x "$server_index" -F -p "$PORT" -s 4096 -n 20
  remote_run "${name}_listens" 20 bash -c "for _ in \$(seq 150); do ss -Hltn 'sport = :$PORT' | grep -q . && exit 0; sleep 0.1; done; exit 1"
  if [[ $RC -ne 0 ]]; then
    remote_stop "${name}_server"
    fail "$name: ib_send_bw on the peer never listened on $PORT (exit $RC): $(cat "$T/${name}_server.err")"
  fi
  run "$name" 25 ib_send_bw -d "$WIRE_DEV" -x "$client_index" -F -p "$PORT" -s 4096 -n 20 "$address"
  local client_rc=$RC
  elapsed=$ELAPSED_MS
  if grep -q "Couldn't connect" "$T/$name.err"; then
    remote_run "${name}_sockets" 20 ss -Htanp "sport = :$PORT"
    note "$name: ib_send_bw could not connect; the peer's sockets on port $PORT: $(cat "$T/${name}_sockets.out")"
  fi
  remote_finish "${name}_server" 30
  SERVER_RC=$RC RC=$client_rc ELAPSED_MS=$elapsed
}

# perftest_failure NAME: perftest's error lines in NAME's output, on one line.
perftest_failure() {
  grep -hiE 'fail|error|unable|couldn' "$T/$1.err" "$T/$1.out" | head -3 | tr '\n' ' '
}

# ctest: pair
case_pair_routed() {
  require_peer
  # The control, on the plain wire (one L2): there -x 0, the fe80 entries, works. The peer's
  # device on the wire is found, not assumed: pair_connect's printed fix re-creates it as
  # rxe_<netdev>.
  routed_advice gids_wire peer "$PEER_ADDR"
  perftest_pair same_link "$PEER_ADDR" "${ADVICE% *}" 0 0
  expect_rc 0 "ib_send_bw -x 0 on one link"
  [[ $SERVER_RC -eq 0 ]] || fail "ib_send_bw -x 0 on the peer, one link: exit $SERVER_RC"

  restore "ip route del 10.62.0.0/24 via $PEER_ADDR 2> /dev/null"
  restore 'remote_run routed_undo 60 bash -c "$ROUTED_UNDO"; [[ $RC -eq 0 ]] || echo "could not restore the peer wire: $(cat "$T/routed_undo.err")"'
  remote_run routed_setup 60 bash -c "$ROUTED_SETUP"
  [[ $RC -eq 0 ]] || fail "the router on the peer: $(cat "$T/routed_setup.err")"
  ip route add 10.62.0.0/24 via "$PEER_ADDR" || fail "no route to 10.62.0.0/24 via $PEER_ADDR"
  # IP first (the guests have no ping): a refused TCP connection is an answer from behind the router.
  run reach 20 bash -c "exec 3<> /dev/tcp/$ROUTED_ADDR/9"
  grep -q refused "$T/reach.err" || fail "no answer from $ROUTED_ADDR through the peer's router (exit $RC)"
  note "routed: $(ip route get "$ROUTED_ADDR" | head -1)"

  # The advice for each end: each host its own entry.
  local here_index peer_index
  routed_advice gids_here here "$WIRE_ADDR"
  [[ ${ADVICE% *} == "$WIRE_DEV" ]] || fail "the advice for $WIRE_ADDR is not on $WIRE_DEV: $ADVICE"
  here_index=${ADVICE#* }
  routed_advice gids_peer peer "$ROUTED_ADDR"
  [[ ${ADVICE% *} == rxer ]] || fail "the advice for $ROUTED_ADDR on the peer is not on rxer: $ADVICE"
  peer_index=${ADVICE#* }
  note "diag-bind --gids: -x $here_index here ($WIRE_ADDR), -x $peer_index on the peer ($ROUTED_ADDR)"
  [[ $here_index -ne 0 && $peer_index -ne 0 ]] || fail "the advised index is 0, the link-local entry"

  perftest_pair advised "$ROUTED_ADDR" rxer "$peer_index" "$here_index"
  expect_rc 0 "ib_send_bw -x $here_index across the router"
  [[ $SERVER_RC -eq 0 ]] || fail "ib_send_bw -x $peer_index on the peer: exit $SERVER_RC"
  note "ib_send_bw -x advised across the router: $(grep -E '^ *4096 ' "$T/advised.out" | head -1)"

  # Index 0 across the router: each side's modify to RTR has to resolve the other's fe80
  # GID to a MAC on its own link, where nobody holds it, and fails.
  perftest_pair link_local "$ROUTED_ADDR" rxer 0 0
  [[ $RC -ne 0 && $RC -ne 124 ]] || fail "ib_send_bw -x 0 across the router: exit $RC"
  [[ $SERVER_RC -ne 0 ]] || fail "ib_send_bw -x 0 on the peer ended well"
  expect_grep "to RTR" link_local.err
  note "ib_send_bw -x 0 across the router: client exit $RC after $ELAPSED_MS ms: $(perftest_failure link_local)"
  note "ib_send_bw -x 0 across the router: server exit $SERVER_RC: $(perftest_failure link_local_server)"

  # rdma_cm takes the GID from the address: our send_bw just works, on the advised entry.
  next_port
  remote_start routed_bw "$OURS_SEND_BW" --bind "$ROUTED_ADDR" -p "$PORT" --json --accept-timeout 30
  remote_wait_listening "$PORT"
  run routed_bw_client 60 "$OURS_SEND_BW" "$ROUTED_ADDR" -p "$PORT" -s 4096 -n 200 --json
  expect_rc 0 "send_bw across the router"
  remote_finish routed_bw 20
  expect_rc 0 "send_bw server behind the router"
  expect_jq ".outcome == \"completed\" and .test.path.gid_index == $here_index" routed_bw_client.out

  routed_diag_connect "$here_index" "$peer_index"
}

# routed_diag_connect HERE_INDEX PEER_INDEX: diag-connect --gid-index across the router, its
# agent behind it: 0 is named link-local; the advised index, where both hosts have the same
# one (one --gid-index is checked on both), works.
routed_diag_connect() {
  local index=$1 peer_index=$2 probe
  next_port
  probe=$PORT
  next_port
  # The agent answers only its own subnet by default; this client is a router away.
  remote_start routed_agent "$OURS_DIAG_CONNECT" --serve --bind "$ROUTED_ADDR" -p "$probe" --agent-port "$PORT" \
    --allow "$WIRE_ADDR/32" --log-level info
  restore "remote_stop routed_agent"
  remote_wait_line routed_agent "side channel" 30
  connect routed_index0 30 "$ROUTED_ADDR" -p "$probe" --agent-port "$PORT" --gid-index 0 --timeout 3
  expect_connect_cause routed_index0 gid_link_local 1
  if [[ $index == "$peer_index" ]]; then
    connect routed_advised 30 "$ROUTED_ADDR" -p "$probe" --agent-port "$PORT" --gid-index "$index" --timeout 3
    expect_connect_cause routed_advised ok 0
  fi
  remote_stop routed_agent
}
