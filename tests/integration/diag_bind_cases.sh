# diag-bind cases: each breaks the host the way users find it broken, runs diag-bind and
# asserts the named cause, then repairs the host (restore) for the cases after it.

# diag NAME ARGS...: diag-bind --json and its text form; sets RC (of the JSON run).
diag() {
  local name=$1
  shift
  run "$name.text" 30 "$OURS_DIAG" "$@"
  run "$name" 30 "$OURS_DIAG" --json "$@"
}

# expect_cause NAME CAUSE EXIT: both forms name CAUSE and exit with EXIT; JSON is one document.
expect_cause() {
  local name=$1 cause=$2 code=$3
  expect_rc "$code" "diag-bind ($name)"
  expect_jq ".verdict.cause == \"$cause\" and .verdict.exit_code == $code and .exit_code == $code" "$name.out"
  expect_jq '(.checks | length) >= 7 and (.attempt.steps | length) >= 1 and (.inventory | has("kernel_devices"))' \
    "$name.out"
  expect_grep "^verdict: $cause (exit $code)" "$name.text.out"
  note "$name: $(jq -r .verdict.summary "$T/$name.out")"
}

wait_port_active() {
  local i
  for ((i = 0; i < 50; i++)); do
    rdma link show "$RXE_DEV/1" 2>/dev/null | grep -q "state ACTIVE" && return 0
    tick 0.2
  done
  fail "$RXE_DEV port 1 is not ACTIVE again"
}

# ctest: integration quick
case_diag_bind_ok() {
  require_device
  diag ok "$RXE_ADDR"
  expect_cause ok ok 0
  expect_jq ".attempt.device == \"$RXE_DEV\" and .attempt.port == 1" ok.out
  expect_jq '[.attempt.steps[].call] == ["rdma_create_event_channel","rdma_create_id","rdma_bind_addr","ibv_reg_mr"]' ok.out
  expect_schema diag-bind ok.out
  expect_grep "a RoCE v2 peer reaches it with GID index" ok.text.out
  diag ok6 "$RXE_ADDR6"
  expect_cause ok6 ok 0
  diag host
  expect_cause host ok 0
  diag wildcard 0.0.0.0
  expect_cause wildcard wildcard_address 0
  diag loopback 127.0.0.1
  expect_cause loopback loopback_address 1
  expect_jq '.attempt.steps[-1].call == "rdma_resolve_route" and .attempt.steps[-1].errno_name == "ENODEV"' loopback.out
}

# alone: breaks the host on purpose (a link down, a device removed or added, the modes of
# /dev/infiniband, the providers hidden, a full or link-local-only GID table, a VLAN on the RDMA
# netdev) and repairs it
# ctest: integration alone
case_diag_bind_netdev_without_rdma() {
  require_device
  require_root
  diag plain "$PLAIN_ADDR"
  expect_cause plain netdev_without_rdma 1
  local netdev fix
  netdev=$(ip -o addr show | awk -v a="$PLAIN_ADDR" '$4 ~ "^"a"/" {print $2; exit}')
  fix=$(jq -r .verdict.fix "$T/plain.out")
  [[ $fix == "rdma link add rxe_$netdev type rxe netdev $netdev"* ]] || fail "fix names the wrong command: $fix"
  # A client whose route leaves through that netdev gets the same cause.
  diag route "${PLAIN_ADDR%.*}.2"
  expect_cause route netdev_without_rdma 1
  expect_grep "reached through $netdev" route.text.out
  # Apply the suggested fix for real: the bind then works, on the new device.
  restore "rdma link delete rxe_$netdev 2>/dev/null"
  ${fix%%   (*} || fail "the suggested fix failed: $fix"
  diag fixed "$PLAIN_ADDR"
  expect_cause fixed several_devices 0
  expect_jq ".attempt.device == \"rxe_$netdev\"" fixed.out
  expect_grep "need -d rxe_$netdev" fixed.text.out
}

# ctest: integration
case_diag_bind_address_not_local() {
  require_device
  diag notmine "${RXE_ADDR%.*}.99"
  expect_cause notmine address_not_local 1
  expect_jq '.attempt.steps[2].call == "rdma_bind_addr" and .attempt.steps[2].errno_name == "EADDRNOTAVAIL"' notmine.out
  diag noroute 10.99.0.1
  expect_cause noroute no_route 1
}

# ctest: integration alone
case_diag_bind_netdev_down() {
  require_device
  require_root
  # Taking a netdev down flushes its IPv6 addresses: the repair puts them back too.
  restore "ip link set $RXE_NETDEV up; ip -6 addr replace $RXE_ADDR6/64 dev $RXE_NETDEV nodad"
  ip link set "$RXE_NETDEV" down
  diag down "$RXE_ADDR"
  expect_cause down netdev_down 1
  expect_jq ".verdict.fix == \"ip link set $RXE_NETDEV up\"" down.out
  ip link set "$RXE_NETDEV" up
  ip -6 addr replace "$RXE_ADDR6/64" dev "$RXE_NETDEV" nodad
  wait_port_active
  diag up "$RXE_ADDR"
  expect_cause up ok 0
  diag up6 "$RXE_ADDR6"
  expect_cause up6 ok 0
}

# ctest: integration
case_diag_bind_memlock() {
  require_device
  require_root
  command -v setpriv > /dev/null || { echo "SKIP: setpriv (util-linux) missing"; exit 77; }
  # Root ignores the limit (CAP_IPC_LOCK), so drop the capability as well.
  run memlock.text 30 bash -c "ulimit -l 64; exec setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock $OURS_DIAG $RXE_ADDR"
  run memlock 30 bash -c "ulimit -l 64; exec setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock $OURS_DIAG --json $RXE_ADDR"
  expect_cause memlock memlock_too_low 1
  expect_jq '.inventory.memlock.soft_bytes == 65536 and .inventory.memlock.cap_ipc_lock == false' memlock.out
  expect_jq '.attempt.steps[-1].call == "ibv_reg_mr" and .attempt.steps[-1].errno_name == "ENOMEM"' memlock.out
}

# ctest: integration alone
case_diag_bind_provider_missing() {
  require_device
  require_root
  local dir
  dir=$("$OURS_DIAG" --json | jq -r .inventory.provider_dir)
  [[ -d $dir ]] || fail "provider directory '$dir' not found"
  restore "umount $dir"
  mount -t tmpfs none "$dir"
  diag noprovider "$RXE_ADDR"
  expect_cause noprovider provider_missing 1
  expect_grep "librxe" noprovider.text.out
}

# ctest: integration alone
case_diag_bind_no_device() {
  require_device
  require_root
  restore "rdma link add $RXE_DEV type rxe netdev $RXE_NETDEV 2>/dev/null; true"
  rdma link delete "$RXE_DEV"
  diag nodevice "$RXE_ADDR"
  expect_cause nodevice no_rdma_device 1
  expect_jq '.attempt.steps == [.attempt.steps[0]] and .attempt.steps[0].errno_name == "ENODEV"' nodevice.out
  # Other tools on the same host: exit 77, hint at diag-bind; --diagnose gives the verdict inline.
  run rping 60 "$OURS_RPING" -s -a "$RXE_ADDR" --json --diagnose
  expect_rc 77 "rping without a device"
  expect_jq '.diagnosis.verdict.cause == "no_rdma_device"' rping.out
  rdma link add "$RXE_DEV" type rxe netdev "$RXE_NETDEV"
  wait_port_active
}

# ctest: integration alone
case_diag_bind_permissions() {
  require_device
  require_root
  local nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  restore "chmod 666 /dev/infiniband/rdma_cm /dev/infiniband/uverbs*"
  chmod 600 /dev/infiniband/rdma_cm
  run cm.text 30 "${nobody[@]}" "$OURS_DIAG" "$RXE_ADDR"
  run cm 30 "${nobody[@]}" "$OURS_DIAG" --json "$RXE_ADDR"
  expect_cause cm rdma_cm_permission 1
  chmod 666 /dev/infiniband/rdma_cm
  chmod 600 /dev/infiniband/uverbs*
  run verbs.text 30 "${nobody[@]}" "$OURS_DIAG" "$RXE_ADDR"
  run verbs 30 "${nobody[@]}" "$OURS_DIAG" --json "$RXE_ADDR"
  expect_cause verbs uverbs_unavailable 1
  expect_jq '.attempt.steps[-1].call == "rdma_bind_addr" and .attempt.steps[-1].errno_name == "ENODEV"' verbs.out
}

# A route that leaves by a netdev whose RDMA port has only its link-local GID, from a source
# on another netdev: the route is the operator's plan, so only a next step, applied here with
# an address of ours.
# ctest: integration alone
case_diag_bind_gid_link_local() {
  require_device
  require_root
  local i next
  restore "rdma link delete rxeu 2>/dev/null; ip link del un0 2>/dev/null; true"
  ip link add un0 type dummy
  ip link set un0 up
  rdma link add rxeu type rxe netdev un0
  for ((i = 0; i < 50; i++)); do
    grep -q '^fe80' /sys/class/infiniband/rxeu/ports/1/gids/0 2>/dev/null && break
    tick 0.2
  done
  ip route add 10.70.0.0/24 dev un0 src "$PLAIN_ADDR"
  ip -6 route add fd70::/64 dev un0
  diag ll 10.70.0.9
  expect_cause ll gid_link_local 1
  expect_jq '.attempt.route_netdev == "un0" and .verdict.fix == ""' ll.out
  expect_grep "leaves by un0 (rxeu port 1)" ll.text.out
  diag ll6 fd70::9
  expect_cause ll6 gid_link_local 1
  next=$(jq -r .verdict.next "$T/ll.out")
  [[ $next == *"ip addr add ADDRESS/LEN dev un0"*"ip route replace PREFIX dev un0 src ADDRESS"* ]] ||
    fail "next names the wrong steps: $next"
  ip addr add 10.71.0.1/24 dev un0
  ip route replace 10.70.0.0/24 dev un0 src 10.71.0.1
  # The source now has a GID on un0: the resolution goes on to ask for 10.70.0.9, which no
  # host on the dummy answers.
  diag fixed 10.70.0.9
  expect_cause fixed address_not_local 1
  expect_jq '.attempt.device == "rxeu" and ([.attempt.steps[] | select(.call == "rdma_resolve_addr")][0].ok)' fixed.out
}

# A GID table that is full (1024 entries on soft-RoCE, one per address here: RoCE v2 only):
# the addresses past its end have no GID. Freeing entries leaves room, and the printed fix
# then re-adds one.
# ctest: integration alone
case_diag_bind_gid_missing() {
  require_device
  require_root
  local i last=10.60.4.41 fix
  restore "rdma link delete rxeg 2>/dev/null; ip link del gm0 2>/dev/null; true"
  ip link add gm0 type dummy
  ip link set gm0 up
  rdma link add rxeg type rxe netdev gm0
  for ((i = 1; i <= 1040; i++)); do echo "addr add 10.60.$((i / 250)).$((i % 250 + 1))/16 dev gm0"; done > "$T/gm0.batch"
  ip -batch "$T/gm0.batch"
  for ((i = 0; i < 50; i++)); do
    grep -q . /sys/class/infiniband/rxeg/ports/1/gids/1023 2>/dev/null && break
    tick 0.2
  done
  diag full "$last"
  expect_cause full gid_missing 1
  expect_jq '.verdict.fix == "" and (.verdict.summary | contains("full (1024 of 1024 entries)"))' full.out
  expect_jq ".verdict.next | contains(\"ip addr del $last/16 dev gm0 && ip addr add $last/16 dev gm0\")" full.out
  # Secondaries only: deleting 10.60.0.2, the subnet's first, would delete all of them.
  for ((i = 3; i <= 22; i++)); do ip addr del "10.60.0.$i/16" dev gm0; done
  diag room "$last"
  expect_cause room gid_missing 1
  fix=$(jq -r .verdict.fix "$T/room.out")
  [[ $fix == "ip addr del $last/16 dev gm0 && ip addr add $last/16 dev gm0" ]] || fail "fix names the wrong command: $fix"
  eval "$fix" || fail "the suggested fix failed: $fix"
  diag fixed "$last"
  expect_cause fixed several_devices 0
  expect_jq '.attempt.device == "rxeg"' fixed.out
}

# gids_match_device REPORT: every row of diag-bind --gids --json is the kernel's entry (sysfs
# gids/N, gid_attrs/types/N and ndevs/N) and libibverbs' (ibv_devinfo -v: "GID[  1]:
# ::ffff:10.55.0.1, RoCE v2"), and every populated entry of those has its row.
gids_match_device() {
  "${RDMAKIT_PYTHON:-/usr/bin/python3}" - "$T/$1" << 'EOF' > "$T/gids-compare.out" 2>&1 || fail "$(cat "$T/gids-compare.out")"
import ipaddress, json, pathlib, re, subprocess, sys
def text(gid):  # as inet_ntop writes it: Python before 3.13 writes ::ffff:a37:1
    mapped = gid.ipv4_mapped
    return f"::ffff:{mapped}" if mapped else str(gid)
rows = json.load(open(sys.argv[1]))["gids"]
ours = {(r["device"], r["port"], r["index"]): r for r in rows}
sysfs, verbs, bad = {}, {}, []
for port_dir in pathlib.Path("/sys/class/infiniband").glob("*/ports/*"):
    device, port = port_dir.parts[-3], int(port_dir.name)
    for gid_file in (port_dir / "gids").iterdir():
        raw = gid_file.read_text().strip()
        gid = ipaddress.IPv6Address(int(raw.replace(":", ""), 16))
        if int(gid) == 0:
            continue
        read = lambda kind: (port_dir / "gid_attrs" / kind / gid_file.name).read_text().strip()
        sysfs[(device, port, int(gid_file.name))] = (text(gid), read("types"), read("ndevs"))
for device in {key[0] for key in sysfs}:
    port = 0
    for line in subprocess.run(["ibv_devinfo", "-v", "-d", device], capture_output=True, text=True).stdout.splitlines():
        if m := re.match(r"\s*port:\s*(\d+)", line):
            port = int(m.group(1))
        elif m := re.match(r"\s*GID\[\s*(\d+)\]:\s*(\S+), (.+)$", line):
            verbs[(device, port, int(m.group(1)))] = (text(ipaddress.IPv6Address(m.group(2))), m.group(3))
for key, (gid, kind, ndev) in sysfs.items():
    row = ours.get(key)
    if row is None:
        bad.append(f"{key}: sysfs has {gid} {kind} {ndev}, diag-bind no row")
    elif (row["gid"], row["type"], row["netdev"]) != (gid, kind, ndev):
        bad.append(f"{key}: sysfs {gid} {kind} {ndev}, diag-bind {row['gid']} {row['type']} {row['netdev']}")
    if verbs.get(key) != (gid, kind):
        bad.append(f"{key}: sysfs {gid} {kind}, ibv_devinfo {verbs.get(key)}")
for key, row in ours.items():
    if key not in sysfs:
        bad.append(f"{key}: diag-bind {row['gid']}, sysfs none")
    mapped = ipaddress.IPv6Address(row["gid"]).ipv4_mapped
    if row["ipv4"] != (str(mapped) if mapped else None):
        bad.append(f"{key}: ipv4 {row['ipv4']} for {row['gid']}")
    if row["link_local"] != ipaddress.IPv6Address(row["gid"]).is_link_local:
        bad.append(f"{key}: link_local {row['link_local']} for {row['gid']}")
print("\n".join(bad) or f"{len(rows)} rows agree with sysfs and ibv_devinfo")
sys.exit(1 if bad else 0)
EOF
  note "$(cat "$T/gids-compare.out")"
}

# --gids: the table against sysfs and ibv_devinfo, with a VLAN netdev on the RDMA netdev (its
# entries carry the VLAN id), and the index each stack should get: an address's own RoCE v2
# entry, a remote one's route source's, none for an address without RDMA (exit 1).
# ctest: integration alone
case_diag_bind_gids() {
  require_device
  require_root
  local i vlan_dev=$RXE_NETDEV.100 index octets
  restore "ip link del $vlan_dev 2>/dev/null; true"
  ip link add link "$RXE_NETDEV" name "$vlan_dev" type vlan id 100 || fail "cannot add VLAN $vlan_dev"
  ip link set "$vlan_dev" up
  ip addr add 10.66.0.1/24 dev "$vlan_dev"
  for ((i = 0; i < 50; i++)); do
    grep -qx '0000:0000:0000:0000:0000:ffff:0a42:0001' /sys/class/infiniband/"$RXE_DEV"/ports/1/gids/* 2>/dev/null && break
    tick 0.2
  done
  run table 30 "$OURS_DIAG" --gids --json
  expect_rc 0 "diag-bind --gids"
  expect_schema diag-bind table.out
  expect_jq '.outcome == "ok" and (has("advice") | not) and (.gids | length) >= 4' table.out
  gids_match_device table.out
  expect_jq "[.gids[] | select(.netdev == \"$vlan_dev\")] | length >= 2 and all(.vlan == 100)" table.out
  expect_jq "[.gids[] | select(.netdev == \"$RXE_NETDEV\")] | all(.vlan == null)" table.out
  expect_jq '[.gids[] | select(.ipv4 == "10.66.0.1")] | length >= 1' table.out
  run table.text 30 "$OURS_DIAG" --gids
  expect_grep '^DEV  *PORT INDEX GID  *IPv4  *VER NETDEV  *VLAN$' table.text.out
  grep -Eq "^$RXE_DEV +1 +[0-9]+ +::ffff:10\.66\.0\.1 +10\.66\.0\.1 +v2 +${vlan_dev//./\\.} +100$" "$T/table.text.out" ||
    fail "no row for 10.66.0.1 on $vlan_dev with VLAN 100 in the table"

  # The index: the kernel's RoCE v2 entry that holds the address.
  local hex file
  IFS=. read -r -a octets <<< "$RXE_ADDR"
  hex=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "${octets[@]}")
  index=
  while read -r file; do
    [[ $(< "/sys/class/infiniband/$RXE_DEV/ports/1/gid_attrs/types/${file##*/}") == "RoCE v2" ]] && index=${file##*/}
  done <<< "$(grep -lx "$hex" /sys/class/infiniband/"$RXE_DEV"/ports/1/gids/*)"
  [[ -n $index ]] || fail "sysfs has no RoCE v2 GID for $RXE_ADDR on $RXE_DEV port 1"
  run own 30 "$OURS_DIAG" --gids "$RXE_ADDR" --json
  expect_rc 0 "diag-bind --gids $RXE_ADDR"
  expect_schema diag-bind own.out
  expect_jq ".advice.index == $index and .advice.device == \"$RXE_DEV\" and .advice.port == 1 and
    .advice.source == \"$RXE_ADDR\" and .advice.type == \"RoCE v2\"" own.out
  expect_jq ".advice.settings[] | select(.stack == \"perftest\") | .setting == \"-d $RXE_DEV -i 1 -x $index\"" own.out
  expect_jq ".advice.settings[] | select(.stack == \"NCCL\") | .setting | endswith(\"NCCL_IB_GID_INDEX=$index\")" own.out
  run own.text 30 "$OURS_DIAG" --gids "$RXE_ADDR"
  expect_grep "^$RXE_ADDR: $RXE_DEV port 1 index $index " own.text.out
  note "$RXE_ADDR: index $index"

  run vlan 30 "$OURS_DIAG" --gids 10.66.0.1 --json
  expect_rc 0 "diag-bind --gids 10.66.0.1"
  expect_jq ".advice.index as \$i | [.gids[] | select(.index == \$i)][0] | .ipv4 == \"10.66.0.1\" and .vlan == 100 and
    .type == \"RoCE v2\"" vlan.out

  run remote 30 "$OURS_DIAG" --gids "${RXE_ADDR%.*}.99" --json
  expect_rc 0 "diag-bind --gids ${RXE_ADDR%.*}.99"
  expect_jq ".advice.source == \"$RXE_ADDR\" and .advice.index == $index" remote.out
  run remote.text 30 "$OURS_DIAG" --gids "${RXE_ADDR%.*}.99"
  expect_grep "^${RXE_ADDR%.*}.99 is reached from $RXE_ADDR" remote.text.out

  run plain 30 "$OURS_DIAG" --gids "$PLAIN_ADDR" --json
  expect_rc 1 "diag-bind --gids $PLAIN_ADDR"
  expect_schema diag-bind plain.out
  expect_jq '.outcome == "no_gid" and .advice.index == null and .advice.settings == []' plain.out
  run plain.text 30 "$OURS_DIAG" --gids "$PLAIN_ADDR"
  expect_grep "run 'diag-bind $PLAIN_ADDR'" plain.text.out
}

# ctest: integration sanitized quick
case_diag_bind_from_tools() {
  require_device
  next_port
  # 60 s: a hang's bound, not a speed limit; the sanitized rping and the diag-bind it starts
  # took over 15 s in a guest beside CPU burners.
  run server 60 "$OURS_RPING" -s -a "$PLAIN_ADDR" -p "$PORT" --json --diagnose
  expect_rc 1 "rping server on an address without RDMA"
  expect_jq '.errors[0].call == "rdma_bind_addr" and .diagnosis.verdict.cause == "netdev_without_rdma"' server.out
  expect_grep "^verdict: netdev_without_rdma" server.err
  run client 15 "$OURS_RPING" -c -a "${PLAIN_ADDR%.*}.2" -p "$PORT" -C 1 --diagnose
  expect_rc 1 "rping client routed through a netdev without RDMA"
  expect_grep "reached through" client.err
  # Without --diagnose: only the hint, no diagnosis.
  run plain 15 "$OURS_RPING" -s -a "$PLAIN_ADDR" -p "$PORT" --json
  expect_jq '(has("diagnosis") | not) and (.errors[0].hint | contains("diag-bind"))' plain.out
}

# ctest: nodevice
case_diag_bind_bad_flags() {
  local args
  for args in "--ps foo 10.55.0.1" "-p 70000 10.55.0.1" "--mr-size 0" "no.such.host.invalid" "10.55.0.1 extra" \
    "--replay /nonexistent"; do
    # shellcheck disable=SC2086
    run bad 10 "$OURS_DIAG" $args
    expect_rc 2 "diag-bind $args"
    [[ $(wc -l < "$T/bad.err") -le 3 ]] || fail "diag-bind $args: more than a short usage error"
  done
}
