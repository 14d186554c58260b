#!/usr/bin/env bash
# build-deps-test.sh: the packages `scripts/install-deps.sh --build` installs are what the
# build needs, and the CI examples (doc/ci/*.yml, doc/ci.md) install them that way, never by
# a list of their own: such a list fell behind once (libssl, libcap and libmicrohttpd added to
# the build, not to the examples, whose configure then failed).
# Each library the CMake files ask for is traced to the Debian package that ships the file
# CMake reads for it (a pkg-config module, a package's CMake config file, a header), on this
# host, where install-deps.sh has installed them all.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
mapfile -t build < <("$root/scripts/install-deps.sh" --print-build)
declare -A in_build=()
for package in "${build[@]}"; do in_build[$package]=1; done

# owner FILE_PATTERN: the package that ships a file matching FILE_PATTERN, arch stripped.
owner() { dpkg -S "$1" 2> /dev/null | grep -v '^linux-' | head -1 | cut -d: -f1; }
needs() {
  local what=$1 package=$2
  if [[ -z $package ]]; then
    fail "$what: no installed package ships it (is it installed? scripts/install-deps.sh)"
  elif [[ -z ${in_build[$package]:-} ]]; then
    fail "$what comes from $package, which install-deps.sh --build does not install"
  else
    echo "ok: $what: $package"
  fi
}

cmake_files=("$root/CMakeLists.txt" "$root"/lib/CMakeLists.txt "$root"/apps/CMakeLists.txt "$root"/cmake/*.cmake)
# pkg_check_modules(VAR [REQUIRED] IMPORTED_TARGET module...)
while read -r module; do
  needs "pkg-config module $module" "$(owner "$(pkg-config --variable=pcfiledir "$module" 2> /dev/null)/$module.pc")"
done < <(sed -n 's/.*pkg_check_modules([A-Z_]* \(REQUIRED \)\{0,1\}IMPORTED_TARGET \([a-z0-9_-]*\)).*/\2/p' "${cmake_files[@]}" | sort -u)
# find_package(Name ...): the file CMake reads for it.
while read -r name; do
  case $name in
    PkgConfig) continue ;;  # pkg-config itself: build-essential's peers, checked by configuring
    OpenSSL) needs "find_package(OpenSSL)" "$(owner /usr/include/openssl/evp.h)" ;;
    MPI) needs "find_package(MPI)" "$(owner '*/openmpi/include/mpi.h')" ;;
    *)
      needs "find_package($name)" "$(owner "*/cmake/$name/*")"
      ;;
  esac
done < <(sed -n 's/^ *find_package(\([A-Za-z0-9_]*\).*/\1/p' "${cmake_files[@]}" | sort -u)

# The examples: install-deps.sh --build where they build, and no hand-made list of -dev packages.
for file in "$root"/doc/ci/*.yml "$root/doc/ci.md"; do
  if grep -nE '(^|[[:space:]])lib[a-z0-9.+-]+-dev([[:space:]]|$)' "$file"; then
    fail "${file#"$root"/} names build packages itself (above): use scripts/install-deps.sh --build"
  fi
  if grep -qE 'package\.sh|cmake --build' "$file" && ! grep -q 'install-deps.sh --build' "$file"; then
    fail "${file#"$root"/} builds rdmakit without scripts/install-deps.sh --build"
  fi
done

((failures == 0)) || exit 1
echo "PASS: build-deps (${#build[@]} packages)"
