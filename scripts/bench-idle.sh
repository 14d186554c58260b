#!/usr/bin/env bash
# bench-idle.sh [BIN_DIR [SECONDS]]: how often an idle send_bw server wakes up, in two
# figures, each SECONDS long (default 10) under `strace -f -c`:
#   no client      a send_bw server on RXE_ADDR that nobody connects to;
#   connected idle a `send_bw -e` server with one client that sends a 64-byte message twice
#                  a second (--rate-limit 2 --rate-units p) for SECONDS.
# Each prints the server's system calls per second: the waits (poll, ppoll, epoll_wait,
# nanosleep, clock_nanosleep) and all of them. An idle server should sleep until a
# connection request, a completion, a CM event or Ctrl-C, not wake on a timer. Run it inside
# scripts/rxe-vm.sh (which sets RXE_ADDR), as scripts/bench-compare.sh:
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

# trace_server NAME PORT SERVER_FLAGS [CLIENT_FLAGS]: the server under strace for SECONDS,
# with a client run with CLIENT_FLAGS beside it when given; prints the figure NAME.
trace_server() {
  local name=$1 port=$2 server_flags=$3 client_flags=${4:-}
  local counts="$work/$port.counts" tracer server started ended
  started=$(date +%s.%N)
  # shellcheck disable=SC2086 # the flags are word lists
  strace -f -c -o "$counts" "$bin/send_bw" --bind "$addr" -p "$port" $server_flags > "$work/$port.out" 2>&1 &
  tracer=$!
  if [ -n "$client_flags" ]; then
    sleep 1
    # shellcheck disable=SC2086
    "$bin/send_bw" "$addr" -p "$port" $client_flags > "$work/$port.client" 2>&1 ||
      { echo "the client failed:"; cat "$work/$port.client"; }
  else
    sleep "$seconds"
  fi
  # Ctrl-C to the server itself (strace's child): it stops as a user's Ctrl-C stops it, and
  # strace writes its counts when it exits.
  server=$(pgrep -P "$tracer" send_bw) || { echo "send_bw did not start:"; cat "$work/$port.out"; exit 1; }
  kill -INT "$server"
  wait "$tracer" || true
  ended=$(date +%s.%N)

  # strace -c's table: "% time seconds usecs/call calls [errors] syscall"; calls is the
  # fourth field, the name the last; the "total" row ends it. Rates are over the server's
  # whole traced life (start to Ctrl-C).
  awk -v bin="$bin" -v name="$name" -v started="$started" -v ended="$ended" '
    $NF == "total" { total = $4 }
    $NF ~ /^(poll|ppoll|epoll_wait|epoll_pwait|nanosleep|clock_nanosleep)$/ { waits[$NF] = $4; sum += $4 }
    END {
      seconds = ended - started
      printf "%s: %s, server traced %.1f s\n", bin, name, seconds
      for (w in waits) printf "  %-16s %8d calls %10.1f /s\n", w, waits[w], waits[w] / seconds
      printf "  %-16s %8d calls %10.1f /s\n", "waits", sum, sum / seconds
      printf "  %-16s %8d calls %10.1f /s\n", "all syscalls", total, total / seconds
    }' "$counts"
}

trace_server "no client (send_bw -s)" 18650 ""
trace_server "connected idle (send_bw -e, client at 2 messages/s)" 18651 "-e" \
  "-s 64 -D $seconds --warmup 1 --rate-limit 2 --rate-units p"
