# Helpers for two-host cases (scripts/rxe-vm.sh --pair): commands on the peer guest, which
# runs whatever script lands in the shared RPC folder (see the peer agent in rxe-vm.sh).
# Its outputs are copied into $T under the same NAME, so expect_jq/expect_grep work on them.

require_peer() {
  require_device
  if [[ -z ${PEER_ADDR:-} || -z ${RXEVM_RPC:-} || ! -e ${RXEVM_RPC:-/nonexistent}/agent.ready ]]; then
    echo "SKIP: no peer host (run inside scripts/rxe-vm.sh --pair)"
    exit 77
  fi
}

# poke_peer: wake the peer's agent (scripts/rxe-vm.sh) now rather than at its next poll, a
# second away: a line to its port 7399 over the management network, from a subshell of its
# own so that a peer that does not answer cannot hold the case.
poke_peer() { (echo > "/dev/tcp/$PEER_MGMT_ADDR/7399") 2> /dev/null & }

remote_counter=0
# remote_start NAME COMMAND...: start COMMAND on the peer; NAME must be unique in the case.
remote_start() {
  local name=$1 id
  shift
  remote_counter=$((remote_counter + 1))
  id="$$-$remote_counter-$name"
  eval "REMOTE_$name=$id"
  {
    echo "cd $(printf '%q' "$PWD")"
    printf 'exec'
    printf ' %q' "$@"
    echo
  } > "$RXEVM_RPC/inbox/$id.req.new"
  mv "$RXEVM_RPC/inbox/$id.req.new" "$RXEVM_RPC/inbox/$id.req"
  poke_peer
}

# remote_pid NAME: the peer's pid of NAME (waits up to 10 s for the agent to start it).
remote_pid() {
  local id i
  eval "id=\$REMOTE_$1"
  for ((i = 0; i < 100; i++)); do
    [[ -s $RXEVM_RPC/$id.pid ]] && { echo "$(< "$RXEVM_RPC/$id.pid")"; return 0; }
    tick 0.1
  done
  fail "the peer never started $1"
}

# remote_finish NAME SECONDS: wait for NAME on the peer; sets RC (124 when it had to be
# killed) and copies its output to $T/NAME.out and $T/NAME.err.
remote_finish() {
  local name=$1 seconds=$2 id i
  eval "id=\$REMOTE_$name"
  RC=124
  for ((i = 0; i < seconds * 10; i++)); do
    if [[ -s $RXEVM_RPC/$id.rc ]]; then
      RC=$(< "$RXEVM_RPC/$id.rc")
      break
    fi
    tick 0.1
  done
  if [[ $RC -eq 124 && ! -s $RXEVM_RPC/$id.rc ]]; then
    remote_signal "$name" KILL
  fi
  cp "$RXEVM_RPC/$id.out" "$T/$name.out" 2>/dev/null || : > "$T/$name.out"
  cp "$RXEVM_RPC/$id.err" "$T/$name.err" 2>/dev/null || : > "$T/$name.err"
}

# remote_wait_line NAME TEXT SECONDS: until TEXT shows up in what NAME on the peer wrote to
# stderr; fails the case when SECONDS pass first.
remote_wait_line() {
  local name=$1 text=$2 seconds=$3 id i
  eval "id=\$REMOTE_$name"
  for ((i = 0; i < seconds * 10; i++)); do
    [[ -s $RXEVM_RPC/$id.err && $(< "$RXEVM_RPC/$id.err") == *"$text"* ]] && return 0
    tick 0.1
  done
  fail "'$text' did not appear in $name's stderr on the peer within $seconds s"
}

# remote_run NAME SECONDS COMMAND...: run COMMAND on the peer and wait for it; sets RC.
remote_run() {
  local name=$1 seconds=$2
  shift 2
  remote_start "$name" "$@"
  remote_finish "$name" "$seconds"
}

remote_fault_counter=0
# remote_fault ACTION ARGUMENT TARGET: inject a fault on the peer through the agent's
# builtin-only path ("kill SIGNAL PID", or "write VALUE FILE" where @WIRE_NETDEV@ in FILE
# names the peer's wire NIC) and wait, 10 s at most, until it was done. FAULT_ASKED_AT is
# when we asked, FAULT_DONE_AT when the peer did it, in microseconds of our clock (see
# peer_clock).
remote_fault() {
  local id i
  remote_fault_counter=$((remote_fault_counter + 1))
  id="$RXEVM_RPC/$$-fault$remote_fault_counter"
  FAULT_ASKED_AT=${EPOCHREALTIME/./}
  printf '%s %s %s\nend\n' "$1" "$2" "$3" > "$RXEVM_RPC/inbox/${id##*/}.sig"
  poke_peer
  for ((i = 0; i < 200; i++)); do
    if [[ -s $id.sent ]]; then
      local done_at_peer
      read -r FAULT_STATUS done_at_peer < "$id.sent"
      FAULT_DONE_AT=$((${done_at_peer/./} - ${PEER_CLOCK_AHEAD_US:-0}))
      [[ $FAULT_STATUS -eq 0 ]] || { echo "the peer could not $*"; return 1; }
      return 0
    fi
    tick
  done
  fail "the peer did not $* within 10 s"
}

# peer_clock: sets PEER_CLOCK_AHEAD_US (how far the peer's clock is ahead of ours) and
# PEER_CLOCK_ERROR_US (its uncertainty, half the best of five round trips through the agent).
peer_clock() {
  local i asked answered peer_at rtt best=""
  for ((i = 0; i < 5; i++)); do
    PEER_CLOCK_AHEAD_US=0
    remote_fault clock - - || fail "the peer did not answer a clock query"
    asked=$FAULT_ASKED_AT answered=${EPOCHREALTIME/./} peer_at=$FAULT_DONE_AT
    rtt=$((answered - asked))
    if [[ -z $best ]] || ((rtt < best)); then
      best=$rtt
      local ahead=$((peer_at - (asked + answered) / 2))
    fi
  done
  PEER_CLOCK_AHEAD_US=$ahead PEER_CLOCK_ERROR_US=$((best / 2))
}

# remote_signal NAME SIGNAL: deliver SIGNAL to NAME on the peer (see remote_fault).
remote_signal() {
  local pid
  pid=$(remote_pid "$1")
  remote_fault kill "$2" "$pid"
}

# remote_stop NAME: end NAME on the peer if it is still running, and collect it.
remote_stop() {
  local id
  eval "id=\$REMOTE_$1"
  [[ -s $RXEVM_RPC/$id.rc ]] || remote_signal "$1" KILL || true
  remote_finish "$1" 10
}

# remote_wait_listening PORT: until an rdma_cm id listens on PORT on the peer (20 s at most).
remote_wait_listening() {
  local port=$1 i
  for ((i = 0; i < 40; i++)); do
    remote_run "listening${port}_$i" 10 bash -c \
      "rdma res show cm_id 2>/dev/null | grep -q 'state LISTEN .*src-addr [^ ]*:$port '"
    [[ $RC -eq 0 ]] && return 0
    tick 0.3
  done
  fail "nothing listens on port $port on the peer after 20 s"
}
