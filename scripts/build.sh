#!/usr/bin/env bash
# build.sh [DIR [CMAKE_ARGS...]]: configures and builds rdmakit into DIR (default build/),
# warnings as errors; with RDMAKIT_BUILD_TARGETS set, only the targets it names.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build}
shift || true
# Ninja where it is installed, for a folder not yet configured (a configured one keeps its
# generator): it keeps both cores busy across targets and logs each compile's time in
# DIR/.ninja_log.
generator=()
[[ ! -f $dir/CMakeCache.txt ]] && command -v ninja > /dev/null && generator=(-G Ninja)
cmake -S "$root" -B "$dir" "${generator[@]}" -DRDMAKIT_WERROR=ON "$@" > "$dir.configure.log" 2>&1 ||
  { cat "$dir.configure.log"; exit 1; }
# RDMAKIT_BUILD_TARGETS="a b ...": only these targets (a build that serves one stage).
targets=()
[[ -n ${RDMAKIT_BUILD_TARGETS:-} ]] && read -ra targets <<< "--target $RDMAKIT_BUILD_TARGETS"
cmake --build "$dir" -j "$(nproc)" "${targets[@]}"
