#!/usr/bin/env bash
# bench-mesh-live.sh [BIN_DIR [OUT_JSON]]: the live rdma_mesh under mpirun on one RDMA
# device (issue 36's benchmarks; run it inside scripts/rxe-vm.sh, which sets RXE_ADDR, or on
# a host with RXE_ADDR set). Two parts:
#   overhead  2 ranks against a send_bw pair: `mpirun -np 2 rdma_mesh --one-way` (the one
#             direction 0 -> 1, --retest 0) and a send_bw server and client, both on RXE_ADDR,
#             at each SIZExCOUNT of SPECS (default "4096x5000 65536x1000"), RUNS times each
#             (default 5), interleaved, each pair of runs starting with the other tool in
#             turn. It compares rdma_mesh's pairs[0].figure with send_bw's
#             rows[0].bw_average_mib_per_s (both MiB/s over the same messages, after the same
#             100 unmeasured ones) and prints their medians and the ratio (target >= 0.95,
#             not asserted), the median of each interleaved pair's own ratio, and the wall
#             time of each (mpirun's start-up against two processes').
#   rounds    the per-round cost of the live tool (barriers, the exchange of each phase's
#             observations, the analysis and report after each round, and the connection
#             set-up of each direction) at each rank count of ROUND_RANKS (default "2 4 8"):
#             `rdma_mesh -s 64 -n 1 --warmup 0 --retest 0` (one 64-byte message a direction,
#             N-1 rounds, both directions), ROUND_RUNS times (default 3), with --log-level info:
#             from the first rank's "round 1 of M" line to mpirun's exit, over M rounds. That
#             tail holds MPI's finalize and the report too, so it is an upper bound, loosest at
#             2 ranks (one round). Also the whole mpirun wall time over M. The last run's log
#             of each rank count is kept beside OUT_JSON (NAME-rounds-N.log), and that of one
#             more run at debug level for each of DEBUG_RANKS (default 2; NAME-rounds-N-debug.log).
# Ranks share the guest's CPUs (two under TCG, --oversubscribe): at 8 ranks the figure is
# mostly CPU contention, not the tool's. The guest's load average is kept with the figures.
# Prints the medians, and writes to OUT_JSON {"address", "cpus", "load_before",
# "load_after", "overhead": [run...], "rounds": [run...], "medians": {"overhead": [...],
# "rounds": [...]}}.
#   scripts/rxe-vm.sh --name benchmesh --timeout 900 . scripts/bench-mesh-live.sh build/bin build/bench-mesh-live.json
# Not a timed test: numbers depend on the machine; nothing here passes or fails on them.
# SECTIONS="overhead rounds" (the default): the parts to run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$root/build/bin}" && pwd)
out=${2:-$root/build/bench-mesh-live.json}
addr=${RXE_ADDR:?set RXE_ADDR (scripts/rxe-vm.sh does) to an address on the RDMA device}
runs=${RUNS:-5}
round_runs=${ROUND_RUNS:-3}
sections=${SECTIONS:-overhead rounds}
command -v mpirun > /dev/null || { echo "mpirun missing (Debian package openmpi-bin)"; exit 77; }
[[ -x $bin/rdma_mesh ]] || { echo "$bin/rdma_mesh not built (no MPI at configure time)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port=18700

# As tests/integration/mesh_cases.sh runs it in the guest: Open MPI as root, TCP between
# the ranks (shared-memory segment files have failed to unlink in the guest's fresh /tmp),
# more ranks than CPUs, none bound.
mesh_mpirun=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "OMPI_MCA_btl=self,tcp"
  mpirun --oversubscribe --bind-to none)

# wait_port PORT: until an rdma_cm id listens on PORT, 10 s at most.
wait_port() {
  local _
  for _ in $(seq 100); do
    rdma res show cm_id 2> /dev/null | grep -q "state LISTEN .*:$1 " && return 0
    sleep 0.1
  done
  echo "nothing listens on $1" >&2
  return 1
}

now() { date +%s.%N; }
elapsed_ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) * 1000 }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# mesh_run SIZE COUNT: "MiB/s wall_ms" of 2-rank rdma_mesh, direction 0 -> 1 only.
mesh_run() {
  local started ended
  started=$(now)
  "${mesh_mpirun[@]}" -np 2 "$bin/rdma_mesh" --bind "$addr" -p "$port" --one-way --retest 0 -s "$1" -n "$2" \
    --quiet --json --json-file "$work/mesh.json" > /dev/null 2> "$work/mesh.err" ||
    { echo "mpirun -np 2 rdma_mesh -s $1 -n $2 failed:" >&2; cat "$work/mesh.err" >&2; return 1; }
  ended=$(now)
  jq -er '.pairs[] | select(.test == "bw" and .source == 0 and .destination == 1) | .figure | numbers' \
    "$work/mesh.json" | tr '\n' ' ' ||
    { echo "rdma_mesh -s $1 -n $2: no figure for 0 -> 1 in its report" >&2; return 1; }
  elapsed_ms "$started" "$ended"
}

# send_bw_run SIZE COUNT: "MiB/s wall_ms" of a send_bw server and client on $addr.
send_bw_run() {
  local started ended server
  started=$(now)
  "$bin/send_bw" --bind "$addr" -p "$port" --accept-timeout 30 > "$work/server.txt" 2>&1 &
  server=$!
  wait_port "$port"
  "$bin/send_bw" "$addr" -p "$port" -s "$1" -n "$2" --json > "$work/client.json"
  wait "$server"
  ended=$(now)
  jq -er '.rows[0].bw_average_mib_per_s | numbers' "$work/client.json" | tr '\n' ' '
  elapsed_ms "$started" "$ended"
}

# pair_order RUN: rdma_mesh first on odd runs, send_bw first on even ones, so that what a
# run leaves behind (rxe's deferred teardown, warmed caches) falls on both alike.
pair_order() { if (($1 % 2)); then echo mesh send_bw; else echo send_bw mesh; fi; }

# round_run RANKS: the figures of one tiny full mesh (below).
round_run() {
  local ranks=$1 started ended ended_clock starts rounds status=0
  started=$(now)
  "${mesh_mpirun[@]}" -np "$ranks" "$bin/rdma_mesh" --bind "$addr" -p "$port" -s 64 -n 1 --warmup 0 --retest 0 \
    --log-level "${ROUND_LOG_LEVEL:-info}" --json --json-file "$work/rounds.json" > /dev/null 2> "$work/rounds.err" ||
    status=$?
  ended=$(now)
  ended_clock=$(date +%T.%N)
  # Exit 1 is a finished mesh with outliers: one 64-byte message is a noisy figure.
  if ((status > 1)) || ! rounds=$(jq -er 'select(.finished) | .rounds_completed' "$work/rounds.json" 2> /dev/null); then
    echo "mpirun -np $ranks rdma_mesh: exit $status, no finished report:" >&2
    cat "$work/rounds.err" >&2
    return 1
  fi
  # The log's local [HH:MM:SS.ffffff] and $(date +%T.%N), in seconds since midnight (a run
  # across midnight comes out wrong).
  # The earliest rank's "round K of M" line of each K: the first and the last round's start.
  starts=$(awk 'match($0, /round [0-9]+ of /) && match($0, /[0-9][0-9]:[0-9][0-9]:[0-9][0-9]\.[0-9]+/) {
      split(substr($0, RSTART, RLENGTH), t, ":"); s = t[1] * 3600 + t[2] * 60 + t[3]
      match($0, /round [0-9]+ of /); k = substr($0, RSTART + 6, RLENGTH - 10) + 0
      if (!(k in at) || s < at[k]) at[k] = s; if (k > last) last = k }
    END { if (!(1 in at)) exit 1; printf "%.6f %.6f %d", at[1], at[last], last }' "$work/rounds.err") ||
    { echo "rdma_mesh -np $ranks: no \"round 1 of\" line in its log" >&2; return 1; }
  # rounds, ms a round from round 1's start to mpirun's exit, ms between round starts (-1
  # for one round), ms a round of the whole command, the whole command's ms.
  awk -v rounds="$rounds" -v starts="$starts" -v started="$started" -v ended="$ended" -v clock="$ended_clock" 'BEGIN {
    split(clock, t, ":"); exit_at = t[1] * 3600 + t[2] * 60 + t[3]; split(starts, r, " ")
    printf "%d %.1f %.1f %.1f %.1f\n", rounds, (exit_at - r[1]) * 1000 / rounds,
      (r[3] > 1 ? (r[2] - r[1]) * 1000 / (r[3] - 1) : -1), (ended - started) * 1000 / rounds, (ended - started) * 1000 }'
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "guest: $(nproc) CPU(s), load average $load_before; rdma_mesh and send_bw on $addr"
: > "$work/overhead_runs.jsonl"
: > "$work/overhead_medians.jsonl"
: > "$work/rounds_runs.jsonl"
: > "$work/rounds_medians.jsonl"
if [[ " $sections " == *" overhead "* ]]; then
  echo
  printf '%-12s %14s %14s %8s %11s %14s %14s\n' "size x count" "mesh MiB/s" "send_bw MiB/s" ratio "pair ratio" \
    "mesh wall ms" "send_bw wall ms"
  for spec in ${SPECS:-4096x5000 65536x1000}; do
    size=${spec%x*} count=${spec#*x}
    : > "$work/mesh.txt"
    : > "$work/send_bw.txt"
    for run in $(seq "$runs"); do
      for side in $(pair_order "$run"); do
        # No process substitution: the VM guest has no /dev/fd.
        port=$((port + 10))
        if [[ $side == mesh ]]; then
          result=$(mesh_run "$size" "$count")
          read -r mbw mwall <<< "$result"
          echo "$result" >> "$work/mesh.txt"
        else
          result=$(send_bw_run "$size" "$count")
          read -r sbw swall <<< "$result"
          echo "$result" >> "$work/send_bw.txt"
        fi
      done
      printf '{"size":%s,"count":%s,"run":%s,"mesh_mib_per_s":%s,"mesh_wall_ms":%s,"send_bw_mib_per_s":%s,"send_bw_wall_ms":%s}\n' \
        "$size" "$count" "$run" "$mbw" "$mwall" "$sbw" "$swall" >> "$work/overhead_runs.jsonl"
    done
    mbw=$(cut -d' ' -f1 "$work/mesh.txt" | median)
    mwall=$(cut -d' ' -f2 "$work/mesh.txt" | median)
    sbw=$(cut -d' ' -f1 "$work/send_bw.txt" | median)
    swall=$(cut -d' ' -f2 "$work/send_bw.txt" | median)
    ratio=$(jq -n "$mbw / $sbw")
    # The median of each interleaved pair's own ratio: a pair's two runs share the host's
    # load at the time, which on a busy machine moves both tools by more than they differ.
    pair_ratio=$(paste -d' ' "$work/mesh.txt" "$work/send_bw.txt" | awk '{ print $1 / $3 }' | median)
    printf '%-12s %14.2f %14.2f %8.3f %11.3f %14.0f %14.0f\n' "$spec" "$mbw" "$sbw" "$ratio" "$pair_ratio" "$mwall" "$swall"
    printf '{"size":%s,"count":%s,"runs":%s,"mesh_mib_per_s":%s,"send_bw_mib_per_s":%s,"ratio":%s,"pair_ratio_median":%s,"mesh_wall_ms":%s,"send_bw_wall_ms":%s}\n' \
      "$size" "$count" "$runs" "$mbw" "$sbw" "$ratio" "$pair_ratio" "$mwall" "$swall" >> "$work/overhead_medians.jsonl"
  done
  echo "ratio: rdma_mesh / send_bw bandwidth, of the medians (target >= 0.95); pair ratio: the median of each"
  echo "interleaved pair's ratio; wall: the whole command, mpirun's start-up included"
fi
if [[ " $sections " == *" rounds "* ]]; then
  echo
  printf '%-6s %7s %16s %16s %18s %11s\n' ranks rounds "ms/round (exit)" "ms/round (starts)" "ms/round (mpirun)" \
    "mpirun ms"
  for ranks in ${ROUND_RANKS:-2 4 8}; do
    : > "$work/round.txt"
    for run in $(seq "$round_runs"); do
      port=$((port + 10))
      result=$(round_run "$ranks")
      echo "$result" >> "$work/round.txt"
      read -r rounds per_round between wall_per_round wall <<< "$result"
      cp "$work/rounds.err" "${out%.json}-rounds-$ranks.log"
      printf '{"ranks":%s,"run":%s,"rounds":%s,"ms_per_round":%s,"ms_between_round_starts":%s,"wall_ms_per_round":%s,"wall_ms":%s,"load":"%s"}\n' \
        "$ranks" "$run" "$rounds" "$per_round" "$(jq -n "$between | if . < 0 then null else . end")" "$wall_per_round" \
        "$wall" "$(cut -d' ' -f1 /proc/loadavg)" \
        >> "$work/rounds_runs.jsonl"
    done
    per_round=$(cut -d' ' -f2 "$work/round.txt" | median)
    between=$(cut -d' ' -f3 "$work/round.txt" | median)
    wall_per_round=$(cut -d' ' -f4 "$work/round.txt" | median)
    wall=$(cut -d' ' -f5 "$work/round.txt" | median)
    between_text=$(jq -rn "$between | if . < 0 then \"-\" else . * 10 | round / 10 end")
    printf '%-6s %7s %16.1f %16s %18.1f %11.0f\n' "$ranks" "$rounds" "$per_round" "$between_text" "$wall_per_round" "$wall"
    printf '{"ranks":%s,"rounds":%s,"runs":%s,"ms_per_round":%s,"ms_between_round_starts":%s,"wall_ms_per_round":%s,"wall_ms":%s}\n' \
      "$ranks" "$rounds" "$round_runs" "$per_round" "$(jq -n "$between | if . < 0 then null else . end")" \
      "$wall_per_round" "$wall" >> "$work/rounds_medians.jsonl"
  done
  # One more run a rank count of DEBUG_RANKS (default 2), logged at debug level, not in the
  # medians: where a round's time goes, phase by phase.
  for ranks in ${DEBUG_RANKS-2}; do
    port=$((port + 10))
    ROUND_LOG_LEVEL=debug round_run "$ranks" > /dev/null
    cp "$work/rounds.err" "${out%.json}-rounds-$ranks-debug.log"
  done
  echo "ms/round (-s 64 -n 1, both directions, connection set-up included): (exit) from the first \"round 1 of\""
  echo "log line to mpirun's exit, over the rounds; (starts) between the first and the last round's start;"
  echo "(mpirun) the whole command over the rounds, MPI's start-up included"
fi
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo "guest load average after: $load_after"

jq -n --arg addr "$addr" --argjson cpus "$(nproc)" --arg before "$load_before" --arg after "$load_after" \
  --slurpfile ov "$work/overhead_runs.jsonl" --slurpfile ovm "$work/overhead_medians.jsonl" \
  --slurpfile rr "$work/rounds_runs.jsonl" --slurpfile rrm "$work/rounds_medians.jsonl" \
  '{address: $addr, cpus: $cpus, load_before: $before, load_after: $after, overhead: $ov, rounds: $rr,
    medians: {overhead: $ovm, rounds: $rrm}}' > "$out"
echo "all runs: $out"
