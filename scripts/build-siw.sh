#!/usr/bin/env bash
# build-siw.sh [DIR]: builds soft-iWARP (siw.ko) out of tree for the kernel the test guest
# boots (scripts/rxe-vm.sh's: the newest under /lib/modules with rdma_rxe), into DIR
# (default build/siw), from Debian's linux-source and that kernel's headers, which it
# installs when missing (root or sudo). Debian's kernels leave CONFIG_RDMA_SIW off; the module
# is the kernel's own source, built unchanged. The integration case siw_tools loads it in the
# guest and runs the rdma_cm tools and send_bw over siw, a second provider beside rxe (iWARP).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build/siw}
die() { echo "build-siw: $*" >&2; exit 1; }

kver=
for candidate in $(find /lib/modules -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort -Vr); do
  if [[ -f /boot/vmlinuz-$candidate ]] && find "/lib/modules/$candidate" -name 'rdma_rxe.ko*' | grep -q .; then
    kver=$candidate
    break
  fi
done
[[ -n $kver ]] || die "no kernel with rdma_rxe under /lib/modules (apt-get install linux-image-amd64)"
# 6.1.0-56-amd64 -> linux-source-6.1, linux-headers-6.1.0-56-amd64
series=$(cut -d. -f1,2 <<< "$kver")
headers=/usr/src/linux-headers-$kver
source_tar=/usr/src/linux-source-$series.tar.xz
missing=()
[[ -d $headers ]] || missing+=("linux-headers-$kver")
[[ -f $source_tar ]] || missing+=("linux-source-$series")
if ((${#missing[@]} > 0)); then
  as_root=()
  [[ $(id -u) -eq 0 ]] || as_root=(sudo)
  echo "build-siw: installing ${missing[*]}"
  "${as_root[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Only siw's folder out of the whole tree (the archive is read once, ~1 min of xz).
tar -xJf "$source_tar" -C "$work" "linux-source-$series/drivers/infiniband/sw/siw"
src=$work/linux-source-$series/drivers/infiniband/sw/siw
make -s -C "$headers" M="$src" CONFIG_RDMA_SIW=m modules
mkdir -p "$out"
cp "$src/siw.ko" "$out/siw.ko"
echo "$kver" > "$out/kernel"
echo "build-siw: $out/siw.ko for $kver ($(modinfo -F depends "$out/siw.ko"))"
