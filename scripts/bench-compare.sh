#!/usr/bin/env bash
# bench-compare.sh [BIN_DIR [OUT_JSON]]: send_bw against perftest's ib_send_bw on one RDMA
# device in loopback (run it inside scripts/rxe-vm.sh, or on a host with RXE_ADDR set).
# For 64 B, 4 KiB and 64 KiB it alternates ours and ib_send_bw RUNS times each (default 5),
# prints the medians and ours / perftest, and writes every run to OUT_JSON.
#   scripts/rxe-vm.sh . scripts/bench-compare.sh build/bin build/bench.json
# Not a timed test: numbers depend on the machine; nothing here passes or fails on them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$root/build/bin}" && pwd)
out=${2:-$root/build/bench-compare.json}
addr=${RXE_ADDR:?set RXE_ADDR (scripts/rxe-vm.sh does) to an address on the RDMA device}
dev=${RXE_DEV:-$(ls /sys/class/infiniband | head -1)}
runs=${RUNS:-5}
iters=${ITERS:-5000}
command -v ib_send_bw > /dev/null || { echo "ib_send_bw missing (Debian package perftest)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port=18600

# wait_port PORT: until something listens on PORT (rdma_cm id or TCP socket), 10 s at most.
wait_port() {
  local i
  for i in $(seq 100); do
    if rdma res show cm_id 2> /dev/null | grep -q "state LISTEN .*:$1 " ||
      grep -q ":$(printf '%04X' "$1") 00000000:0000 0A" /proc/net/tcp 2> /dev/null; then
      return 0
    fi
    sleep 0.1
  done
  echo "nothing listens on $1" >&2
  return 1
}

# ours SIZE: MiB/s average and Mpps of one send_bw run.
ours() {
  port=$((port + 1))
  "$bin/send_bw" -b "$addr" -p "$port" --accept-timeout 30 > "$work/server.json" 2>&1 &
  local server=$!
  wait_port "$port"
  "$bin/send_bw" "$addr" -p "$port" -s "$1" -n "$iters" --json > "$work/client.json"
  wait "$server"
  jq -r '.rows[0] | "\(.bw_average_mib_per_s) \(.message_rate_mpps)"' "$work/client.json"
}

# perftest SIZE: the same two numbers from ib_send_bw's table (MB/sec there is 2^20 bytes/s).
perftest() {
  port=$((port + 1))
  ib_send_bw -d "$dev" -p "$port" -s "$1" -n "$iters" -F > "$work/pt_server.txt" 2>&1 &
  local server=$!
  wait_port "$port"
  ib_send_bw -d "$dev" -p "$port" -s "$1" -n "$iters" -F "$addr" > "$work/pt_client.txt" 2>&1
  wait "$server" || true
  awk -v size="$1" '$1 == size && NF >= 5 { print $4, $5; found = 1 } END { exit !found }' "$work/pt_client.txt"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo '[' > "$out"
first=1
printf '%-8s %14s %14s %8s %12s %12s %8s\n' size "ours MiB/s" "perf MiB/s" ratio "ours Mpps" "perf Mpps" ratio
for size in 64 4096 65536; do
  : > "$work/ours.txt"
  : > "$work/perf.txt"
  for run in $(seq "$runs"); do
    # No process substitution: the VM guest has no /dev/fd.
    result=$(ours "$size")
    bw=${result% *} rate=${result#* }
    echo "$bw $rate" >> "$work/ours.txt"
    result=$(perftest "$size")
    pbw=${result% *} prate=${result#* }
    echo "$pbw $prate" >> "$work/perf.txt"
    [[ $first == 1 ]] || echo ',' >> "$out"
    first=0
    printf '{"size":%s,"run":%s,"ours_mib_per_s":%s,"ours_mpps":%s,"perftest_mib_per_s":%s,"perftest_mpps":%s}\n' \
      "$size" "$run" "$bw" "$rate" "$pbw" "$prate" >> "$out"
  done
  ob=$(cut -d' ' -f1 "$work/ours.txt" | median)
  orate=$(cut -d' ' -f2 "$work/ours.txt" | median)
  pb=$(cut -d' ' -f1 "$work/perf.txt" | median)
  prate=$(cut -d' ' -f2 "$work/perf.txt" | median)
  printf '%-8s %14.2f %14.2f %8.3f %12.4f %12.4f %8.3f\n' "$size" "$ob" "$pb" "$(jq -n "$ob / $pb")" \
    "$orate" "$prate" "$(jq -n "$orate / $prate")"
done
echo ']' >> "$out"
echo "all runs: $out"
