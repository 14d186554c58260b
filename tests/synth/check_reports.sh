#!/usr/bin/env bash
# check_reports.sh MESH_SYNTH PYTHON SCHEMA_CHECK SCHEMA OUT_DIR: writes a 16-rank synthetic
# report of each shape mesh_synth makes (clean, a slow node, a failed node with its verdict,
# two NICs a host, the latency test) into OUT_DIR and checks them all against SCHEMA in one
# call of SCHEMA_CHECK (tests/schema/schema_check.py). ctest: schema.synth_reports.
set -euo pipefail
synth=$1 python=$2 check=$3 schema=$4 out=$5
mkdir -p "$out"
pairs=()
while read -r -a run; do
  name=${run[0]}
  "$synth" --ranks 16 --hosts-per-leaf 4 --seed 5 --out "$out/$name.json" "${run[@]:1}" >/dev/null
  pairs+=("$schema" "$out/$name.json")
done <<'RUNS'
none --fault none
node --fault node
failed --fault failed
nic --fault nic --ranks-per-host 2
leaf --fault leaf
lat --fault link --test lat
RUNS
"$python" "$check" "${pairs[@]}"
