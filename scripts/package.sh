#!/usr/bin/env bash
# package.sh [--print-deb | --print-debs | --print-vm-deb] [BUILD_DIR]: builds the rdmakit
# Debian packages in BUILD_DIR (default $RDMAKIT_PACKAGE_DIR, else build-pkg) and checks them.
# They follow what the programs link (cmake/Packaging.cmake): rdmakit (the tools that
# measure, rdmakit(7), the schemas), rdmakit-diag (diag-bind, diag-connect, the agent's
# unit), rdmakit-smoke (rdma_smoke), rdmakit-pingmesh (rdma_pingmesh, its unit),
# rdmakit-mesh (rdma_mesh, where CMake found MPI) and rdmakit-rxe-vm (scripts/rxe-vm.sh as
# rdmakit-rxe-vm, depending on qemu and the kernel image, so that no tool's package does).
# Programs, man pages and completions are named rdmakit-<tool>, so the packages install beside
# rdmacm-utils, which owns /usr/bin/rping and friends.
#
# Checks: each package's Depends (from dpkg-shlibdeps, after ours) names the libraries its
# programs need (rdmakit's none that only the others' need: no libssl3, libcap2,
# libnftables1, libmicrohttpd12, libopenmpi3 or libpugixml1v5), and the packages of
# ours it needs at this version; rdmakit Recommends rdma-core and rdmakit-diag (--diagnose),
# rdmakit-pingmesh rdmakit-diag (a path's diagnosis).
# Each holds its programs, their man pages and completions and its copyright file, and no
# other program; rdmakit holds rdmakit.7 and every doc/schema/*.json; the agent's and
# rdma_pingmesh's systemd units (ExecStart the packaged program, not enabled) are in
# rdmakit-diag and rdmakit-pingmesh. No file an installed package (such as rdmacm-utils)
# owns; every man page is gzipped (gzip -9n: no name, no time stamp) and unpacks to its man/
# source; the copyright files are DEP-5 with LICENSE's text; each extracted program is
# stripped and runs --version; each completion, sourced in bash, registers itself for its
# program and completes "--" to options including --json, --log-level to its levels,
# diag-bind --ps and diag-connect --ps to their port spaces and send_bw --json-file to file
# names.
#
# Build output goes to stderr; stdout is the .debs' paths, one a line, rdmakit's first and
# rdmakit-rxe-vm's last; --print-deb prints rdmakit's alone, --print-debs every tool package's
# (all but the VM runner's) on one line, --print-vm-deb rdmakit-rxe-vm's alone (for
# debs=$(scripts/package.sh --print-debs) in a CI step). The first failed check ends the run
# with one line on stderr and exit 1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
print=all
case ${1:-} in
  --print-deb) print=tools; shift ;;
  --print-debs) print=packages; shift ;;
  --print-vm-deb) print=vm; shift ;;
  -*) echo "package.sh: unknown option '$1' (expected --print-deb, --print-debs, --print-vm-deb)" >&2; exit 2 ;;
esac
# RDMAKIT_PACKAGE_DIR: the default folder, so that scripts/test.sh can run doc/ci's workflow
# step (which names no folder) on the build it has just tested.
dir=${1:-${RDMAKIT_PACKAGE_DIR:-$root/build-pkg}}
prefix=rdmakit-
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
  rm -f "$dir"/rdmakit_*.deb "$dir"/rdmakit-*_*.deb
  (cd "$dir" && cpack -G DEB) > "$dir/package-cpack.log" 2>&1 ||
    { cat "$dir/package-cpack.log"; fail "cpack failed (log above)"; }
  if [[ ${#restore[@]} -gt 0 ]]; then
    cmake -S "$root" -B "$dir" "${restore[@]}" >> "$dir/package-configure.log" 2>&1 ||
      { cat "$dir/package-configure.log"; fail "restoring the build's program prefix failed (log above)"; }
  fi
} >&2
# Each package: its programs, the libraries its Depends must name, those it must not (another
# package's), and the packages of ours it needs. rdma_mesh is built where CMake found MPI
# (libopenmpi-dev); libnftables1 where libnftables-dev was found.
declare -A programs=(
  [rdmakit]="rping udaddy ucmatose mckey rdma_server rdma_client send_bw"
  [rdmakit-diag]="diag-bind diag-connect"
  [rdmakit-smoke]="rdma_smoke"
  [rdmakit-pingmesh]="rdma_pingmesh"
)
declare -A needs=(
  [rdmakit]="libibverbs1 librdmacm1"
  [rdmakit-diag]="libibverbs1 librdmacm1 libssl3 libcap2 rdmakit"
  [rdmakit-smoke]="libpugixml1v5 rdmakit rdmakit-diag"
  [rdmakit-pingmesh]="libmicrohttpd12 rdmakit"
  [rdmakit-mesh]="libopenmpi3 rdmakit"
)
declare -A units=(
  [rdmakit-diag]="rdmakit-diag-connect-agent.service=diag-connect --serve"
  [rdmakit-pingmesh]="rdmakit-rdma_pingmesh.service=rdma_pingmesh --pinglist"
)
# What only the other packages' programs need: never a dependency of rdmakit's; and what
# rdmakit-mesh's ranks and rdma_smoke do not need (they read the host as diag-bind does, not
# as diag-connect's agent; rdma_smoke runs diag-bind, which rdmakit-diag brings).
others_libraries="libssl3 libcap2 libnftables1 libmicrohttpd12 libopenmpi3 libpugixml1v5"
declare -A lacks=(
  [rdmakit]=$others_libraries
  [rdmakit-mesh]="libssl3 libcap2 libnftables1 libmicrohttpd12 libpugixml1v5"
  [rdmakit-pingmesh]="libssl3 libcap2 libnftables1 libopenmpi3 libpugixml1v5"
  [rdmakit-smoke]="libcap2 libnftables1 libmicrohttpd12 libopenmpi3"
)
packages=(rdmakit rdmakit-diag rdmakit-smoke rdmakit-pingmesh)
if [[ -x $dir/bin/rdma_mesh ]]; then
  packages+=(rdmakit-mesh)
  programs[rdmakit-mesh]="rdma_mesh"
fi
grep -q '^NFTABLES_FOUND:INTERNAL=1' "$dir/CMakeCache.txt" && needs[rdmakit-diag]+=" libnftables1"

declare -A debs=()
for package in "${packages[@]}"; do
  found=("$dir/${package}_"*.deb)
  [[ ${#found[@]} -eq 1 && -f ${found[0]} ]] || fail "cpack made ${#found[@]} ${package}_*.deb in $dir, expected one"
  debs[$package]=${found[0]}
done
unexpected=$(find "$dir" -maxdepth 1 -name 'rdmakit*.deb' | while read -r made; do
  name=${made##*/} name=${name%%_*}
  [[ -n ${debs[$name]:-} || $name == rdmakit-rxe-vm ]] || echo "$name"
done)
[[ -z $unexpected ]] || fail "cpack made packages no one expects: $unexpected"
deb=${debs[rdmakit]}
version=$(dpkg-deb -f "$deb" Version)

names() { [[ $1 =~ (^|[ ,])$2([ ,]|$) ]]; }  # a control field's list names package $2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tools=() pages=("$tmp/usr/share/man/man7/rdmakit.7.gz=$root/man/rdmakit.7")
files=0 size=0
for package in "${packages[@]}"; do
  package_deb=${debs[$package]}
  field() { dpkg-deb -f "$package_deb" "$1"; }
  [[ $(field Package) == "$package" ]] || fail "${package_deb##*/}: Package is '$(field Package)', not $package"
  [[ $(field Version) == "$version" ]] || fail "$package is version $(field Version), rdmakit $version"
  depends=$(field Depends)
  for need in ${needs[$package]}; do
    names "$depends" "$need" || fail "$package's Depends lacks $need: '$depends'"
    if [[ $need == rdmakit* ]]; then
      [[ $depends == *"$need (= $version)"* ]] || fail "$package's Depends does not want $need at $version: '$depends'"
    fi
  done
  for library in ${lacks[$package]:-}; do
    ! names "$depends" "$library" || fail "$package depends on $library, which only the other packages' programs need"
  done
  echo "package: $package: Depends: $depends" >&2

  # Contents: paths without the leading "./"; directories end in "/".
  mapfile -t contents < <(dpkg-deb -c "$package_deb" | awk '{print $6}' | sed 's|^\./||')
  has() {
    local path
    for path in "${contents[@]}"; do [[ $path == "$1" ]] && return 0; done
    return 1
  }
  expected=("usr/share/doc/$package/copyright")
  for tool in ${programs[$package]}; do
    tools+=("$tool")
    pages+=("$tmp/usr/share/man/man1/$prefix$tool.1.gz=$root/man/$tool.1")
    expected+=("usr/bin/$prefix$tool" "usr/share/man/man1/$prefix$tool.1.gz"
      "usr/share/bash-completion/completions/$prefix$tool")
  done
  if [[ -n ${units[$package]:-} ]]; then expected+=("usr/lib/systemd/system/${units[$package]%%=*}"); fi
  # rdma_pingmesh diagnoses a path gone bad by running diag-bind.
  if [[ $package == rdmakit-pingmesh ]]; then
    names "$(field Recommends)" rdmakit-diag || fail "rdmakit-pingmesh's Recommends lacks rdmakit-diag: '$(field Recommends)'"
  fi
  if [[ $package == rdmakit ]]; then
    names "$(field Recommends)" rdma-core || fail "rdmakit's Recommends lacks rdma-core: '$(field Recommends)'"
    names "$(field Recommends)" rdmakit-diag || fail "rdmakit's Recommends lacks rdmakit-diag: '$(field Recommends)'"
    expected+=(usr/share/man/man7/rdmakit.7.gz)
    shopt -s nullglob
    schemas=("$root"/doc/schema/*.json)
    shopt -u nullglob
    for schema in "${schemas[@]}"; do
      expected+=("usr/share/doc/rdmakit/schema/${schema##*/}")
    done
  fi
  for path in "${expected[@]}"; do
    has "$path" || fail "$package lacks /$path"
  done
  for path in "${contents[@]}"; do
    # Co-installable: no file another installed package (rdmacm-utils, say) already owns.
    if [[ $path != */ ]]; then
      files=$((files + 1))
      owner=$(dpkg-query -S "/$path" 2>/dev/null | cut -d: -f1 || true)
      [[ -z $owner || $owner == "$package" ]] || fail "/$path is already owned by installed package $owner"
    fi
    if [[ $path == usr/share/man/?*[!/] && $path != *.gz ]]; then
      fail "the man page /$path is not gzipped"
    fi
    if [[ $path == usr/bin/?* ]]; then
      has_tool=false
      for tool in ${programs[$package]}; do [[ $path == "usr/bin/$prefix$tool" ]] && has_tool=true; done
      $has_tool || fail "$package ships an unexpected program /$path"
    fi
    [[ $path != usr/lib/systemd/system/?* || $path == "usr/lib/systemd/system/${units[$package]%%=*}" ]] ||
      fail "$package ships the unit /$path"
    # The test programs (build/tests/bin: crafted_peer) never ship, wherever they would land.
    [[ ${path##*/} != crafted_peer ]] || fail "$package ships the test program /$path"
    [[ $path != etc/systemd/* ]] || fail "$package enables a unit: /$path"
  done
  size=$((size + $(stat -c %s "$package_deb")))
  # Unpacked together, as they install: one tree for the checks below.
  dpkg-deb -x "$package_deb" "$tmp"

  # copyright: DEP-5, covering every file, with LICENSE's permission text.
  copyright=$tmp/usr/share/doc/$package/copyright
  [[ $(head -n 1 "$copyright") == "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" ]] ||
    fail "/usr/share/doc/$package/copyright is not DEP-5 (first line: $(head -n 1 "$copyright"))"
  grep -qx 'Files: \*' "$copyright" || fail "$package's copyright file has no 'Files: *' paragraph"
  grep -qx 'License: Expat' "$copyright" || fail "$package's copyright file has no 'License: Expat' paragraph"
  holder=$(sed -n 's/^Copyright (c) //p' "$root/LICENSE")
  grep -qxF "Copyright: $holder" "$copyright" || fail "$package's copyright file does not name '$holder' (LICENSE's holder)"
  # The last paragraph's license text, unindented (" ." is a blank line), is LICENSE's from
  # "Permission" on.
  diff <(awk '/^License: Expat$/ { text = ""; next } { text = text $0 "\n" } END { printf "%s", text }' "$copyright" |
    sed 's/^ //; s/^\.$//') <(sed -n '/^Permission is hereby granted/,$p' "$root/LICENSE") > /dev/null ||
    fail "$package's copyright file's license text differs from LICENSE"
done

# Run what was packaged, from the extracted tree.
for tool in "${tools[@]}"; do
  program=$tmp/usr/bin/$prefix$tool
  ! readelf -S --wide "$program" | grep -qE ' \.(symtab|debug_info) ' || fail "$prefix$tool is not stripped"
  out=$("$program" --version 2>&1) || fail "$prefix$tool --version exited $?: $out"
  [[ $out == *"(rdmakit) $version"* ]] || fail "$prefix$tool --version says '$out', not rdmakit $version"
done

# The units start the packaged programs.
for package in "${!units[@]}"; do
  unit=$tmp/usr/lib/systemd/system/${units[$package]%%=*} command=${units[$package]#*=}
  grep -qx "ExecStart=/usr/bin/${prefix}$command .*" "$unit" ||
    fail "${unit##*/} does not start /usr/bin/${prefix}$command: $(grep '^ExecStart=' "$unit")"
done

# Man pages: what man/ holds, compressed with gzip -9n (header: no FNAME flag, MTIME 0).
for pair in "${pages[@]}"; do
  page=${pair%%=*} source=${pair#*=}
  gzip -t "$page" 2>/dev/null || fail "${page#"$tmp"} is not a valid gzip file"
  header=$(od -An -tx1 -j3 -N5 "$page" | tr -d ' \n')
  [[ $header == 0000000000 ]] || fail "${page#"$tmp"} stores a name or time stamp (not gzip -n): header $header"
  gzip -dc "$page" | cmp -s - "$source" || fail "${page#"$tmp"} does not unpack to ${source#"$root"/}"
done

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

echo "package: ok: ${#packages[@]} packages (${packages[*]}): ${#tools[@]} programs, gzipped man pages, completions," \
  "${#schemas[@]} schemas, copyright files; $files files, $((size / 1024)) KiB" >&2
echo "package: ok: rdmakit-rxe-vm: the program, its man page, copyright; Depends: $vm_depends" >&2
tool_debs=()
for package in "${packages[@]}"; do tool_debs+=("${debs[$package]}"); done
case $print in
  tools) echo "$deb" ;;
  packages) echo "${tool_debs[*]}" ;;
  vm) echo "$vm_deb" ;;
  all) printf '%s\n' "${tool_debs[@]}" "$vm_deb" ;;
esac
