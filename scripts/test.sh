#!/usr/bin/env bash
# test.sh [--quick] [--under-load]: the test suite. Installs missing dependencies and checks
# formatting and the scripts (clang-format, shellcheck: beside the first build); then, in full
# (what CI runs):
#   build          gcc, warnings as errors: the tools and the .deb (the unit tests: --quick)
#   build-asan     clang with ASan+UBSan and the libFuzzer targets (RDMAKIT_FUZZ): one
#                  build serves the sanitized unit and integration runs and the fuzz run
#   build-tsan     with RDMAKIT_LONG=1 or RDMAKIT_TSAN=1 only (the budget): clang with
#                  ThreadSanitizer: only the unit tests of threaded code and the programs of
#                  the tsan cases (the threaded and concurrent servers, tests/tsan.cmake); in
#                  the background at nice 19 beside the guest, which waits for it before
#                  those cases (here with --under-load or no guest)
#   clang-tidy     .clang-tidy's checks (bugprone, performance, readability: the complexity
#                  cap among them), with build-asan's compile commands; beside the guests at
#                  nice 19 (in the foreground with --under-load)
#   unit           the three builds on this host, with the device-free cases of the tools
#                  (bad flags: label nodevice; the plain build's copies of those the
#                  sanitized build runs with --quick or RDMAKIT_LONG only, as the guest's
#                  integration cases); build-asan replays every fuzz corpus; in
#                  the background at nice 19 once build-tsan is built, beside the guests
#                  (here with --under-load or no guest)
#   fuzz           every libFuzzer target briefly (scripts/fuzz.sh, reusing build-asan),
#                  beside the pair guests at nice 19 (here with --under-load or no guest)
#   integration    the three builds in one soft-RoCE guest (scripts/rxe-vm.sh), several
#                  cases at a time where they share nothing (tests/README.md says which run
#                  alone, and which the sanitized builds run)
#   pair           the two-host cases on two guests joined by a wire (plain build): after the
#                  single guest, or beside it on a host of 4 cores or more with 6 GiB free
#   schemas        every report the guests' cases queued, checked against its schema here
#                  (the guests leave it to the host: RDMAKIT_REPORTS_ON_HOST)
#   package        the plain build as .debs (the tools, rdmakit-rxe-vm), checked
#                  (scripts/package.sh, run by doc/ci's GitHub package step) beside
#                  build-asan, once it is built; then installed, beside the pair guests
#                  at nice 10 (after them under load or short of memory): from a fresh
#                  folder the installed rdmakit-rxe-vm runs the installed
#                  rdmakit-rdma_smoke --quick, and, booting systemd as the guest's PID 1
#                  (--systemd), starts the installed units for real
#                  (tests/packaging/units_under_systemd.sh); removed after
#   build/bin      the tested build still runs from build/bin afterwards
# --quick: the inner loop: the plain build, its unit and device-free cases, and the
# integration cases labelled quick in one guest: one of each tool against ours and the stock
# tool. CI runs the full suite.
# --under-load: CPU burners (stress-ng, RDMAKIT_BURNERS of them, default one per core) run on
# this host beside every guest, as on a user's busy machine; every case must hold.
# Every run ends with a table of each stage's time (also kept in build/test-times.txt);
# tests/README.md says where the time goes.
#   RDMAKIT_SKIP_VM=1   no guest: unit tests and the fuzz run only
#   RDMAKIT_LONG=1      also the long cases of the plain build (siw_tools after building
#                       soft-iWARP with scripts/build-siw.sh): the soak of every persistent
#                       server (ctest -L soak), one valgrind memcheck run of every tool (ctest
#                       -L valgrind), the cases the suite's budget left out (ctest -L
#                       integration_long; the plain copies of the sanitized cases, ctest -L
#                       integration_also_sanitized) and the pair cases it left out, the
#                       crafted peer across the wire among them (ctest -L pair_long)
#   RDMAKIT_TSAN=1      build-tsan and its unit and guest passes (RDMAKIT_LONG includes them)
#   RDMAKIT_JOBS=N      integration cases at a time in the guest (default 3)
# Exits non-zero on any failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
mode=full under_load=false
for argument in "$@"; do
  case $argument in
    --quick) mode=quick ;;
    --under-load) under_load=true ;;
    -h | --help) usage 0 ;;
    *) echo "test.sh: unknown argument '$argument' (expected --quick, --under-load)" >&2; usage 2 ;;
  esac
done
jobs=${RDMAKIT_JOBS:-3}
burners=${RDMAKIT_BURNERS:-$(nproc)}

# The stage clock: every stage's wall time and outcome, printed at the end however the run
# ends. Stages run in the guest report their own time (stage-time: lines, from
# tests/integration/ctest-stages.sh) and appear indented under the guest's boot-to-exit.
# Beside each stage's wall time, the CPU its processes used (user + system, what this shell
# waited for: a guest's qemu included): on a host whose cores are all busy, the suite's time
# is its CPU divided by the cores, whatever overlaps what.
declare -a stage_rows=()
status=0
suite_started=$SECONDS
# add_row SECONDS OUTCOME NAME [CPU_SECONDS]
add_row() { stage_rows+=("$(printf '%6d s  %7s  %-6s  %s' "$1" "${4:--}" "$2" "$3")"); }
# children_cpu: sets children_cpu_s to the CPU seconds of this shell's finished children so
# far (bash's `times`; never in a command substitution, whose subshell has children of its
# own), through a file of this shell's own.
times_file=$(mktemp)
children_cpu_s=0
children_cpu() {
  local file=$times_file.$BASHPID
  times > "$file"
  children_cpu_s=$(awk 'END { s = 0; for (i = 1; i <= NF; i++) { split($i, p, "m"); sub("s", "", p[2]); s += p[1] * 60 + p[2] }
    printf "%d", s }' "$file")
}
print_times() {
  local total=$((SECONDS - suite_started))
  local load=""
  $under_load && load=", $burners CPU burners beside the guests"
  echo "== stage times ($mode suite, $(nproc) cores$load): total ${total} s ($((total / 60)) min $((total % 60)) s)"
  children_cpu
  printf '%s\n' "  wall     CPU-s  outcome stage" "${stage_rows[@]}" \
    "$(printf '%6d s  %7s  %-6s  %s' "$total" "$children_cpu_s" "$([[ $status == 0 ]] && echo ok || echo FAILED)" total)" |
    tee "$root/build/test-times.txt" 2> /dev/null || true
}

# --under-load: CPU burners beside every guest, started before the first and stopped after
# the last, so that each case runs on a host whose CPU is taken, as a user's often is.
burner_pid=""
burn_start() {
  $under_load && [[ -z $burner_pid ]] || return 0
  stress-ng --cpu "$burners" --cpu-method int64 --timeout 4h --quiet &
  burner_pid=$!
  echo "== under load: $burners CPU burners (stress-ng --cpu $burners, pid $burner_pid) beside the guests"
}
burn_stop() {
  [[ -n $burner_pid ]] || return 0
  kill "$burner_pid" 2> /dev/null || true
  wait "$burner_pid" 2> /dev/null || true
  burner_pid=""
}
# The background stages (clang-tidy, the pair guests, fuzzing) each run in a process group
# of their own (beside), so that a suite that ends early ends them with all their children.
declare -A background_pids=() background_logs=()
end_background() {
  local pid
  for pid in "${background_pids[@]}"; do kill -- "-$pid" 2> /dev/null || true; done
}
trap 'burn_stop; end_background; print_times; rm -f "$times_file"*' EXIT

# beside COMMAND...: COMMAND in the background, in a process group of its own (job control on
# for the fork only), stdin closed: a guest's qemu reading a terminal from a background group
# would be stopped. Sets beside_pid.
beside_pid=""
beside() {
  set -m
  "$@" < /dev/null &
  beside_pid=$!
  set +m
}

# background_start KEY NICENESS LOG COMMAND...: a stage that runs beside the others, at
# NICENESS, its output in LOG; background_join KEY NAME waits for it and adds its row under
# NAME (its time is its own, not the suite's), with the guest's ctest rows where it ran one.
background_start() {
  local key=$1 niceness=$2 log=$3
  shift 3
  rm -f "$log.result"
  run_in_background() {
    renice -n "$niceness" -p "$BASHPID" > /dev/null
    local started=$SECONDS rc=0
    "$@" > "$log" 2>&1 || rc=$?
    children_cpu
    echo "$rc $((SECONDS - started)) $children_cpu_s" > "$log.result"
  }
  beside run_in_background "$@"
  background_pids[$key]=$beside_pid
  background_logs[$key]=$log
}
background_running() { [[ -n ${background_pids[$1]:-} ]]; }
background_join() {
  local key=$1 name=$2 rc=1 seconds=0 cpu=- outcome what log=${background_logs[$1]:-}
  background_running "$key" || return 0
  echo "== $name: waiting for it"
  wait "${background_pids[$key]}" || true
  unset "background_pids[$key]"
  read -r rc seconds cpu < "$log.result" || true
  cat "$log"
  add_row "$seconds" "$([[ $rc == 0 ]] && echo ok || echo FAILED)" "$name" "$cpu"
  while read -r seconds outcome what; do
    add_row "$seconds" "$outcome" "  $what (in the guest)"
  done < <(sed -n 's/^stage-time: //p' "$log")
  ((rc == 0)) || { status=1; return 1; }
}

# stage NAME COMMAND...: one timed stage; a failure fails the suite and is returned.
stage() {
  local name=$1 started=$SECONDS rc=0 cpu
  shift
  echo "== $name"
  children_cpu
  cpu=$children_cpu_s
  "$@" || rc=$?
  children_cpu
  add_row $((SECONDS - started)) "$([[ $rc == 0 ]] && echo ok || echo FAILED)" "$name" $((children_cpu_s - cpu))
  ((rc == 0)) || status=1
  return $rc
}

# in_guest NAME LOG COMMAND...: a stage inside one soft-RoCE guest; its ctest runs' own
# times (stage-time: lines) follow its row.
in_guest() {
  local name=$1 log=$2 rc=0 seconds outcome what
  shift 2
  # shellcheck disable=SC2016  # expanded by the inner bash
  stage "$name" bash -c '"$@" 2>&1 | tee "$0"; exit "${PIPESTATUS[0]}"' "$log" "$@" || rc=$?
  while read -r seconds outcome what; do
    add_row "$seconds" "$outcome" "  $what (in the guest)"
  done < <(sed -n 's/^stage-time: //p' "$log")
  return $rc
}

format_check() {
  local -a sources
  mapfile -t sources < <(git ls-files '*.cpp' '*.hpp' 2> /dev/null || find lib apps tests -name '*.[ch]pp')
  clang-format --dry-run --Werror "${sources[@]}"
}

# tidy_check: .clang-tidy's checks over lib/ and apps/, with the compile commands of the
# clang build, by clang-tidy 22 (clang-tidy 14 took 430 CPU-s over them; 22 takes 88). The
# builds are unity builds, so it reads each unity source once and reports on the sources
# and headers of ours it includes (-header-filter): every lib/ and apps/ .cpp is in one,
# and CLI11, json and spdlog are parsed once a batch instead of once a file. A header's finding is reported once for each
# batch that includes it; the log keeps them all.
tidy_check() {
  run-clang-tidy-22 -p "$root/build-asan" -j "$(nproc)" -quiet -header-filter="^$root/(lib|apps)/.*\.(cpp|hpp)\$" \
    "^$root/build-asan/(lib|apps)/.*/unity_.*\.cxx\$" > "$root/build/clang-tidy.log" 2>&1 ||
    {
      grep -E "warning:|error:" "$root/build/clang-tidy.log"
      return 1
    }
}

tidy_join() { background_join tidy "clang-tidy (beside the guests, nice 19)" || true; }

stage "install-deps" scripts/install-deps.sh --if-missing
# The lint stages need no build and use one core: beside the plain build, which takes the
# other (on 2 cores they were 16 s of their own before it).
lint() {
  local rc=0
  echo "== clang-format"
  format_check || rc=1
  # The entry points; -x follows what they source (.shellcheckrc).
  echo "== shellcheck"
  shellcheck -x scripts/*.sh .ci/run tests/integration/run-case.sh tests/integration/ctest-stages.sh tests/ci/*.sh \
    doc/slurm/rdma_mesh.sbatch || rc=1
  return "$rc"
}
lint_name="clang-format and shellcheck (beside the plain build)"
mkdir -p "$root/build"
background_start lint 0 "$root/build/lint.log" lint
# Every build is a unity build, in batches of 16 sources: most of a compile was the
# templates of CLI11, nlohmann/json and fmt instantiated and optimised again in every source
# (a precompiled header made gcc slower still); a batch does them once. Batches of 16 rather
# than CMake's 8 cost 9% less CPU in the gcc build (404 s, not 444) and 11% less in the
# ASan one (563 s, not 631).
unity=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16)
# The plain build: the tools as packaged, their device-free cases and the plain integration
# pass; line tables only (-g1), enough for a backtrace, and the package strips them anyway.
# The full suite leaves out the gcc copies of the unit tests and the fuzz targets: the
# sanitized build compiles and runs both (the unit tests of threaded code under TSan too),
# and a third copy cost 140 s of CPU for what the sanitizers check better. --quick, which
# has no sanitized build, keeps them.
plain_flags=("${unity[@]}" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" -DRDMAKIT_FUZZ_REPLAY=ON
  -DRDMAKIT_UNIT_TESTS=ON)
[[ $mode == full ]] && plain_flags[-2]=-DRDMAKIT_FUZZ_REPLAY=OFF plain_flags[-1]=-DRDMAKIT_UNIT_TESTS=OFF
stage "build (gcc, warnings as errors)" scripts/build.sh "$root/build" "${plain_flags[@]}"
background_join lint "$lint_name" || true

# package_step: doc/ci/github-rdma-smoke.yml's package step, run as the runner would
# (tests/ci/run-github-step.sh), on the build about to be tested: scripts/package.sh --print-debs builds
# and checks every .deb; its $GITHUB_OUTPUT must be debs=<the tool packages' .debs>, rdmakit's
# first, rdmakit-smoke's among them (what that workflow runs).
package_step() {
  local outputs=$root/build/package-step-output deb debs
  RDMAKIT_PACKAGE_DIR="$root/build" tests/ci/run-github-step.sh --outputs "$outputs" \
    doc/ci/github-rdma-smoke.yml rdma-smoke package || return
  read -r -a debs <<< "$(sed -n 's/^debs=//p' "$outputs")"
  local wrong=$(($(wc -l < "$outputs") != 1 || ${#debs[@]} < 4))
  [[ ${debs[0]:-} == "$root"/build/rdmakit_*.deb ]] || wrong=1
  [[ " ${debs[*]:-} " == *" $root/build/rdmakit-smoke_"* ]] || wrong=1
  for deb in "${debs[@]}"; do
    [[ $deb == "$root"/build/rdmakit*_*.deb && $deb != */rdmakit-rxe-vm_* && -f $deb ]] || wrong=1
  done
  ((wrong == 0)) ||
    { echo "package step: \$GITHUB_OUTPUT holds '$(cat "$outputs")', not debs=$root/build/rdmakit_<version>.deb ..."; return 1; }
}
package_name="Debian packages from the build under test, checked (doc/ci's GitHub package step)"
# The packages are built here, before anything runs from build/bin: scripts/package.sh
# rebuilds the build with the packages' program prefix, relinking build/bin, and an exec of a
# binary being relinked failed with "Permission denied" (ci.github_smoke_step, stop 52). They
# are installed and run at the end, in guests of their own (installed_smoke, installed_units):
# beside the pair guests those took 130 s and slowed the pair stage by 85 s (17db7ea).
# The step itself (cpack, dpkg-deb and the checks: mostly one core) runs beside build-asan,
# which nothing of it touches, and is joined before the guests start.
if [[ $mode == full ]]; then
  background_start package 0 "$root/build/package-step.log" package_step
fi

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# build-tsan's tests set the same in their environment (tests/tsan.cmake): a report ends the
# process with exit 66.
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
# The guests leave their reports' schema check to this host (report_schemas).
guest_env="export ASAN_OPTIONS=$ASAN_OPTIONS UBSAN_OPTIONS=$UBSAN_OPTIONS TSAN_OPTIONS=$TSAN_OPTIONS RDMAKIT_REPORTS_ON_HOST=1;"
steps=tests/integration/ctest-stages.sh

# The pair cases (two guests on a wire, the plain build): the stage's command, and its log.
pair_labels=pair
[[ ${RDMAKIT_LONG:-0} == 1 ]] && pair_labels='pair|pair_long'
pair_stage_name="two guests on a wire: pair cases (build)"
pair_log=$root/build/vm-pair.log
pair_vm=(scripts/rxe-vm.sh --pair --memory 1024 --timeout 2400 "$root"
  "$guest_env" "$steps 'pair (build)|$root/build|^($pair_labels)\$|1'")

# pair_beside_start: the pair stage in the background, beside the single guest, where the
# host has the cores and memory for three guests (the single guest's 2 GiB and two of 1 GiB)
# and is not loaded on purpose (--under-load). Side by side each fills the other's idle
# stretches (the RUN_SERIAL cases, the pair's chain of cases): on 2 cores a full suite took
# 1593 s instead of about 1700. But there two of the single guest's timing-bound cases
# failed once (connect_self's agent capture, send_bw_intervals' paced intervals), starved by
# the pair's four vCPUs: on fewer than 4 cores the pair runs after the single guest.
pair_beside_start() {
  local available_kib
  available_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
  if $under_load || (($(nproc) < 4 || available_kib < 6 * 1024 * 1024)); then
    echo "== the pair stage runs after the single guest ($(nproc) cores, $((available_kib / 1024)) MiB available$($under_load && echo ", under load"))"
    return 0
  fi
  echo "== $pair_stage_name: in the background from here on (its rows follow the single guest's; log $pair_log)"
  background_start pair 0 "$pair_log" "${pair_vm[@]}"
}

# pair_stage: the pair stage here, or its background run joined: its log, its rows.
pair_stage() {
  if background_running pair; then
    background_join pair "$pair_stage_name (in the background)"
  else
    in_guest "$pair_stage_name" "$pair_log" "${pair_vm[@]}"
  fi
}

# unit_stage DIR: the unit tests, corpora and device-free cases of one build, on this host;
# unit_tests DIR...: the same runs of each DIR, untimed (for a background stage). The
# GoogleTest cases run in one process, not as ctest's 600 (gtest.*), each of which started
# the program again: under ASan 170 CPU-s of the unit pass, 10 in one process. A failure
# there names its case; `ctest -R '^gtest\.'` runs them apart.
unit_run() {
  # The plain copies of the device-free cases and tool checks the sanitized build runs
  # (nodevice_also_sanitized, unit_also_sanitized) where there is no sanitized build (--quick)
  # or time for both (RDMAKIT_LONG).
  local rc=0 labels='^(unit|nodevice)$'
  [[ $mode == quick ]] && labels='^(unit|nodevice|(nodevice|unit)_also_sanitized)$'
  [[ ${RDMAKIT_LONG:-0} == 1 ]] && labels='^(unit|nodevice|nodevice_long|(nodevice|unit)_also_sanitized)$'
  if [[ -x $root/$1/tests/unit_tests ]]; then
    echo "== $1/tests/unit_tests, every case in one process"
    (cd "$root/$1/tests" && timeout -k 10 900 ./unit_tests --gtest_brief=1) || rc=1
  fi
  ctest --test-dir "$root/$1" -L "$labels" -E '^gtest\.' -j "$(nproc)" --output-on-failure || rc=1
  return "$rc"
}
unit_stage() { stage "unit, device-free cases and corpora ($1)" unit_run "$1"; }
unit_tests() {
  local dir rc=0
  for dir in "$@"; do
    echo "== unit, device-free cases and corpora ($dir)"
    unit_run "$dir" || rc=1
  done
  return "$rc"
}

# report_schemas QUEUE...: the check of every report the guest's cases queued in each
# QUEUE, a build's folder (tests/CMakeLists.txt: integration-reports, the pair cases'
# integration-reports-pair), against its schema (tests/integration/lib.sh,
# reports_match_schemas), which the guests leave to this host: Python in the TCG guest
# took 20 s a pass, here under a second.
report_schemas() {
  local queue dir rc=0
  for queue in "$@"; do
    dir=$root/${queue%/*}
    RDMAKIT_REPORT_QUEUE=$root/$queue tests/integration/run-case.sh reports_match_schemas "$dir/bin" "$dir/tests/bin" ||
      rc=1
  done
  return "$rc"
}

# build_usable: the README's build still runs from build/bin after the suite (the package
# stage reconfigures that build with the packages' program prefix): rdma_smoke finds its
# siblings there and, on a host without RDMA, exits 77 naming the missing device.
build_usable() {
  if compgen -G "/sys/class/infiniband/*" > /dev/null; then
    echo "build/bin check skipped: this host has an RDMA device (the check wants one without)"
    return 0
  fi
  local rc=0
  "$root/build/bin/rdma_smoke" 192.0.2.1 > "$root/build/usable.out" 2> "$root/build/usable.err" || rc=$?
  ((rc == 77)) || { echo "build/bin/rdma_smoke 192.0.2.1: exit $rc, expected 77 (no RDMA device)"; cat "$root/build/usable.err"; return 1; }
}

if [[ $mode == quick ]]; then
  unit_stage build || true
  if [[ ${RDMAKIT_SKIP_VM:-0} != 1 ]]; then
    burn_start
    in_guest "guest: the quick integration set (build)" "$root/build/vm-quick.log" \
      scripts/rxe-vm.sh --name quick --timeout 1800 "$root" "$guest_env" \
      "$steps 'quick (build)|$root/build|^quick\$|$jobs'" || true
    burn_stop
    stage "report schemas (the guest's, checked here)" report_schemas build/integration-reports || true
  fi
  exit $status
fi

# One clang build for ASan+UBSan and libFuzzer: -O1, as ASan's authors advise (Debug's -O0
# makes every sanitized start in the guest and every fuzz execution slower), and line tables
# only: enough for the sanitizers' symbolized stacks, and a third less to compile and link.
# The libraries without libFuzzer's coverage hooks (RDMAKIT_FUZZ_COVERAGE=OFF): the fuzz
# stage's brief runs do without them, and they took a fifth of each library's compile here
# and slowed every sanitized program in the guest.
# Linked by lld: GNU ld took 71 CPU-s to link its 38 sanitized programs, lld 29.
lld=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_MODULE_LINKER_FLAGS=-fuse-ld=lld)
stage "build-asan (clang, ASan+UBSan, libFuzzer targets)" env CC=clang CXX=clang++ \
  scripts/build.sh "$root/build-asan" -DRDMAKIT_SANITIZE=ON -DRDMAKIT_FUZZ=ON -DRDMAKIT_FUZZ_COVERAGE=OFF \
  -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-gline-tables-only -O1" "${unity[@]}" "${lld[@]}"
background_join package "$package_name (beside build-asan)" || true
# ThreadSanitizer (it cannot share a build with ASan): the same flags, and only what its
# stages run: the unit tests and the programs of the tsan cases (tests/tsan.cmake).
tsan_targets="unit_tests rdma_server rdma_client send_bw rping diag-connect rdma_smoke"
tsan_name="build-tsan (clang, TSan: unit tests, the servers of the tsan cases)"
tsan_ready=$root/build-tsan.ready
rm -f "$tsan_ready" "$tsan_ready.failed"
build_tsan() {
  if env CC=clang CXX=clang++ RDMAKIT_BUILD_TARGETS="$tsan_targets" scripts/build.sh "$root/build-tsan" \
    -DRDMAKIT_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-gline-tables-only -O1" "${unity[@]}" \
    "${lld[@]}"; then
    touch "$tsan_ready"
  else
    touch "$tsan_ready.failed"
    return 1
  fi
}
# The suite's budget (25 minutes on 2 cores) leaves it to the long suite (RDMAKIT_LONG=1, or
# RDMAKIT_TSAN=1 for it alone): a third build, its unit pass and its guest pass, for the few
# threaded servers, cost the suite about 300 s of its 2,319 on 2 cores (3e3c1a4), where
# every CPU-second of a stage beside the guests is a second taken from them.
# Its cases run last in the single guest: unless the host is loaded on purpose, or there is
# no guest, it is built in the background at nice 19 from here on, on what the guest leaves
# of the cores, and the guest waits for it before that run (ctest-stages.sh's READY_FILE).
with_tsan=false
[[ ${RDMAKIT_LONG:-0} == 1 || ${RDMAKIT_TSAN:-0} == 1 ]] && with_tsan=true
tsan_beside=true
if ! $with_tsan; then
  tsan_beside=false
  echo "== $tsan_name: left to the long suite (RDMAKIT_LONG=1, or RDMAKIT_TSAN=1)"
elif $under_load || [[ ${RDMAKIT_SKIP_VM:-0} == 1 ]]; then
  tsan_beside=false
  stage "$tsan_name" build_tsan || true
else
  echo "== $tsan_name: in the background at nice 19 from here on (its row follows the guest's)"
  background_start tsan_build 19 "$root/build-tsan.log" build_tsan
fi
# clang-tidy needs no device and no build of its own: unless the host is loaded on purpose
# (--under-load, where it runs here as before), it runs beside the guests at nice 19, on
# what they leave of the two cores (their serial cases, the pair stage's chain of cases on
# two guests), and its row joins the table when the pair stage has ended.
if $under_load; then
  stage "clang-tidy" tidy_check || true
else
  # Started with build-tsan, not after it: after it, clang-tidy ran into the pair stage and
  # the suite took 1576 s (4e887bc), against 1518 s with the guest waiting 51 s for
  # build-tsan (f8ed2ef).
  echo "== clang-tidy: in the background at nice 19, beside the guests (its row follows the pair stage)"
  background_start tidy 19 "$root/build/clang-tidy.findings" tidy_check
fi
# The unit tests and device-free cases need no guest either: in the background at nice 19
# (unless the host is loaded on purpose, or there is no guest), they leave the guest's start
# 80 s earlier (their stages at 5e84b31: 25 + 62 s on 2 cores). They start once build-tsan
# is built: beside it they halved its share of the idle cores, and the guest waited 25 s for
# it (31249af); they may run on beside the pair guests.
unit_name="unit, device-free cases and corpora (build, build-asan)"
unit_after_tsan() {
  local waited=0
  until ! $with_tsan || [[ -e $tsan_ready || -e $tsan_ready.failed ]]; do
    sleep 2
    waited=$((waited + 2))
  done
  $with_tsan && echo "== waited $waited s for build-tsan"
  unit_tests build build-asan
}
if $under_load || [[ ${RDMAKIT_SKIP_VM:-0} == 1 ]]; then
  for dir in build build-asan; do
    unit_stage "$dir" || true
  done
  if $with_tsan; then unit_stage build-tsan || true; fi
else
  echo "== $unit_name: in the background at nice 19$($with_tsan && echo " once build-tsan is built") (its row follows the pair stage)"
  background_start unit 19 "$root/build/unit-beside.log" unit_after_tsan
fi
# Fuzzing is bounded by time, not by work: it needs no stage of its own where idle cores
# wait. Beside the pair guests, at nice 19, it takes what their chain of cases leaves (on
# 2 cores, clang-tidy has ended by then); loaded on purpose, or with no guest, it runs here.
fuzz_name="fuzz: every libFuzzer target for ${RDMAKIT_FUZZ_SECONDS:=3} s"
fuzz=(scripts/fuzz.sh "$RDMAKIT_FUZZ_SECONDS" "$root/build-asan")
if $under_load || [[ ${RDMAKIT_SKIP_VM:-0} == 1 ]]; then
  stage "$fuzz_name" "${fuzz[@]}" || true
fi

if [[ ${RDMAKIT_SKIP_VM:-0} == 1 ]]; then
  echo "== integration tests skipped (RDMAKIT_SKIP_VM=1)"
  tidy_join
  exit $status
fi

# RDMAKIT_LONG: soft-iWARP for siw_tools (integration_long), built from the kernel's source.
if [[ ${RDMAKIT_LONG:-0} == 1 ]]; then
  stage "siw module for the guest (scripts/build-siw.sh)" scripts/build-siw.sh "$root/build/siw" || true
fi
burn_start
pair_beside_start
runs=("integration (build)|$root/build|^integration\$|$jobs" "integration (build-asan)|$root/build-asan|^integration\$|$jobs")
$with_tsan && runs+=("threaded servers under TSan (build-tsan)|$root/build-tsan|^tsan\$|$jobs|$tsan_ready")
[[ ${RDMAKIT_LONG:-0} == 1 ]] &&
  runs+=("long cases, soak and valgrind memcheck (build)|$root/build|^(integration_long|integration_also_sanitized|soak|valgrind)\$|1")
in_guest "guest: integration of the builds" "$root/build/vm-integration.log" \
  scripts/rxe-vm.sh --timeout 3600 "$root" "$guest_env" "$steps$(printf " '%s'" "${runs[@]}")" || true
if $tsan_beside; then
  background_join tsan_build "$tsan_name (beside the guest, nice 19)" || true
  unit_stage build-tsan || true
fi
queues=(build/integration-reports build-asan/integration-reports)
$with_tsan && queues+=(build-tsan/integration-reports)
stage "report schemas of the builds' cases (checked here)" report_schemas "${queues[@]}" || true

# Fuzzing needs no guest and nothing the pair changes: it takes what the pair's chain of
# cases leaves.
if ! $under_load; then
  echo "== $fuzz_name: in the background at nice 19, beside the pair stage"
  background_start fuzz 19 "$root/build-asan/fuzz.log" "${fuzz[@]}"
fi
# installed_smoke: every package installed, and from a fresh folder outside the build the
# installed VM runner runs the installed smoke test. The packages stay for installed_units.
installed_debs=()
as_root=()
[[ $(id -u) -eq 0 ]] || as_root=(sudo)
installed_smoke() {
  local folder rc=0
  mapfile -t installed_debs < <(ls "$root"/build/rdmakit_*.deb "$root"/build/rdmakit-*_*.deb)
  [[ ${#installed_debs[@]} -ge 5 ]] ||
    { echo "installed smoke: expected the packages' .debs in build/, found ${installed_debs[*]}"; return 1; }
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -q --no-install-recommends "${installed_debs[@]}" > \
    "$root/build/installed-smoke-apt.log" 2>&1 || { cat "$root/build/installed-smoke-apt.log"; return 1; }
  folder="$root/build/installed-smoke"
  rm -rf "$folder" && mkdir -p "$folder"
  (cd "$folder" && rdmakit-rxe-vm --timeout 600 -- rdmakit-rdma_smoke --quick --junit rdma-smoke.xml) || rc=$?
  [[ $rc -ne 0 ]] || xmllint --noout --schema "$root/tests/schema/junit.xsd" "$folder/rdma-smoke.xml" || rc=1
  return "$rc"
}

# installed_units: the installed units started for real, by systemd as the guest's PID 1
# (rdmakit-rxe-vm --systemd), with the agent's key delivered as rdmakit(7) says
# (tests/packaging/units_under_systemd.sh); then every package removed again.
installed_units() {
  local folder="$root/build/installed-units" rc=0 names
  if [[ ${#installed_debs[@]} -gt 0 ]] && dpkg -s rdmakit-diag > /dev/null 2>&1; then
    rm -rf "$folder" && mkdir -p "$folder"
    cp "$root/tests/packaging/units_under_systemd.sh" "$folder/"
    (cd "$folder" && rdmakit-rxe-vm --systemd --timeout 600 -- bash units_under_systemd.sh) || rc=$?
  else
    echo "installed units: the packages are not installed (see the stage before)"
    rc=1
  fi
  mapfile -t names < <(for deb in "${installed_debs[@]}"; do dpkg-deb -f "$deb" Package; done)
  [[ ${#names[@]} -eq 0 ]] || "${as_root[@]}" dpkg -r "${names[@]}" > /dev/null || rc=1
  return "$rc"
}
installed_smoke_name="installed packages: rdmakit-rxe-vm -- rdmakit-rdma_smoke --quick"
installed_units_name="installed units under systemd (PID 1 in the guest): rdmakit-rxe-vm --systemd"
# installed_stages: both, one after the other, each with a stage-time line (for the table
# of a background run).
installed_stages() {
  local name started rc=0 step_rc
  for name in smoke units; do
    started=$SECONDS step_rc=0
    "installed_$name" || step_rc=$?
    local label=installed_${name}_name
    echo "stage-time: $((SECONDS - started)) $( ((step_rc == 0)) && echo ok || echo FAILED) ${!label}"
    ((step_rc == 0)) || rc=1
  done
  return "$rc"
}
# The installed packages' guests need nothing the pair changes, and the pair's chain of
# cases leaves a core idle for much of its run (CI18: 599 CPU-s in 433 s on 2 cores): beside
# it, at nice 10, they take what it leaves instead of 100 s of their own at the end. Not
# under load (the burners take those idle stretches), nor on a host without memory for a
# third guest.
installed_beside=false
if ! $under_load && (($(awk '/^MemAvailable:/ {print $2}' /proc/meminfo) >= 5 * 1024 * 1024)); then
  installed_beside=true
  echo "== installed packages and units: in the background at nice 10, beside the pair stage"
  background_start installed 10 "$root/build/installed.log" installed_stages
fi
pair_stage || true
background_join unit "$unit_name (in the background, nice 19)" || true
background_join fuzz "$fuzz_name (beside the pair guests, nice 19)" || true
stage "report schemas of the pair cases (checked here)" report_schemas build/integration-reports-pair || true
tidy_join

if $installed_beside; then
  background_join installed "installed packages and units (beside the pair guests, nice 10)" || true
else
  stage "$installed_smoke_name" installed_smoke || true
  stage "$installed_units_name" installed_units || true
fi
burn_stop
stage "build/bin still usable: rdma_smoke without a device exits 77" build_usable || true
exit $status
