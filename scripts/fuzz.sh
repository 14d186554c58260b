#!/usr/bin/env bash
# fuzz.sh [SECONDS_PER_TARGET] [BUILD_DIR]: builds the libFuzzer targets of tests/fuzz with
# clang (ASan + UBSan, rdmakit's libraries instrumented too) and fuzzes each one for
# SECONDS_PER_TARGET seconds (default 30) in BUILD_DIR (default build-fuzz; a build already
# configured with RDMAKIT_FUZZ=ON, such as scripts/test.sh's build-asan, is reused). Each run starts
# from a scratch copy of the target's checked-in corpus, so the corpus never grows by
# itself; the summary says how to merge what a run found. Exits non-zero when any target
# crashed, leaked, timed out or ran out of memory, naming the input it saved.
#   FUZZ_JOBS=N       parallel compile jobs (default 2)
#   FUZZ_PARALLEL=N   targets fuzzed at once (default: the number of cores)
#   FUZZ_TARGETS="a b" only these targets (names as in tests/fuzz/<name>_fuzz.cpp)
# Longer runs, minimizing and merging: tests/fuzz/README.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-30}
build=${2:-build-fuzz}
[[ $build == /* ]] || build=$root/$build
if ! [[ $seconds =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "usage: $0 [SECONDS_PER_TARGET (default 30)] [BUILD_DIR (default build-fuzz)]" >&2
  exit 2
fi
if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found; libFuzzer needs it (Debian: apt-get install clang libclang-rt-dev)" >&2
  exit 2
fi

if [[ -n ${FUZZ_TARGETS:-} ]]; then
  read -r -a targets <<<"$FUZZ_TARGETS"
else
  targets=()
  for source in "$root"/tests/fuzz/*_fuzz.cpp; do
    name=$(basename "$source" .cpp)
    targets+=("${name%_fuzz}")
  done
fi

if grep -qs '^RDMAKIT_FUZZ:BOOL=ON' "$build/CMakeCache.txt"; then
  # A build configured for fuzzing already (scripts/test.sh's build-asan, which also holds
  # the tools and tests): build the targets there, configured as they are.
  if grep -qs '^RDMAKIT_FUZZ_COVERAGE:BOOL=OFF' "$build/CMakeCache.txt"; then
    echo "== reuse $build (RDMAKIT_FUZZ=ON, RDMAKIT_FUZZ_COVERAGE=OFF: coverage of each target's own code only, not rdmakit's libraries; for a guided run: scripts/fuzz.sh $seconds)"
  else
    echo "== reuse $build (RDMAKIT_FUZZ=ON)"
  fi
else
  echo "== configure $build (clang, RDMAKIT_FUZZ=ON)"
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DRDMAKIT_FUZZ=ON -DRDMAKIT_BUILD_TESTS=OFF >"$build.configure.log" 2>&1 || {
    cat "$build.configure.log" >&2
    exit 1
  }
fi
echo "== build ${#targets[@]} targets"
cmake --build "$build" -j "${FUZZ_JOBS:-2}" --target "${targets[@]/%/_fuzz}"

scratch=$build/fuzz-scratch
rm -rf "$scratch"
mkdir -p "$scratch"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# fuzz_one TARGET: one target's run in its scratch folder; its exit status goes to rc there.
fuzz_one() {
  local target=$1 work=$scratch/$1 rc=0
  # Run from the scratch directory: anything a target drops in its working directory stays there.
  (cd "$work" && "$build/tests/fuzz/${target}_fuzz" -max_total_time="$seconds" -print_final_stats=1 \
    -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$work/" "$work/corpus") >"$work/log" 2>&1 || rc=$?
  echo "$rc" >"$work/rc"
}

# Each target runs on one core: FUZZ_PARALLEL of them at once (default: one per core), each
# for the full SECONDS.
parallel=${FUZZ_PARALLEL:-$(nproc)}
declare -A seeds=()
running=0
for target in "${targets[@]}"; do
  work=$scratch/$target
  mkdir -p "$work/corpus"
  cp -R "$root/tests/fuzz/corpus/$target/." "$work/corpus/"
  seeds[$target]=$(find "$work/corpus" -type f | wc -l)
  echo "== fuzz $target for ${seconds}s (${seeds[$target]} seeds)"
  fuzz_one "$target" &
  running=$((running + 1))
  if ((running >= parallel)); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

failed=()
summary=()
for target in "${targets[@]}"; do
  work=$scratch/$target
  rc=$(cat "$work/rc" 2>/dev/null || echo "?")
  executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -n 1)
  found=$(($(find "$work/corpus" -type f | wc -l) - seeds[$target]))
  artifact=$(find "$work" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
    -o -name 'oom-*' \) | head -n 1)
  if [[ $rc != 0 ]]; then
    failed+=("$target")
    echo "---- $target failed (exit $rc); last lines of $work/log:"
    tail -n 40 "$work/log"
    echo "---- input: ${artifact:-none saved (see the log)}"
    [[ -n $artifact ]] && echo "---- reproduce: $build/tests/fuzz/${target}_fuzz $artifact"
    status="FAILED ${artifact:-}"
  else
    status="ok"
  fi
  summary+=("$(printf '%-16s %12s executions %8s exec/s %5d new inputs  %s' "$target" "${executions:-?}" \
    "${rate:-?}" "$found" "$status")")
done

echo "== summary (${seconds}s per target; scratch corpora and logs in $scratch)"
printf '%s\n' "${summary[@]}"
echo "To keep what a run found (inputs that add coverage only), merge it into the checked-in corpus:"
echo "  $build/tests/fuzz/TARGET_fuzz -merge=1 $root/tests/fuzz/corpus/TARGET $scratch/TARGET/corpus"
if ((${#failed[@]} > 0)); then
  echo "fuzz.sh: ${#failed[@]} target(s) failed: ${failed[*]}; add each saved input to tests/fuzz/corpus/TARGET/ once fixed" >&2
  exit 1
fi
