#!/usr/bin/env bash
# bench-pingmesh.sh [BIN_DIR [SECONDS]]: what rdma_pingmesh costs a node, and what its round
# trip says against send_bw's latency test on the same path. Eight nodes are eight addresses
# on the RDMA netdev (10.55.0.11-18, added and removed again), each probing the seven others:
#   all at 10/s     no topology: 7 targets at --rate 10 (the default rate);
#   two leaves      a topology of two leaves of four: 3 targets under the node's leaf at 10/s
#                   and 2 sampled under the other at 1/s (the defaults with --topology);
# each SECONDS long (default 60), window 10 s; printed per node: CPU seconds (user + system)
# per second of run, as a percentage of one core, and the median over the nodes. Then the
# round trip between two of them: rdma_pingmesh's network RTT p50/p99 at 50 and at 1000 probes
# a second (48 bytes, UD, sleeping between probes) and send_bw --lat's p50/p99 (64 bytes, RC
# SEND, busy polling, and with -e, sleeping on the completion channel as pingmesh does).
# Run it inside scripts/rxe-vm.sh (which sets RXE_NETDEV):
#   scripts/rxe-vm.sh . scripts/bench-pingmesh.sh build/bin
# A benchmark, not a test: nothing here passes or fails on the figures.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$root/build/bin}" && pwd)
seconds=${2:-60}
netdev=${RXE_NETDEV:?set RXE_NETDEV (scripts/rxe-vm.sh does) to the RDMA netdev}
work=$(mktemp -d)
addresses=()
for n in $(seq 11 18); do addresses+=("10.55.0.$n"); done
cleanup() {
  local address
  for address in "${addresses[@]}"; do ip addr del "$address/24" dev "$netdev" 2> /dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
: > "$work/pinglist"
: > "$work/topology"
for n in "${!addresses[@]}"; do
  ip addr add "${addresses[$n]}/24" dev "$netdev"
  echo "${addresses[$n]} node$n" >> "$work/pinglist"
  echo "node$n leaf$((n / 4))" >> "$work/topology"
done
sleep 1  # the GIDs of the new addresses

# run_mesh NAME FLAGS...: every node for SECONDS; prints each node's CPU and the median.
run_mesh() {
  local name=$1 n pids=() file
  file=${1//[^a-z0-9]/_}
  shift
  for n in "${!addresses[@]}"; do
    "$bin/rdma_pingmesh" --pinglist "$work/pinglist" --name "node$n" -p 7490 --duration "$seconds" --json "$@" \
      > "$work/$file.$n.out" 2> "$work/$file.$n.err" &
    pids+=("$!")
  done
  for n in "${pids[@]}"; do wait "$n" || true; done
  local cpu=()
  for n in "${!addresses[@]}"; do
    cpu+=("$(tail -n 1 "$work/$file.$n.out" | jq '.pingmesh.cpu_seconds / .duration_s * 100 | . * 100 | round / 100')")
  done
  local targets sent
  targets=$(tail -n 1 "$work/$file.0.out" | jq '.pingmesh.paths | length')
  sent=$(tail -n 1 "$work/$file.0.out" | jq '[.pingmesh.paths[].sent] | add')
  echo "$name: node0 probed $targets targets, sent $sent probes; CPU % of one core per node: ${cpu[*]}"
  printf '%s\n' "${cpu[@]}" | sort -n | awk '{v[NR] = $1} END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print "  median " m "%"}'
}

echo "== rdma_pingmesh CPU, 8 nodes, ${seconds} s each"
run_mesh "all at 10/s" --rate 10
run_mesh "two leaves" --topology "$work/topology"

echo "== round trip node0 -> node1: rdma_pingmesh against send_bw --lat"
# At 50 probes a second both guests' CPUs sleep between probes and every probe pays their
# wake-up; at 1000 a second they hardly sleep (send_bw --lat runs back to back).
for rate in 50 1000; do
  "$bin/rdma_pingmesh" --pinglist "$work/pinglist" --name node1 -p 7491 --duration 25 --window 20 > /dev/null 2>&1 &
  peer=$!
  "$bin/rdma_pingmesh" --pinglist "$work/pinglist" --name node0 -p 7491 --duration 22 --window 20 --rate "$rate" --json \
    > "$work/rtt.out" 2> /dev/null || true
  wait "$peer" || true
  jq -s -r --arg rate "$rate" '[.[] | select(.event == "window" and .address == "10.55.0.12")] | max_by(.answered) |
    "rdma_pingmesh (UD, 48 B, sleeping, \($rate)/s): RTT p50 \(.rtt_us.p50) us, p99 \(.rtt_us.p99) us, responder delay p50 \(.responder_delay_us.p50) us, \(.answered) probes"' \
    "$work/rtt.out"
done
for mode in busy events; do
  flags=()
  [[ $mode == events ]] && flags=(-e)
  "$bin/send_bw" --bind "${addresses[1]}" -p 7492 --lat -n 1000 "${flags[@]}" > /dev/null 2>&1 &
  server=$!
  sleep 1
  "$bin/send_bw" "${addresses[1]}" --bind "${addresses[0]}" -p 7492 --lat -n 1000 -s 64 "${flags[@]}" --json \
    > "$work/lat.$mode.json" 2> /dev/null || true
  wait "$server" || true
  jq -r --arg mode "$mode" '.rows[0] | "send_bw --lat (RC, 64 B, \($mode)): round trip p50 \(.t_median_us * 2) us, p99 \(.t_p99_us * 2) us (its own figures are half a round trip, as perftest'"'"'s)"' \
    "$work/lat.$mode.json" 2> /dev/null || echo "send_bw --lat ($mode): no report"
done
