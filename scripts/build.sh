#!/usr/bin/env bash
# build.sh [DIR [CMAKE_ARGS...]]: configures and builds rdmakit into DIR (default build/),
# warnings as errors.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build}
shift || true
cmake -S "$root" -B "$dir" -DRDMAKIT_WERROR=ON "$@" > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
cmake --build "$dir" -j "$(nproc)"
