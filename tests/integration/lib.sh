# Helpers for integration cases. Sourced by run-case.sh; each case is a function.
# Cases run on a real RDMA device: inside scripts/rxe-vm.sh, or on a host with RXE_ADDR
# set to an address served by an RDMA device.

T=$(mktemp -d)
trap 'cleanup' EXIT
# The harness starts as few processes as it can: in the TCG guest a fork and exec costs
# 30-60 ms of CPU (jq 1.6's, 300 ms), and while a case waits, the cases beside it want
# that CPU. Measured with process accounting over the plain pass, the harness's own
# processes (jq, python3, sleep, date, seq, grep) took half of the guest's CPU.
HARNESS_ROOT=$(cd "${BASH_SOURCE[0]%/*}/../.." && pwd)
mkfifo "$T/tick" && exec {TICK_FD}<> "$T/tick"

# tick [SECONDS]: a sleep that starts no process (a read that nothing ever answers).
tick() { read -r -t "${1:-0.05}" -u "$TICK_FD" || true; }

# jq: gojq where it is installed (scripts/install-deps.sh). Our filters mean the same to
# both; jq 1.6 compiles its builtins at every start, 300 ms in the guest against gojq's 40.
if command -v gojq > /dev/null; then jq() { gojq "$@"; }; fi
declare -a BACKGROUND=()
declare -a RESTORE=()

# restore COMMAND: run at exit (last registered first), to undo what a case broke on purpose.
restore() { RESTORE+=("$1"); }

cleanup() {
  local pid i
  for pid in "${BACKGROUND[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for ((i = ${#RESTORE[@]} - 1; i >= 0; i--)); do eval "${RESTORE[i]}" || echo "restore failed: ${RESTORE[i]}"; done
  record_case_cpu
  rm -rf "$T"
}

# record_case_cpu: with RDMAKIT_CASE_CPU_FILE set (tests/integration/ctest-stages.sh), one
# line "CASE CPU-SECONDS" for the case's processes, this shell and those it reaped (the
# tools it killed, reaped here). The suite's budget is CPU: where cases run side by side in
# the guest, a case's wall time says how long it waited, not what it cost the others.
record_case_cpu() {
  [[ -n ${RDMAKIT_CASE_CPU_FILE:-} ]] || return 0
  ((${#BACKGROUND[@]} == 0)) || wait "${BACKGROUND[@]}" 2> /dev/null
  # A builtin's output read back through a file: in a subshell, times would count the
  # subshell's own.
  times > "$T/.times" || return 0
  local -a shell children
  { read -r -a shell && read -r -a children; } < "$T/.times"
  local total=0 t
  for t in "${shell[@]}" "${children[@]}"; do
    [[ $t =~ ^([0-9]+)m([0-9]+)\.([0-9]+)s$ ]] || continue
    total=$((total + 10#${BASH_REMATCH[1]} * 60000 + 10#${BASH_REMATCH[2]} * 1000 + 10#${BASH_REMATCH[3]}))
  done
  printf '%s %d.%03d\n' "${CASE_NAME:-?}" $((total / 1000)) $((total % 1000)) >> "$RDMAKIT_CASE_CPU_FILE"
}

fail() {
  echo "FAIL: $*"
  local f
  for f in "$T"/*; do
    [[ -f $f && -s $f ]] || continue
    echo "----- ${f##*/}"
    tail -40 "$f"
  done
  exit 1
}
note() { echo "  $*"; }

require_device() {
  if [[ -z ${RXE_ADDR:-} ]] || ! ls /sys/class/infiniband/ 2>/dev/null | grep -q .; then
    echo "SKIP: no RDMA device (run inside scripts/rxe-vm.sh or set RXE_ADDR)"
    exit 77
  fi
}

# require_no_device: the case checks what a host without RDMA prints; skip where user space
# reaches a device (a uverbsN entry).
require_no_device() {
  if compgen -G '/sys/class/infiniband_verbs/uverbs*' > /dev/null; then
    echo "SKIP: this host has an RDMA device"
    exit 77
  fi
}

require_root() {
  [[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root to break and repair the host on purpose"; exit 77; }
}

# Ports: each case has a block of its own (RDMAKIT_PORT_BASE, set per case by
# tests/CMakeLists.txt), so that cases running side by side (ctest -j) never meet on one.
# By hand, a random block.
port_counter=${RDMAKIT_PORT_BASE:-$((20000 + RANDOM % 20000))}
next_port() { port_counter=$((port_counter + 1)); PORT=$port_counter; }

# poll_until SECONDS FAILURE COMMAND...: runs COMMAND every 0.1 s until it succeeds; fails
# the case with FAILURE when SECONDS pass first.
poll_until() {
  local seconds=$1 failure=$2 i
  shift 2
  for ((i = 0; i < seconds * 10; i++)); do
    "$@" && return 0
    tick 0.1
  done
  fail "$failure"
}

# rdma_res_has KIND PATTERN: a line of `rdma res show KIND` matches PATTERN (an extended
# regular expression that stays on its line); one process where a pipe into grep took two.
rdma_res_has() {
  local shown
  shown=$(rdma res show "$1" 2> /dev/null) || return 1
  [[ $'\n'$shown$'\n' =~ $2 ]]
}
listening_on() { rdma_res_has cm_id $'\n'"[^"$'\n'"]*state LISTEN [^"$'\n'"]*src-addr [^ "$'\n'"]*:$1 "; }
has_connected_qp() { rdma_res_has qp $'\n'"[^"$'\n'"]*state RTS [^"$'\n'"]* pid $1 "; }

# wait_listening PORT [SECONDS]: until an rdma_cm id listens on PORT (10 s at most by default).
wait_listening() {
  poll_until "${2:-10}" "nothing listens on port $1 after ${2:-10} s" listening_on "$1"
}

# wait_tcp_listening PORT [SECONDS]: until a TCP socket listens on PORT (perftest's servers
# without -R; 10 s at most by default).
tcp_listening() { [[ -n $(ss -Hltn "sport = :$1") ]]; }
wait_tcp_listening() {
  poll_until "${2:-10}" "nothing listens on TCP port $1 after ${2:-10} s" tcp_listening "$1"
}

# wait_for_line FILE PATTERN [SECONDS]: until PATTERN shows up in $T/FILE (10 s at most by default).
wait_for_line() {
  poll_until "${3:-10}" "'$2' did not appear in $1 within ${3:-10} s" grep -qs -- "$2" "$T/$1"
}

# wait_connected PID [SECONDS]: until PID has a queue pair in RTS (10 s at most by default).
wait_connected() {
  poll_until "${2:-10}" "pid $1 has no connected queue pair after ${2:-10} s" has_connected_qp "$1"
}

# start NAME COMMAND...: run in the background, output in $T/NAME.out and $T/NAME.err.
start() {
  local name=$1; shift
  "$@" > "$T/$name.out" 2> "$T/$name.err" &
  eval "PID_$name=$!"
  BACKGROUND+=("$!")
}

# finish NAME SECONDS: wait for a background command; sets RC (124 when it had to be killed).
finish() {
  local name=$1 seconds=$2 pid i
  eval "pid=\$PID_$name"
  for ((i = 0; i < seconds * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    tick 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    RC=124
  else
    RC=0
    wait "$pid" || RC=$?
  fi
}

# run NAME SECONDS COMMAND...: foreground with a time limit; sets RC and ELAPSED_MS.
run() {
  local name=$1 seconds=$2 started
  shift 2
  started=${EPOCHREALTIME/./}
  RC=0
  timeout -k 5 "$seconds" "$@" > "$T/$name.out" 2> "$T/$name.err" || RC=$?
  ELAPSED_MS=$(((${EPOCHREALTIME/./} - started) / 1000))
}

# expect_released PID WHAT: no RDMA resource (cm_id, QP, CQ, MR, PD) is left owned by PID.
expect_released() {
  local kind left
  for kind in cm_id qp cq mr pd; do
    left=$(rdma res show "$kind" 2> /dev/null | grep -c " pid $1 " || true)
    ((left == 0)) || fail "$2: $left $kind(s) of pid $1 still there"$'\n'"$(rdma res show "$kind" | grep " pid $1 ")"
  done
}

expect_rc() { [[ $RC -eq $1 ]] || fail "$2: exit $RC, expected $1"; }
expect_grep() { grep -q -- "$1" "$T/$2" || fail "'$1' not found in $2"; }
expect_jq() { jq -e "$1" "$T/$2" > /dev/null || fail "$2 does not satisfy: $1"; }

# expect_same_report A B: the reports in files A and B are the same but for their run time.
# One comparison in jq: gojq has no -S, and a sorted copy of each written with it came out
# empty, so that comparing the copies passed whatever the files held.
expect_same_report() {
  jq -e -n --slurpfile a "$T/$1" --slurpfile b "$T/$2" '($a[0] | del(.duration_s)) == ($b[0] | del(.duration_s))' \
    > /dev/null || fail "$2 differs from $1"
}

# expect_wait_bounded FILE SECONDS: the report's run, less the steps it finished and timed
# (cm_timings_ms and timings_ms: address lookup, resolve, connect, ...), took SECONDS at most.
# What a timeout bounds is the wait that gave up; under ASan beside a busy guest the steps
# before it have taken 2.3 s on their own, which a bound on the whole run wrongly charged to it.
expect_wait_bounded() {
  local waited
  waited=$(jq '.duration_s - ((([(.cm_timings_ms // {}), (.timings_ms // {}) | .[]] | add) // 0) / 1000)' "$T/$1")
  jq -e --argjson waited "$waited" "\$waited <= $2" -n > /dev/null ||
    fail "$1 waited $waited s beyond its timed set-up steps (run $(jq .duration_s "$T/$1") s), bound $2 s"
}

# expect_schema TOOL FILE: $T/FILE is a report that doc/schema/TOOL.schema.json accepts
# (tests/schema/schema_check.py: Debian's python3-jsonschema, draft 2020-12). The report is
# copied as it is now and checked later, because importing jsonschema takes 3 s of the
# guest's CPU. Under ctest (RDMAKIT_REPORT_QUEUE, set by tests/CMakeLists.txt) the copy
# joins the queue of every case's reports, which the run's last case checks in one go
# (reports_match_schemas, a fixture's cleanup); by hand, the case checks its own when it
# ends (check_schemas).
SCHEMA_PAIRS=()
schema_copies=0
expect_schema() {
  local folder=$T/schema-checked
  [[ -n ${RDMAKIT_REPORT_QUEUE:-} ]] && folder=$RDMAKIT_REPORT_QUEUE/$1
  mkdir -p "$folder"
  schema_copies=$((schema_copies + 1))
  local copy="$folder/$CASE_NAME.$schema_copies.$2"
  cp "$T/$2" "$copy" || fail "$2: no report to check against doc/schema/$1.schema.json"
  [[ -n ${RDMAKIT_REPORT_QUEUE:-} ]] || SCHEMA_PAIRS+=("$HARNESS_ROOT/doc/schema/$1.schema.json" "$copy")
}

# check_schemas: every report expect_schema queued matches its schema (run-case.sh calls it
# when the case function returns).
check_schemas() {
  local out
  ((${#SCHEMA_PAIRS[@]} > 0)) || return 0
  out=$("${RDMAKIT_PYTHON:-/usr/bin/python3}" "$HARNESS_ROOT/tests/schema/schema_check.py" \
    "${SCHEMA_PAIRS[@]}" 2>&1) || fail "reports that do not match their schema (doc/schema):"$'\n'"$out"
}

# reports_queue_emptied: the report queue starts empty (the fixture's setup).
case_reports_queue_emptied() {
  rm -rf "${RDMAKIT_REPORT_QUEUE:?}" && mkdir -p "$RDMAKIT_REPORT_QUEUE" || fail "cannot empty $RDMAKIT_REPORT_QUEUE"
}

# reports_match_schemas: every report the run's cases queued matches its tool's schema;
# a report's name says the case that wrote it (CASE.N.FILE). With RDMAKIT_REPORTS_ON_HOST
# set (scripts/test.sh, in the guest) the queue is left for the host, which runs this same
# case once the guest has ended: the check is Python's, which the TCG guest ran for 20 s
# a pass and the host runs in under a second.
case_reports_match_schemas() {
  local report tool
  if [[ -n ${RDMAKIT_REPORTS_ON_HOST:-} ]]; then
    note "$(find "${RDMAKIT_REPORT_QUEUE:?}" -type f | wc -l) reports left in $RDMAKIT_REPORT_QUEUE for the host's check"
    return 0
  fi
  for report in "${RDMAKIT_REPORT_QUEUE:?}"/*/*; do
    [[ -f $report ]] || continue
    tool=${report%/*}
    SCHEMA_PAIRS+=("$HARNESS_ROOT/doc/schema/${tool##*/}.schema.json" "$report")
  done
  note "$((${#SCHEMA_PAIRS[@]} / 2)) reports from $RDMAKIT_REPORT_QUEUE"
}
