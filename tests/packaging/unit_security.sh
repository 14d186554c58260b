#!/usr/bin/env bash
# unit_security.sh UNIT.in PROGRAM THRESHOLD: the systemd unit we ship, made from UNIT.in with
# PROGRAM (the built tool) in ExecStart, bounds memory, tasks and descriptors (MemoryMax,
# TasksMax, LimitNOFILE), passes systemd-analyze verify and scores at most
# THRESHOLD on systemd-analyze security's exposure scale (0 safest, 10 least safe), both
# offline: no systemd needs to run here. That the units start and keep their promises under a
# real systemd is tests/packaging/units_under_systemd.sh's (the suite's installed packages).
set -euo pipefail
template=$1 program=$2 threshold=$3
command -v systemd-analyze > /dev/null || { echo "systemd-analyze not found (scripts/install-deps.sh installs systemd)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
name=${template##*/}
unit=$tmp/${name%.in}
sed -e "s|@RDMAKIT_[A-Z]*_PATH@|$program|" -e "s|@RDMAKIT_[A-Z]*_PROGRAM@|${program##*/}|" "$template" > "$unit"
if grep -q '@[A-Z_]*@' "$unit"; then
  echo "$name: a placeholder left unfilled: $(grep -o '@[A-Z_]*@' "$unit" | head -n 1)"
  exit 1
fi
# Bounded whatever its peers do: memory, threads, descriptors.
for limit in MemoryMax TasksMax LimitNOFILE; do
  grep -q "^$limit=" "$unit" || { echo "$name: no $limit="; exit 1; }
done
# --man=no: the Documentation= pages are not installed here.
systemd-analyze verify --man=no "$unit"
report=$(systemd-analyze security --offline=yes --no-pager "$unit" 2>&1) || true
score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\) .*/\1/p' <<<"$report")
[[ -n $score ]] || { echo "$name: no exposure level in systemd-analyze security's output:"; echo "$report"; exit 1; }
echo "$name: exposure $score (at most $threshold)"
grep '✗' <<<"$report" || true
awk -v score="$score" -v most="$threshold" 'BEGIN { exit !(score <= most) }' ||
  { echo "$name: exposure $score is above $threshold"; exit 1; }
