#!/usr/bin/env bash
# units_under_systemd.sh [BUILD_DIR]: starts the two systemd units we ship under a real systemd
# (PID 1) and checks what they promise; run as COMMAND of a guest with systemd as its init:
#   scripts/rxe-vm.sh --systemd "$PWD" "bash tests/packaging/units_under_systemd.sh build"
#   rdmakit-rxe-vm --systemd -- bash units_under_systemd.sh     (the packages installed)
# Without BUILD_DIR the units and programs are the installed packages' (the suite's installed
# packages stage); with it, BUILD_DIR holds the configured units
# (rdmakit-diag-connect-agent.service and rdmakit-rdma_pingmesh.service) and bin/diag-connect
# and bin/rdma_pingmesh, and they are installed here first.
#
# It changes the system it runs on (the guest's root is a throwaway overlay): from a build,
# the units go in /etc/systemd/system as the package's files, unchanged, and the programs are
# copied to the paths in their ExecStart (/usr/bin/diag-connect and /usr/bin/rdma_pingmesh in a
# build without RDMAKIT_PROGRAM_PREFIX), so no drop-in replaces ExecStart. The agent's key is handed over as rdmakit(7) says: a
# root-only /etc/rdmakit/agent.key, LoadCredential=agent.key:/etc/rdmakit/agent.key in a
# drop-in, --key-file /run/credentials/rdmakit-diag-connect-agent.service/agent.key in
# RDMAKIT_AGENT_ARGS (/etc/default/rdmakit-diag-connect-agent). The pinglist
# (/etc/rdmakit/pinglist) names this node (its host name) at RXE_ADDR and a second node,
# peer2, at RXE_ADDR2, which a pingmesh started here by hand plays, so that the unit's probes
# are answered.
#
# Checks: systemd loads both units without a complaint; both are active; each runs as a dynamic user (not root), the agent with
# CAP_NET_ADMIN only, pingmesh with no capability; MemoryMax and TasksMax in the unit's
# cgroup, LimitNOFILE (and the agent's LimitMEMLOCK) in /proc/PID/limits; a client with the
# key gets the agent's view (its firewall read: CAP_NET_ADMIN at work) and its rdma_cm probe
# connection, one without the key or with another key does not; the .prom file
# appears in the StateDirectory with the probes to peer2 answered; systemctl stop ends each
# within STOP_LIMIT seconds, not failed.
set -euo pipefail

build=${1:-}
[[ -z $build ]] || build=$(cd "$build" && pwd)
stop_limit=${STOP_LIMIT:-10}
agent=rdmakit-diag-connect-agent
pingmesh=rdmakit-rdma_pingmesh
started=$EPOCHREALTIME
# exec_start UNIT_FILE: the program its ExecStart runs.
exec_start() { sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$1"; }

if [[ $(cat /proc/1/comm) != systemd || ! -d /run/systemd/system ]]; then
  echo "units_under_systemd: needs systemd as PID 1 (scripts/rxe-vm.sh --systemd)"
  exit 1
fi
: "${RXE_ADDR:?run in scripts/rxe-vm.sh --systemd}" "${RXE_ADDR2:?}"
if [[ -n $build ]]; then
  for file in "$build/$agent.service" "$build/$pingmesh.service" "$build/bin/diag-connect" "$build/bin/rdma_pingmesh"; do
    [[ -e $file ]] || { echo "units_under_systemd: no $file (configure and build first)"; exit 1; }
  done
else
  for unit in $agent $pingmesh; do
    [[ -e /lib/systemd/system/$unit.service ]] || { echo "units_under_systemd: no /lib/systemd/system/$unit.service (install the packages, or give BUILD_DIR)"; exit 1; }
  done
fi

failures=0
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
journal() {
  local unit
  for unit in "$@"; do
    echo "---- journalctl -u $unit"
    journalctl -u "$unit" --no-pager | tail -n 20
  done
}
elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }
show() { systemctl show -p "$2" --value "$1"; }

# How long the guest took to come here: the kernel's uptime, and systemd's own account.
read -r uptime _ < /proc/uptime
echo "boot to command: ${uptime}s since the kernel started ($(systemd-analyze time 2>&1 | head -n 1))"

# From a build: the package's files, in /etc here (the guest's /lib is the host's,
# underneath), and the programs where the units run them.
if [[ -n $build ]]; then
  install -m 0644 "$build/$agent.service" "$build/$pingmesh.service" /etc/systemd/system/
  install -m 0755 "$build/bin/diag-connect" "$(exec_start "/etc/systemd/system/$agent.service")"
  install -m 0755 "$build/bin/rdma_pingmesh" "$(exec_start "/etc/systemd/system/$pingmesh.service")"
fi
unit_file() { systemctl show -p FragmentPath --value "$1"; }
systemctl daemon-reload
diag_connect=$(exec_start "$(unit_file $agent)")
pingmesh_program=$(exec_start "$(unit_file $pingmesh)")
for program in "$diag_connect" "$pingmesh_program"; do
  [[ -x $program ]] || { echo "units_under_systemd: the units run $program, which is not there"; exit 1; }
done
echo "units: $(unit_file $agent), $(unit_file $pingmesh); programs $diag_connect, $pingmesh_program"

# The agent's key, root's only; the client's wrong one.
install -d -m 0755 /etc/rdmakit
(umask 077 && head -c 32 /dev/urandom | base64 > /etc/rdmakit/agent.key)
(umask 077 && head -c 32 /dev/urandom | base64 > /root/wrong.key)
install -d -m 0755 "/etc/systemd/system/$agent.service.d"
cat > "/etc/systemd/system/$agent.service.d/key.conf" <<'EOF'
[Service]
LoadCredential=agent.key:/etc/rdmakit/agent.key
EOF
cat > "/etc/default/$agent" <<EOF
RDMAKIT_AGENT_ARGS=--bind $RXE_ADDR --allow ${RXE_ADDR%.*}.0/24 --key-file /run/credentials/$agent.service/agent.key
EOF
# This node under its host name and a second one; a window of 2 s, not 10, for a quick .prom.
node=$(hostname)
printf '%s %s\n%s %s\n' "$RXE_ADDR" "$node" "$RXE_ADDR2" peer2 > /etc/rdmakit/pinglist
echo "RDMAKIT_PINGMESH_ARGS=--window 2" > "/etc/default/$pingmesh"
prom=/var/lib/$pingmesh/rdma_pingmesh.prom

cursor=$(journalctl -n 0 --show-cursor --no-pager | sed -n 's/^-- cursor: //p')
systemctl daemon-reload
# peer2: the other node of the pinglist, by hand, so that the unit's probes have an answerer.
"$pingmesh_program" --pinglist /etc/rdmakit/pinglist --name peer2 --window 2 --log-level warn \
  > /tmp/peer2.log 2>&1 &
peer2=$!

for unit in $agent $pingmesh; do
  t=$EPOCHREALTIME
  if systemctl start "$unit"; then
    echo "started $unit in $(elapsed "$t")s"
  else
    fail "$unit: systemctl start"
  fi
done
# What systemd (PID 1) said of a unit file when it loaded it (at its start, not at
# daemon-reload): "FILE:LINE: Unknown key name ..., ignoring" and the like.
for unit in $agent $pingmesh; do
  complaints=$(journalctl --after-cursor "$cursor" _PID=1 --no-pager -o cat | grep -F "$unit.service" | grep -E '\.(service|conf):[0-9]+:' || true)
  if [[ -z $complaints ]]; then
    pass "$unit: loaded by systemd $(systemctl --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p') without a complaint"
  else
    fail "$unit: systemd complains of the unit: $complaints"
  fi
done
sleep 2

for unit in $agent $pingmesh; do
  state=$(systemctl is-active "$unit" || true)
  pid=$(show "$unit" MainPID)
  if [[ $state != active || $pid == 0 ]]; then
    fail "$unit: $state (MainPID $pid)"
    journal "$unit"
    continue
  fi
  pass "$unit: active, MainPID $pid"
  read -r _ uid_real uid_eff uid_saved uid_fs < <(grep '^Uid:' "/proc/$pid/status")
  cap_eff=$(sed -n 's/^CapEff:[[:space:]]*//p' "/proc/$pid/status")
  cap_bnd=$(sed -n 's/^CapBnd:[[:space:]]*//p' "/proc/$pid/status")
  user=$(id -nu "$uid_real" 2>/dev/null || echo "?")
  if [[ $uid_real -ne 0 && $uid_eff -ne 0 && $uid_saved -ne 0 && $uid_fs -ne 0 && $uid_real -ge 61184 && $uid_real -le 65519 ]]; then
    pass "$unit: dynamic user $user (uid $uid_real), CapEff $cap_eff, CapBnd $cap_bnd"
  else
    fail "$unit: Uid $uid_real $uid_eff $uid_saved $uid_fs ($user), not a dynamic user"
  fi
  # CAP_NET_ADMIN is bit 12.
  if [[ $unit == "$agent" ]]; then want_caps=0000000000001000; else want_caps=0000000000000000; fi
  [[ $cap_eff == "$want_caps" && $cap_bnd == "$want_caps" ]] ||
    fail "$unit: CapEff $cap_eff CapBnd $cap_bnd, not $want_caps"

  cgroup=/sys/fs/cgroup$(cut -d: -f3- "/proc/$pid/cgroup")
  memory_max=$(show "$unit" MemoryMax) tasks_max=$(show "$unit" TasksMax)
  limit_nofile=$(show "$unit" LimitNOFILE)
  in_cgroup_memory=$(cat "$cgroup/memory.max") in_cgroup_tasks=$(cat "$cgroup/pids.max")
  in_proc_nofile=$(awk '/^Max open files/ { print $4 " " $5 }' "/proc/$pid/limits")
  if [[ $memory_max == "$in_cgroup_memory" && $memory_max != infinity && $tasks_max == "$in_cgroup_tasks" &&
        $tasks_max != infinity && "$limit_nofile $limit_nofile" == "$in_proc_nofile" ]]; then
    pass "$unit: MemoryMax $memory_max, TasksMax $tasks_max (cgroup ${cgroup#/sys/fs/cgroup}), LimitNOFILE $in_proc_nofile"
  else
    fail "$unit: MemoryMax $memory_max (cgroup $in_cgroup_memory), TasksMax $tasks_max (cgroup $in_cgroup_tasks), LimitNOFILE $limit_nofile (process $in_proc_nofile)"
  fi
  if [[ $unit == "$agent" ]]; then
    memlock=$(awk '/^Max locked memory/ { print $4 " " $5 }' "/proc/$pid/limits")
    if [[ $memlock == "100663296 100663296" ]]; then pass "$unit: LimitMEMLOCK 96M in effect"; else fail "$unit: Max locked memory $memlock, not 96M"; fi
  fi
done

# The agent's key through LoadCredential: only the agent's user reads it.
credential=/run/credentials/$agent.service/agent.key
if [[ -r $credential ]]; then
  pass "$agent: credential $(stat -c '%U %a' "$credential") at $credential"
else
  fail "$agent: no $credential"
fi

# diag-connect clients: with the key, without one, with another one.
client() {
  local name=$1
  shift
  "$diag_connect" "$RXE_ADDR" -p 7471 --agent-port 7472 --json --timeout 20 "$@" > "/tmp/client-$name.json" 2> "/tmp/client-$name.err" || true
  jq -r '.capture.agent.status // "none"' "/tmp/client-$name.json" 2>/dev/null || echo "no JSON"
}
t=$EPOCHREALTIME
status=$(client keyed --key-file /etc/rdmakit/agent.key)
firewall=$(jq -r '.capture.peer.view.firewall.readable' /tmp/client-keyed.json 2>/dev/null || true)
cause=$(jq -r '.verdict.cause' /tmp/client-keyed.json 2>/dev/null || true)
if [[ $status == ok && $firewall == true && $cause == ok ]]; then
  pass "keyed client: the agent answered (status ok, its firewall readable) and took the probe (verdict ok) in $(elapsed "$t")s"
else
  fail "keyed client: agent status $status, agent's firewall readable: $firewall, verdict $cause"
  jq -c '.verdict' /tmp/client-keyed.json 2>/dev/null || true
  cat /tmp/client-keyed.err
  jq -c '.capture.agent' /tmp/client-keyed.json 2>/dev/null || head -c 2000 /tmp/client-keyed.json
  journal "$agent"
fi
for name in unkeyed wrong; do
  args=()
  [[ $name == wrong ]] && args=(--key-file /root/wrong.key)
  status=$(client "$name" "${args[@]}")
  if [[ $status != ok ]]; then
    pass "$name client: no answer from the agent (status $status)"
  else
    fail "$name client: the agent answered"
  fi
done

# The pingmesh's textfile: Prometheus text, peer2's probes answered.
t=$EPOCHREALTIME
for _ in $(seq 60); do
  [[ -s $prom ]] && grep -q '^rdmakit_pingmesh_probes_answered_total{[^}]*peer="peer2"[^}]*} [1-9]' "$prom" && break
  sleep 0.5
done
if [[ -s $prom ]] && grep -q '^# TYPE rdmakit_pingmesh_probes_sent_total counter' "$prom" &&
   grep -q '^rdmakit_pingmesh_probes_answered_total{[^}]*peer="peer2"[^}]*} [1-9]' "$prom"; then
  pass "$pingmesh: $prom ($(stat -c '%U %a' "$prom"), $(wc -l < "$prom") lines) with peer2's probes answered ($(elapsed "$t")s)"
else
  fail "$pingmesh: no $prom with peer2's probes answered after $(elapsed "$t")s"
  ls -la "/var/lib/$pingmesh/" "/var/lib/private/" 2>&1 || true
  [[ -s $prom ]] && grep 'peer2' "$prom" | head
  echo "---- peer2"; tail -n 20 /tmp/peer2.log
  journal "$pingmesh"
fi

for unit in $agent $pingmesh; do
  t=$EPOCHREALTIME
  systemctl stop "$unit" || true
  took=$(elapsed "$t")
  state=$(systemctl is-active "$unit" || true)
  result=$(show "$unit" Result) code=$(show "$unit" ExecMainCode) exit_status=$(show "$unit" ExecMainStatus)
  # What it said last (the unit's journal: its report's summary line, or systemd's).
  ended=$(journalctl -u "$unit" --no-pager -o cat | grep -v '^$' | tail -n 1 || true)
  if [[ $state == inactive && $result == success ]] && awk -v t="$took" -v l="$stop_limit" 'BEGIN { exit !(t <= l) }'; then
    pass "$unit: stopped in ${took}s, $state, result $result; last: ${ended:-nothing}"
  else
    fail "$unit: stop took ${took}s: $state, result $result (code $code, status $exit_status)"
    journal "$unit"
  fi
done
kill "$peer2" 2>/dev/null || true
wait "$peer2" 2>/dev/null || true

echo "units_under_systemd: $failures failed, $(elapsed "$started")s"
[[ $failures -eq 0 ]]
