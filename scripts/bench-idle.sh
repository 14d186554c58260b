#!/usr/bin/env bash
# bench-idle.sh [BIN_DIR [SECONDS]]: how often an idle send_bw server wakes up. Starts a
# send_bw server on RXE_ADDR with no client for SECONDS (default 10) under `strace -f -c` and
# prints the system calls per second: the waits (poll, ppoll, epoll_wait, nanosleep,
# clock_nanosleep) and all of them. An idle server should sleep until a connection request
# or Ctrl-C, not wake on a timer. Run it inside scripts/rxe-vm.sh (which sets RXE_ADDR), as
# scripts/bench-compare.sh:
#   scripts/rxe-vm.sh . scripts/bench-idle.sh build/bin
# Not a timed test: nothing here passes or fails on the figures.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$root/build/bin}" && pwd)
seconds=${2:-10}
addr=${RXE_ADDR:?set RXE_ADDR (scripts/rxe-vm.sh does) to an address on the RDMA device}
command -v strace > /dev/null || { echo "strace missing (Debian package strace)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

strace -f -c -o "$work/counts" "$bin/send_bw" --bind "$addr" -p 18650 > "$work/out" 2>&1 &
tracer=$!
sleep "$seconds"
# Ctrl-C to the server itself (strace's child): it stops as a user's Ctrl-C stops it, and
# strace writes its counts when it exits.
server=$(pgrep -P "$tracer" send_bw) || { echo "send_bw did not start:"; cat "$work/out"; exit 1; }
kill -INT "$server"
wait "$tracer" || true

# strace -c's table: "% time seconds usecs/call calls [errors] syscall"; calls is the
# fourth field, the name the last; the "total" row ends it.
awk -v bin="$bin" -v seconds="$seconds" '
  $NF == "total" { total = $4 }
  $NF ~ /^(poll|ppoll|epoll_wait|epoll_pwait|nanosleep|clock_nanosleep)$/ { waits[$NF] = $4; sum += $4 }
  END {
    printf "%s: idle send_bw -s for %d s\n", bin, seconds
    for (name in waits) printf "  %-16s %8d calls %10.1f /s\n", name, waits[name], waits[name] / seconds
    printf "  %-16s %8d calls %10.1f /s\n", "waits", sum, sum / seconds
    printf "  %-16s %8d calls %10.1f /s\n", "all syscalls", total, total / seconds
  }' "$work/counts"
