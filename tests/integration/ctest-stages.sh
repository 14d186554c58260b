#!/usr/bin/env bash
# ctest-stages.sh NAME|BUILD_DIR|LABEL_REGEX|JOBS[|READY_FILE] ...: runs ctest once per
# argument, one after the other (in the guest, or on any host with a device), each with
# LABEL_REGEX and JOBS cases at a time. With READY_FILE, the run first waits until that file
# exists (the build is still being made, beside this: scripts/test.sh's build-tsan), 30
# minutes at most; READY_FILE.failed says the build failed, and the run fails at once.
# After each run it prints the run's slowest cases, its costliest in CPU, and one line
#   stage-time: SECONDS STATUS NAME
# which scripts/test.sh adds to its table of stage times. Exits 1 when any run failed.
# Each run has a test tree of its own, BUILD_DIR/ctest-runs/NAME (a copy of the build's
# CTestTestfile.cmake files, whose paths are absolute): ctest keeps its Testing/ folder
# (LastTest.log, the cost data) beside the tree it runs, and the suite runs the pair cases
# in one build folder while another guest and this host run other cases of it.
set -uo pipefail
status=0
for spec in "$@"; do
  IFS='|' read -r name build labels jobs ready <<< "$spec"
  if [[ -n ${ready:-} ]]; then
    waited=$SECONDS
    until [[ -e $ready || -e $ready.failed ]] || ((SECONDS - waited > 1800)); do sleep 1; done
    if [[ ! -e $ready ]]; then
      echo "== $name: $build is not there to test ($([[ -e $ready.failed ]] && echo "its build failed" || echo "not built within 30 minutes"))"
      echo "stage-time: $((SECONDS - waited)) FAILED $name"
      status=1
      continue
    fi
    echo "== $name: waited $((SECONDS - waited)) s for $build to be built"
  fi
  echo "== $name: ctest -L '$labels' -j $jobs in $build"
  log=$(mktemp)
  started=$SECONDS
  rc=0
  tree=$build/ctest-runs/${name//[^A-Za-z0-9]/_}
  rm -rf "$tree"
  (cd "$build" && find . -name CTestTestfile.cmake -not -path './ctest-runs/*' -not -path './_CPack_Packages/*') |
    while read -r file; do mkdir -p "$tree/${file%/*}" && cp "$build/$file" "$tree/$file"; done
  cpu_file=$tree/case-cpu
  RDMAKIT_CASE_CPU_FILE=$cpu_file ctest --test-dir "$tree" -L "$labels" -j "$jobs" --output-on-failure 2>&1 |
    tee "$log" || rc=1
  # ctest's own exit status is lost in the pipe; its summary line says it.
  grep -q '^100% tests passed' "$log" || rc=1
  seconds=$((SECONDS - started))
  echo "-- $name: the slowest cases"
  sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) \.+ *(\*\*\*)?([A-Za-z ]+[a-z]) +([0-9.]+) sec$/\4 \1 \3/p' "$log" |
    sort -rn | head -n 8 | awk '{printf "   %7.1f s  %s (%s)\n", $1, $2, $3}'
  # What each case cost the guest's CPU (tests/integration/lib.sh's record_case_cpu): the
  # figure to cut where the suite is over its budget.
  if [[ -s $cpu_file ]]; then
    echo "-- $name: the costliest cases in CPU (their processes, in the guest), of $(awk '{s += $2} END {printf "%.0f", s}' "$cpu_file") CPU-s in all"
    sort -k2,2 -rn "$cpu_file" | head -n 8 | awk '{printf "   %7.1f CPU-s  %s\n", $2, $1}'
  fi
  rm -f "$log"
  outcome=ok
  ((rc == 0)) || { outcome=FAILED; status=1; }
  echo "stage-time: $seconds $outcome $name"
done
exit $status
