#!/usr/bin/env bash
# rxe-vm.sh [options] DIR COMMAND...
#
# Runs COMMAND inside a throwaway qemu guest that has a real soft-RoCE (rxe) device, for
# hosts whose kernel has no RDMA support. The guest boots this host's Debian kernel under
# TCG, sees the host root read-only and DIR read-write at the same path, loads rdma_rxe
# and rdma_ucm, creates rxe0 on a dummy netdev and runs COMMAND from DIR with the memlock
# limit raised. COMMAND's output is printed and its exit status returned.
#
# The guest mounts fresh tmpfs over /tmp, /run, /var/tmp and /root: anything COMMAND needs
# from the host must live under DIR (put the build folder there).
#
# Guest network (no NIC: nothing leaves the guest):
#   rxenet0 (dummy, rxe0 on it)   10.55.0.1/24, 10.55.0.2/24, fd55::1/64
#   plainnet0 (dummy, no RDMA)     10.56.0.1/24     for tests that need an address without RDMA
# COMMAND sees RDMAKIT_VM=1, RXE_ADDR, RXE_ADDR2, RXE_ADDR6, RXE_DEV, RXE_NETDEV, PLAIN_ADDR.
#
# Options:
#   --timeout SECONDS   kill the guest after this long (default 900, env RXEVM_TIMEOUT)
#   --memory MIB        guest memory (default 2048, env RXEVM_MEM)
#   --kernel VERSION    kernel under /lib/modules to boot (default: newest with rdma_rxe)
# Exit status: COMMAND's; 98 guest setup failed; 99 guest did not finish (timeout or crash);
# 100 a requirement is missing on the host.
# Needs: qemu-system-x86 linux-image-amd64 busybox-static kmod cpio iproute2 rdma-core
# (scripts/install-deps.sh installs them).
set -euo pipefail

timeout_s=${RXEVM_TIMEOUT:-900}
memory_mib=${RXEVM_MEM:-2048}
kver=""
die() { echo "rxe-vm: $*" >&2; exit 100; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --timeout) timeout_s=$2; shift 2 ;;
    --memory) memory_mib=$2; shift 2 ;;
    --kernel) kver=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    --) shift; break ;;
    -*) echo "rxe-vm: unknown option $1" >&2; usage 2 ;;
    *) break ;;
  esac
done
[[ $# -ge 2 ]] || usage 2
[[ -d $1 ]] || die "no such directory: $1"
dir=$(cd "$1" && pwd)
shift
command_line="$*"

command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"
[[ -x /bin/busybox ]] && file -L /bin/busybox 2>/dev/null | grep -q static || [[ -x /bin/busybox ]] ||
  die "/bin/busybox not found (apt-get install busybox-static)"
command -v cpio >/dev/null || die "cpio not found (apt-get install cpio)"
command -v modprobe >/dev/null || die "modprobe not found (apt-get install kmod)"
if [[ -z $kver ]]; then
  for candidate in $(ls /lib/modules 2>/dev/null | sort -Vr); do
    if [[ -f /boot/vmlinuz-$candidate ]] && find "/lib/modules/$candidate" -name 'rdma_rxe.ko*' | grep -q .; then
      kver=$candidate
      break
    fi
  done
fi
[[ -n $kver ]] || die "no kernel with rdma_rxe under /lib/modules with its /boot/vmlinuz (apt-get install linux-image-amd64)"
[[ -r /boot/vmlinuz-$kver ]] || die "cannot read /boot/vmlinuz-$kver"

# The initramfs only has to mount the host root over 9p; everything else comes from there.
cache=${RXEVM_CACHE:-${XDG_CACHE_HOME:-/var/tmp}/rdmakit-rxevm}/$kver-$(sha1sum "$0" | cut -c1-12)
if [[ ! -s $cache/initrd.gz ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp"/root/{bin,sbin,lib/mods,proc,sys,dev,mnt/root}
  cp /bin/busybox "$tmp/root/bin/busybox"
  # The kernel's module autoloader (rdma_rxe asks for crc32 this way) runs /sbin/modprobe
  # in the initramfs root, not in our chroot: forward it to the host's modprobe.
  printf '#!/bin/sh\nexec chroot /mnt/root /sbin/modprobe "$@"\n' > "$tmp/root/sbin/modprobe"
  chmod +x "$tmp/root/sbin/modprobe"
  for module in virtio_pci 9pnet_virtio 9p; do
    modprobe -S "$kver" --show-depends "$module" | awk '$1 == "insmod" {print $2}'
  done | awk '!seen[$0]++' > "$tmp/order"
  [[ -s $tmp/order ]] || die "could not list virtio/9p modules for $kver"
  while read -r module; do cp "$module" "$tmp/root/lib/mods/"; done < "$tmp/order"
  sed 's#.*/##' "$tmp/order" > "$tmp/root/lib/mods/order"
  cat > "$tmp/root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $(cat /lib/mods/order); do insmod /lib/mods/$m; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000 hostroot /mnt/root
work=$(sed -n 's/.*rxevm_dir=\([^ ]*\).*/\1/p' /proc/cmdline)
for d in proc sys dev; do mount --move /$d /mnt/root/$d; done
for d in tmp run var/tmp root; do mount -t tmpfs tmpfs /mnt/root/$d; done
# DIR may sit under one of those tmpfs (a checkout in /tmp): make its mount point there.
mkdir -p /mnt/root$work 2>/dev/null
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 work /mnt/root$work
chroot /mnt/root /bin/sh -c "cd $work && HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/bash .rxevm/guest.sh > .rxevm/out 2>&1; echo \$? > .rxevm/rc"
sync
poweroff -f
INIT
  chmod +x "$tmp/root/init"
  mkdir -p "$cache"
  (cd "$tmp/root" && find . | cpio -o -H newc 2>/dev/null | gzip -1) > "$cache/initrd.gz.new"
  mv "$cache/initrd.gz.new" "$cache/initrd.gz"
fi

state=$dir/.rxevm
mkdir -p "$state"
rm -f "$state/rc" "$state/out" "$state/console"
cat > "$state/guest.sh" <<GUEST
set -u
setup() {
  modprobe rdma_rxe && modprobe rdma_ucm && modprobe dummy numdummies=0 || return 1
  ip link set lo up
  ip link add rxenet0 type dummy && ip link set rxenet0 up || return 1
  ip addr add 10.55.0.1/24 dev rxenet0 && ip addr add 10.55.0.2/24 dev rxenet0 || return 1
  ip -6 addr add fd55::1/64 dev rxenet0 nodad || return 1
  ip link add plainnet0 type dummy && ip link set plainnet0 up && ip addr add 10.56.0.1/24 dev plainnet0 || return 1
  rdma link add rxe0 type rxe netdev rxenet0 || return 1
}
if ! setup; then echo "rxe-vm: guest setup failed"; exit 98; fi
ulimit -l unlimited
export RDMAKIT_VM=1 RXE_DEV=rxe0 RXE_NETDEV=rxenet0 RXE_ADDR=10.55.0.1 RXE_ADDR2=10.55.0.2 RXE_ADDR6=fd55::1 PLAIN_ADDR=10.56.0.1
$command_line
GUEST

status=0
timeout -k 10 "$timeout_s" qemu-system-x86_64 -accel tcg -m "$memory_mib" -smp 2 -nographic -no-reboot \
  -kernel "/boot/vmlinuz-$kver" -initrd "$cache/initrd.gz" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs "local,path=$dir,mount_tag=work,security_model=none" -nic none \
  -append "console=ttyS0 quiet loglevel=0 panic=-1 rxevm_dir=$dir" > "$state/console" 2>&1 || status=$?
cat "$state/out" 2>/dev/null || true
if [[ ! -s $state/rc ]]; then
  if [[ $status -eq 124 || $status -eq 137 ]]; then
    echo "rxe-vm: guest killed after ${timeout_s}s (--timeout); console log: $state/console" >&2
  else
    echo "rxe-vm: guest did not finish (qemu exit $status); console log: $state/console" >&2
    tail -20 "$state/console" >&2 || true
  fi
  exit 99
fi
exit "$(cat "$state/rc")"
