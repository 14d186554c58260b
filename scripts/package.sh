#!/usr/bin/env bash
# package.sh [--print-deb | --print-vm-deb] [BUILD_DIR]: builds the rdmakit Debian packages in BUILD_DIR (default
# $RDMAKIT_PACKAGE_DIR, else build-pkg)
# and checks them: rdmakit (the tools) and rdmakit-rxe-vm (scripts/rxe-vm.sh as
# rdmakit-rxe-vm, depending on qemu and the kernel image, so that the tools' package does not). Programs, man pages and completions are named rdmakit-<tool>, so the
# package installs beside rdmacm-utils, which owns /usr/bin/rping and friends.
#
# Checks: Depends (from dpkg-shlibdeps) names libibverbs1, librdmacm1, libssl3 (libcrypto) and libcap2, Recommends
# rdma-core; the package holds every program, its man page and completion, rdmakit.7, the
# diag-connect agent's systemd unit (ExecStart the packaged program),
# every doc/schema/*.json and the copyright file, no other program, and no file an installed
# package (such as rdmacm-utils) owns; every man page is gzipped (gzip -9n: no name, no time
# stamp) and unpacks to its man/ source; the copyright file is DEP-5 with LICENSE's text;
# each extracted program is stripped and runs --version; each
# completion, sourced in bash, registers itself for its program and completes "--" to
# options including --json, --log-level to its levels, diag-bind --ps and diag-connect --ps
# to their port spaces and send_bw --json-file to file names.
#
# Build output goes to stderr; stdout is the two .debs' paths, one a line, the tools' first;
# --print-deb prints the tools' alone, --print-vm-deb rdmakit-rxe-vm's alone (for
# deb=$(scripts/package.sh --print-deb) in a CI step). The first failed check ends the run
# with one line on stderr and exit 1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
print=both
case ${1:-} in
  --print-deb) print=tools; shift ;;
  --print-vm-deb) print=vm; shift ;;
  -*) echo "package.sh: unknown option '$1' (expected --print-deb, --print-vm-deb)" >&2; exit 2 ;;
esac
# RDMAKIT_PACKAGE_DIR: the default folder, so that scripts/test.sh can run doc/ci's workflow
# step (which names no folder) on the build it has just tested.
dir=${1:-${RDMAKIT_PACKAGE_DIR:-$root/build-pkg}}
prefix=rdmakit-
tools=(rping udaddy ucmatose mckey rdma_server rdma_client send_bw diag-bind diag-connect rdma_smoke rdma_pingmesh)
fail() {
  echo "package: FAILED: $*" >&2
  exit 1
}

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
{
  # A fresh folder is configured without tests; an existing build (CI packages the one it
  # has just tested, to save a third build) keeps its tests, which install nothing.
  # Such a build is given its own program prefix back afterwards, so that an install from
  # it, or its next build, is what it was before it was packaged.
  tests=() restore=()
  if [[ -f $dir/CMakeCache.txt ]]; then
    restore=("-DRDMAKIT_PROGRAM_PREFIX=$(sed -n 's/^RDMAKIT_PROGRAM_PREFIX:STRING=//p' "$dir/CMakeCache.txt")")
  else
    tests=(-DRDMAKIT_BUILD_TESTS=OFF)
  fi
  cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRDMAKIT_PROGRAM_PREFIX="$prefix" \
    "${tests[@]}" -DRDMAKIT_WERROR=ON > "$dir/package-configure.log" 2>&1 ||
    { cat "$dir/package-configure.log"; fail "configure failed (log above)"; }
  cmake --build "$dir" -j "$(nproc)" || fail "build failed (output above)"
  rm -f "$dir"/rdmakit_*.deb "$dir"/rdmakit-rxe-vm_*.deb
  (cd "$dir" && cpack -G DEB) > "$dir/package-cpack.log" 2>&1 ||
    { cat "$dir/package-cpack.log"; fail "cpack failed (log above)"; }
  if [[ ${#restore[@]} -gt 0 ]]; then
    cmake -S "$root" -B "$dir" "${restore[@]}" >> "$dir/package-configure.log" 2>&1 ||
      { cat "$dir/package-configure.log"; fail "restoring the build's program prefix failed (log above)"; }
  fi
} >&2
# rdma_mesh is built where CMake found MPI (libopenmpi-dev); the package then holds it and
# depends on Open MPI's library.
if [[ -x $dir/bin/rdma_mesh ]]; then
  tools+=(rdma_mesh)
fi
debs=("$dir"/rdmakit_*.deb)
[[ ${#debs[@]} -eq 1 && -f ${debs[0]} ]] || fail "cpack made ${#debs[@]} rdmakit_*.deb in $dir, expected one"
deb=${debs[0]}

# Control fields. Depends is dpkg-shlibdeps' reading of what the programs link.
field() { dpkg-deb -f "$deb" "$1"; }
[[ $(field Package) == rdmakit ]] || fail "Package is '$(field Package)', not rdmakit"
depends=$(field Depends)
names() { [[ $1 =~ (^|[ ,])$2([ ,]|$) ]]; }  # a control field's list names package $2
for lib in libibverbs1 librdmacm1 libssl3 libcap2 libmicrohttpd12; do
  names "$depends" "$lib" || fail "Depends lacks $lib: '$depends'"
done
names "$(field Recommends)" rdma-core || fail "Recommends lacks rdma-core: '$(field Recommends)'"

# Contents: paths without the leading "./"; directories end in "/".
mapfile -t contents < <(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./||')
has() {
  local path
  for path in "${contents[@]}"; do [[ $path == "$1" ]] && return 0; done
  return 1
}
expected=(usr/share/man/man7/rdmakit.7.gz usr/share/doc/rdmakit/copyright
  usr/lib/systemd/system/rdmakit-diag-connect-agent.service usr/lib/systemd/system/rdmakit-rdma_pingmesh.service)
for tool in "${tools[@]}"; do
  expected+=("usr/bin/$prefix$tool" "usr/share/man/man1/$prefix$tool.1.gz"
    "usr/share/bash-completion/completions/$prefix$tool")
done
shopt -s nullglob
schemas=("$root"/doc/schema/*.json)
shopt -u nullglob
for schema in "${schemas[@]}"; do
  expected+=("usr/share/doc/rdmakit/schema/${schema##*/}")
done
for path in "${expected[@]}"; do
  has "$path" || fail "the package lacks /$path"
done
for path in "${contents[@]}"; do
  # Co-installable: no file another installed package (rdmacm-utils, say) already owns.
  if [[ $path != */ ]]; then
    owner=$(dpkg-query -S "/$path" 2>/dev/null | cut -d: -f1 || true)
    [[ -z $owner || $owner == rdmakit ]] || fail "/$path is already owned by installed package $owner"
  fi
  if [[ $path == usr/share/man/?*[!/] && $path != *.gz ]]; then
    fail "the man page /$path is not gzipped"
  fi
  if [[ $path == usr/bin/?* ]]; then
    has_tool=false
    for tool in "${tools[@]}"; do [[ $path == "usr/bin/$prefix$tool" ]] && has_tool=true; done
    $has_tool || fail "the package ships an unexpected program /$path"
  fi
  # The test programs (build/tests/bin: crafted_peer) never ship, wherever they would land.
  if [[ ${path##*/} == crafted_peer ]]; then
    fail "the package ships the test program /$path"
  fi
done

# Run what was packaged, from the extracted tree.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -x "$deb" "$tmp"
version=$(field Version)
for tool in "${tools[@]}"; do
  program=$tmp/usr/bin/$prefix$tool
  ! readelf -S --wide "$program" | grep -qE ' \.(symtab|debug_info) ' || fail "$prefix$tool is not stripped"
  out=$("$program" --version 2>&1) || fail "$prefix$tool --version exited $?: $out"
  [[ $out == *"(rdmakit) $version"* ]] || fail "$prefix$tool --version says '$out', not rdmakit $version"
done

# The agent's unit starts the packaged program, and nothing in the package enables it.
unit=$tmp/usr/lib/systemd/system/rdmakit-diag-connect-agent.service
grep -qx "ExecStart=/usr/bin/${prefix}diag-connect --serve .*" "$unit" ||
  fail "the agent's unit does not start /usr/bin/${prefix}diag-connect --serve: $(grep '^ExecStart=' "$unit")"
pingmesh_unit=$tmp/usr/lib/systemd/system/rdmakit-rdma_pingmesh.service
grep -qx "ExecStart=/usr/bin/${prefix}rdma_pingmesh --pinglist .*" "$pingmesh_unit" ||
  fail "rdma_pingmesh's unit does not start /usr/bin/${prefix}rdma_pingmesh: $(grep '^ExecStart=' "$pingmesh_unit")"
for path in "${contents[@]}"; do
  [[ $path != etc/systemd/* ]] || fail "the package enables a unit: /$path"
done

# Man pages: what man/ holds, compressed with gzip -9n (header: no FNAME flag, MTIME 0).
pages=("$tmp/usr/share/man/man7/rdmakit.7.gz=$root/man/rdmakit.7")
for tool in "${tools[@]}"; do
  pages+=("$tmp/usr/share/man/man1/$prefix$tool.1.gz=$root/man/$tool.1")
done
for pair in "${pages[@]}"; do
  page=${pair%%=*} source=${pair#*=}
  gzip -t "$page" 2>/dev/null || fail "${page#"$tmp"} is not a valid gzip file"
  header=$(od -An -tx1 -j3 -N5 "$page" | tr -d ' \n')
  [[ $header == 0000000000 ]] || fail "${page#"$tmp"} stores a name or time stamp (not gzip -n): header $header"
  gzip -dc "$page" | cmp -s - "$source" || fail "${page#"$tmp"} does not unpack to ${source#"$root"/}"
done

# copyright: DEP-5, covering every file, with LICENSE's permission text.
copyright=$tmp/usr/share/doc/rdmakit/copyright
[[ $(head -n 1 "$copyright") == "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" ]] ||
  fail "/usr/share/doc/rdmakit/copyright is not DEP-5 (first line: $(head -n 1 "$copyright"))"
grep -qx 'Files: \*' "$copyright" || fail "the copyright file has no 'Files: *' paragraph"
grep -qx 'License: Expat' "$copyright" || fail "the copyright file has no 'License: Expat' paragraph"
holder=$(sed -n 's/^Copyright (c) //p' "$root/LICENSE")
grep -qxF "Copyright: $holder" "$copyright" || fail "the copyright file does not name '$holder' (LICENSE's holder)"
# The last paragraph's license text, unindented (" ." is a blank line), is LICENSE's from
# "Permission" on.
diff <(awk '/^License: Expat$/ { text = ""; next } { text = text $0 "\n" } END { printf "%s", text }' "$copyright" |
  sed 's/^ //; s/^\.$//') <(sed -n '/^Permission is hereby granted/,$p' "$root/LICENSE") > /dev/null ||
  fail "the copyright file's license text differs from LICENSE"

# COMPREPLY for completing WORDS... (the last is the word being completed) with the script
# FILE as bash-completion would load it for PROGRAM; "!" and a reason if it registers none.
complete_words() {
  local file=$1 program=$2
  shift 2
  bash --norc --noprofile -c '
    file=$1 program=$2
    shift 2
    source "$file" >/dev/null 2>&1 || { echo "! sourcing it fails"; exit 0; }
    spec=$(complete -p "$program" 2>/dev/null) || { echo "! it registers no completion for $program"; exit 0; }
    fn=${spec#*-F }
    fn=${fn%% *}
    [[ $spec == *" -F "* ]] && declare -F "$fn" >/dev/null || { echo "! it registers no function: $spec"; exit 0; }
    COMP_WORDS=("$program" "$@")
    COMP_CWORD=$#
    COMPREPLY=()
    "$fn" "$program" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    printf "%s\n" "${COMPREPLY[@]}"
  ' _ "$file" "$program" "$@"
}
# Fails unless completing WORDS offers every one of WANTED (given as "w1 w2 ...").
expect_completion() {
  local file=$1 program=$2 wanted=$3
  shift 3
  local reply word
  reply=$(complete_words "$file" "$program" "$@")
  [[ $reply != '!'* ]] || fail "completion $file: ${reply#! }"
  for word in $wanted; do
    grep -qxF -- "$word" <<<"$reply" ||
      fail "completing '$program $*' in $file does not offer $word (got: $(tr '\n' ' ' <<<"$reply"))"
  done
}
completions=$tmp/usr/share/bash-completion/completions
for tool in "${tools[@]}"; do
  file=$completions/$prefix$tool
  expect_completion "$file" "$prefix$tool" "--json --timeout --log-level --help --version" --
  expect_completion "$file" "$prefix$tool" "trace debug off" --log-level ''
done
expect_completion "$completions/${prefix}diag-bind" "${prefix}diag-bind" "tcp udp ib" --ps ''
expect_completion "$completions/${prefix}diag-connect" "${prefix}diag-connect" "tcp udp ib" --ps ''
touch "$tmp/report-target.json"
expect_completion "$completions/${prefix}send_bw" "${prefix}send_bw" "$tmp/report-target.json" \
  --json-file "$tmp/report-t"

# rdmakit-rxe-vm: the VM runner alone, with its man page and copyright; its Depends bring
# qemu and the kernel; its --help says how to use it.
vm_debs=("$dir"/rdmakit-rxe-vm_*.deb)
[[ ${#vm_debs[@]} -eq 1 && -f ${vm_debs[0]} ]] || fail "cpack made ${#vm_debs[@]} rdmakit-rxe-vm_*.deb, expected one"
vm_deb=${vm_debs[0]}
[[ $(dpkg-deb -f "$vm_deb" Package) == rdmakit-rxe-vm ]] || fail "the VM package is named '$(dpkg-deb -f "$vm_deb" Package)'"
vm_depends=$(dpkg-deb -f "$vm_deb" Depends)
for need in qemu-system-x86 linux-image-amd64 busybox-static kmod cpio rdma-core; do
  names "$vm_depends" "$need" || fail "rdmakit-rxe-vm's Depends lacks $need: '$vm_depends'"
done
mapfile -t vm_contents < <(dpkg-deb -c "$vm_deb" | awk '{print $6}' | sed 's|^\./||' | grep -v '/$')
vm_expected=(usr/bin/rdmakit-rxe-vm usr/share/man/man1/rdmakit-rxe-vm.1.gz usr/share/doc/rdmakit-rxe-vm/copyright)
[[ $(printf '%s\n' "${vm_contents[@]}" | sort) == $(printf '%s\n' "${vm_expected[@]}" | sort) ]] ||
  fail "rdmakit-rxe-vm holds $(printf '/%s ' "${vm_contents[@]}")instead of $(printf '/%s ' "${vm_expected[@]}")"
vm_tmp=$tmp/rxe-vm
dpkg-deb -x "$vm_deb" "$vm_tmp"
vm_help=$("$vm_tmp/usr/bin/rdmakit-rxe-vm" --help 2>&1) || fail "rdmakit-rxe-vm --help exited $?"
[[ $vm_help == *"-- COMMAND [ARG...]"* ]] || fail "rdmakit-rxe-vm --help does not show the -- COMMAND form"
gzip -dc "$vm_tmp/usr/share/man/man1/rdmakit-rxe-vm.1.gz" | cmp -s - "$root/man/rdmakit-rxe-vm.1" ||
  fail "rdmakit-rxe-vm's man page does not unpack to man/rdmakit-rxe-vm.1"

size=$(stat -c %s "$deb")
files=$(printf '%s\n' "${contents[@]}" | grep -vc '/$' || true)
echo "package: ok: ${#tools[@]} programs, gzipped man pages, completions, ${#schemas[@]} schemas, copyright;" \
  "$files files," \
  "$((size / 1024)) KiB; Depends: $depends" >&2
echo "package: ok: rdmakit-rxe-vm: the program, its man page, copyright; Depends: $vm_depends" >&2
[[ $print == vm ]] || echo "$deb"
[[ $print == tools ]] || echo "$vm_deb"
