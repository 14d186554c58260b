#!/usr/bin/env bash
# test.sh: the whole test suite. Installs missing dependencies, checks formatting, builds
# twice (warnings as errors; and with ASan+UBSan), runs the unit tests of both builds here
# and the integration tests of both builds on a real soft-RoCE device inside the VM
# (scripts/rxe-vm.sh), then the two-host cases of the plain build on two guests joined by a
# wire (scripts/rxe-vm.sh --pair). Before the VMs, every libFuzzer target runs briefly
# (scripts/fuzz.sh); at the end the tested build is packaged as a .deb and the package
# checked (scripts/package.sh). Exits non-zero on any failure.
#   RDMAKIT_SKIP_VM=1   unit tests only (integration cases are then not run at all)
#   RDMAKIT_LONG=1      also the long cases of the plain build: the soak of every persistent
#                       server (ctest -L soak), one valgrind memcheck run of every tool (ctest
#                       -L valgrind) and the crafted peer across the wire (ctest -L pair_long);
#                       about 20 more minutes
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install-deps.sh --if-missing

echo "== clang-format"
mapfile -t sources < <(git ls-files '*.cpp' '*.hpp' 2>/dev/null || find lib apps tests -name '*.[ch]pp')
clang-format --dry-run --Werror "${sources[@]}"

echo "== build (warnings as errors)"
scripts/build.sh "$root/build"
echo "== build (ASan + UBSan)"
scripts/build.sh "$root/build-asan" -DRDMAKIT_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for dir in build build-asan; do
  echo "== unit tests ($dir)"
  ctest --test-dir "$root/$dir" -L unit --output-on-failure
done

echo "== fuzz: every libFuzzer target for ${RDMAKIT_FUZZ_SECONDS:=10} s (their corpora replay in the unit tests)"
scripts/fuzz.sh "$RDMAKIT_FUZZ_SECONDS"

if [[ ${RDMAKIT_SKIP_VM:-0} == 1 ]]; then
  echo "== integration tests skipped (RDMAKIT_SKIP_VM=1)"
  exit 0
fi
status=0
echo "== integration tests on soft-RoCE in the VM (both builds)"
scripts/rxe-vm.sh --timeout 3000 "$root" \
  "export ASAN_OPTIONS=$ASAN_OPTIONS UBSAN_OPTIONS=$UBSAN_OPTIONS; rc=0;" \
  "for d in build build-asan; do echo \"== integration (\$d)\";" \
  "ctest --test-dir $root/\$d -L integration --output-on-failure || rc=1; done;" \
  "if [[ ${RDMAKIT_LONG:-0} == 1 ]]; then echo '== soak and valgrind memcheck (build)';" \
  "ctest --test-dir $root/build -L 'soak|valgrind' --output-on-failure || rc=1; fi; exit \$rc" || status=1

echo "== two-host tests: client and server on two guests joined by a wire (plain build)"
pair_labels=pair
[[ ${RDMAKIT_LONG:-0} == 1 ]] && pair_labels='pair|pair_long'
scripts/rxe-vm.sh --pair --memory 1024 --timeout 1500 "$root" \
  "ctest --test-dir $root/build -L '^($pair_labels)\$' --output-on-failure" || status=1

echo "== Debian package from the tested build, checked (scripts/package.sh)"
scripts/package.sh "$root/build" || status=1
exit $status
