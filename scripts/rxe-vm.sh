#!/usr/bin/env bash
# rxe-vm.sh [options] DIR COMMAND...
# rxe-vm.sh [options] -- COMMAND [ARG...]
# (installed by the rdmakit-rxe-vm package as rdmakit-rxe-vm)
#
# Runs COMMAND inside a throwaway qemu guest that has a real soft-RoCE (rxe) device, for
# hosts whose kernel has no RDMA support. The guest boots this host's Debian kernel under
# TCG, sees the host root read-only and DIR read-write at the same path, loads rdma_rxe
# and rdma_ucm, creates rxe0 on a dummy netdev and runs COMMAND from DIR with the memlock
# limit raised. COMMAND's output is printed and its exit status returned. In the first
# form COMMAND is one shell command line; in the second, after --, it is a program and its
# arguments, each passed as is, and DIR is the current directory:
#   rdmakit-rxe-vm -- rdmakit-rdma_smoke --junit rdma-smoke.xml
#
# The guest mounts fresh tmpfs over /tmp, /run, /var/tmp and /root: anything COMMAND needs
# from the host must live under DIR (put the build folder there).
#
# The guest's host name is rxevm (with --pair: rxevm-a and rxevm-b).
#
# Guest network (no NIC: nothing leaves the guest):
#   rxenet0 (dummy, rxe0 on it)   10.55.0.1/24, 10.55.0.2/24, fd55::1/64
#   plainnet0 (dummy, no RDMA)     10.56.0.1/24     for tests that need an address without RDMA
# COMMAND sees RDMAKIT_VM=1, RXE_ADDR, RXE_ADDR2, RXE_ADDR6, RXE_DEV, RXE_NETDEV, PLAIN_ADDR.
#
# Two hosts (--pair): two guests joined by a qemu stream socket (virtio-net, a real wire
# between two kernels), each with rxe1 on that NIC besides the loopback setup above, and by
# a second wire without RDMA, a management network (what diag-connect's agent is reached
# over when the RDMA path is down):
#   guest a (the peer):  10.57.0.1/24, fd57::1/64; management 10.58.0.1/24   runs what b asks
#   guest b (COMMAND):   10.57.0.2/24, fd57::2/64; management 10.58.0.2/24
# COMMAND runs on b and also sees WIRE_ADDR, WIRE_ADDR6, WIRE_DEV=rxe1, WIRE_NETDEV, PEER_ADDR,
# PEER_ADDR6, MGMT_ADDR, MGMT_NETDEV, PEER_MGMT_ADDR (the peer sees its own WIRE_NETDEV and
# MGMT_NETDEV) and RXEVM_RPC, a folder shared by both guests through which b starts, signals
# and waits for commands on a (the protocol is in the peer agent below; the helpers that
# speak it are remote_* in tests/integration/lib.sh).
#
# Options:
#   --timeout SECONDS   kill the guest after this long (default 900, env RXEVM_TIMEOUT)
#   --memory MIB        guest memory (default 2048, env RXEVM_MEM)
#   --kernel VERSION    kernel under /lib/modules to boot (default: newest with rdma_rxe)
#   --pair              boot two guests on one wire (above); memory is per guest
#   --name NAME         keep this run's state in DIR/.rxevm-NAME* instead of DIR/.rxevm*, so
#                       that several runs can share DIR at once
#   --systemd           boot the host's systemd as PID 1 and run COMMAND as a service of it
#                       (one guest only, not with --pair), for tests that start our units for
#                       real. The root is then writable: an overlay, tmpfs over the host root
#                       (what the guest writes is lost at its end). COMMAND runs as root in
#                       unit rxevm-command.service (after basic.target: journald, udevd, the
#                       dynamic users' machinery), with what guest.sh sets up as above; its
#                       output, exit status and 99 are as without --systemd. timers.target
#                       and systemd-timesyncd are masked (no apt-daily in a test guest).
#                       Slower: systemd-analyze says kernel 5-7 s + userspace 12-14 s under
#                       TCG, and COMMAND starts 26-34 s after the kernel (7-16 s without
#                       --systemd; udev loads rdma-core's modules beside guest.sh's setup);
#                       a COMMAND of nothing takes 36-44 s, not 12-21 s (a host with 2 busy
#                       cores). tests/packaging/units_under_systemd.sh is what it is for.
# Environment: RXEVM_ROOT_CACHE (default loose) and RXEVM_WORK_CACHE (default mmap), the 9p
# cache modes of the host root and of DIR in the guest (none, loose, fscache, mmap).
# Exit status: COMMAND's; 98 guest setup failed; 99 guest did not finish (timeout or crash);
# 100 a requirement is missing on the host.
# Needs: qemu-system-x86 linux-image-amd64 busybox-static kmod cpio iproute2 rdma-core
# (scripts/install-deps.sh installs them).
set -euo pipefail

timeout_s=${RXEVM_TIMEOUT:-900}
# 9p caching in the guest. Every process start in the guest faults its program and
# libraries in page by page; uncached, each fault is a 9p round trip to the host, and a
# sanitized tool took 5-35 s to print --version (0.5-0.9 s cached; the plain build 0.7-2.5 s,
# 0.25 s cached). The host root is read-only and unchanged while a guest runs: loose. DIR
# is written by the guest and, with --pair, shared by two guests: only mmapped pages (the
# programs) are cached there, reads and writes stay coherent.
root_cache=${RXEVM_ROOT_CACHE:-loose}
work_cache=${RXEVM_WORK_CACHE:-mmap}
memory_mib=${RXEVM_MEM:-2048}
kver=""
pair=false
systemd=false
state_prefix=.rxevm
die() { echo "rxe-vm: $*" >&2; exit 100; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --timeout) timeout_s=$2; shift 2 ;;
    --memory) memory_mib=$2; shift 2 ;;
    --kernel) kver=$2; shift 2 ;;
    --pair) pair=true; shift ;;
    --systemd) systemd=true; shift ;;
    --name) state_prefix=.rxevm-$2; shift 2 ;;
    -h|--help) usage 0 ;;
    --) shift; words=true; break ;;
    -*) echo "rxe-vm: unknown option $1" >&2; usage 2 ;;
    *) break ;;
  esac
done
if $pair && $systemd; then
  echo "rxe-vm: --systemd boots one guest; it does not go with --pair" >&2
  exit 2
fi
if ${words:-false}; then
  # -- PROGRAM [ARG...]: run from the current directory, each word quoted for the guest's shell.
  [[ $# -ge 1 ]] || usage 2
  dir=$PWD
  command_line=$(printf '%q ' "$@")
else
  [[ $# -ge 2 ]] || usage 2
  [[ -d $1 ]] || die "no such directory: $1"
  dir=$(cd "$1" && pwd)
  shift
  command_line="$*"
fi

command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"
[[ -x /bin/busybox ]] && file -L /bin/busybox 2>/dev/null | grep -q static || [[ -x /bin/busybox ]] ||
  die "/bin/busybox not found (apt-get install busybox-static)"
command -v cpio >/dev/null || die "cpio not found (apt-get install cpio)"
command -v modprobe >/dev/null || die "modprobe not found (apt-get install kmod)"
if [[ -z $kver ]]; then
  for candidate in $(find /lib/modules -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort -Vr); do
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
  # --systemd's overlay root: loaded only then.
  modprobe -S "$kver" --show-depends overlay | awk '$1 == "insmod" {print $2}' > "$tmp/order.systemd"
  [[ -s $tmp/order.systemd ]] || die "could not list the overlay module for $kver"
  while read -r module; do cp "$module" "$tmp/root/lib/mods/"; done < "$tmp/order.systemd"
  sed 's#.*/##' "$tmp/order.systemd" > "$tmp/root/lib/mods/order.systemd"
  cat > "$tmp/root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $(cat /lib/mods/order); do insmod /lib/mods/$m; done
root_cache=$(sed -n 's/.*rxevm_root_cache=\([^ ]*\).*/\1/p' /proc/cmdline)
work_cache=$(sed -n 's/.*rxevm_work_cache=\([^ ]*\).*/\1/p' /proc/cmdline)
systemd=$(sed -n 's/.*rxevm_systemd=\([^ ]*\).*/\1/p' /proc/cmdline)
if [ "$systemd" = 1 ]; then
  # --systemd: the root is an overlay, tmpfs over the read-only host root, so that /etc,
  # /var/lib (StateDirectory=, DynamicUser='s /var/lib/private) and the rest are writable.
  for m in $(cat /lib/mods/order.systemd); do insmod /lib/mods/$m; done
  mkdir -p /mnt/lower /mnt/rw
  mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=${root_cache:-none} hostroot /mnt/lower
  mount -t tmpfs -o mode=0755 rw /mnt/rw
  mkdir /mnt/rw/upper /mnt/rw/work
  mount -t overlay -o lowerdir=/mnt/lower,upperdir=/mnt/rw/upper,workdir=/mnt/rw/work overlay /mnt/root
else
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=${root_cache:-none} hostroot /mnt/root
fi
work=$(sed -n 's/.*rxevm_dir=\([^ ]*\).*/\1/p' /proc/cmdline)
state=$(sed -n 's/.*rxevm_state=\([^ ]*\).*/\1/p' /proc/cmdline)
for d in proc sys dev; do mount --move /$d /mnt/root/$d; done
for d in tmp run var/tmp root; do mount -t tmpfs tmpfs /mnt/root/$d; done
# DIR may sit under one of those tmpfs (a checkout in /tmp): make its mount point there.
mkdir -p /mnt/root$work 2>/dev/null
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=${work_cache:-none} work /mnt/root$work
if [ "$systemd" = 1 ]; then
  # systemd as PID 1 (rxevm.target, on the kernel command line): COMMAND runs in a service,
  # the same shell line as the chroot's below, and its end powers the guest off. Type=exec,
  # not oneshot: the boot is finished once it runs (systemd-analyze works in COMMAND).
  chmod 0755 /mnt/root/run; chmod 0700 /mnt/root/root
  # A host root made in a container has /.dockerenv: systemd would take the guest for a
  # container and ignore the kernel command line (systemd.unit=), udev, and more.
  rm -f /mnt/root/.dockerenv /mnt/root/run/.containerenv
  mkdir -p /mnt/root/run/systemd/system
  cat > /mnt/root/run/rxevm-command.sh <<CMD
cd $work && HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/bash $state/guest.sh > $state/out 2>&1; echo \$? > $state/rc
CMD
  cat > /mnt/root/run/systemd/system/rxevm-command.service <<UNIT
[Unit]
Description=rxe-vm COMMAND
SuccessAction=poweroff-force
FailureAction=poweroff-force
[Service]
Type=exec
ExecStart=/bin/sh /run/rxevm-command.sh
ExecStopPost=/bin/sync
Environment=TERM=linux
StandardOutput=journal+console
TimeoutStartSec=infinity
LimitMEMLOCK=infinity
LimitNOFILE=1024:4096
TasksMax=infinity
UNIT
  cat > /mnt/root/run/systemd/system/rxevm.target <<UNIT
[Unit]
Description=rxe-vm: COMMAND under systemd
Wants=rxevm-command.service
AllowIsolate=yes
UNIT
  for unit in timers.target systemd-timesyncd.service; do
    ln -s /dev/null /mnt/root/run/systemd/system/$unit
  done
  exec switch_root /mnt/root /lib/systemd/systemd
fi
chroot /mnt/root /bin/sh -c "cd $work && HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/bash $state/guest.sh > $state/out 2>&1; echo \$? > $state/rc"
sync
poweroff -f
INIT
  chmod +x "$tmp/root/init"
  mkdir -p "$cache"
  # A name of this run's own, then one rename: two runs that start together (the suite's
  # single guest and its pair) each write a whole file, and either's is the one kept.
  (cd "$tmp/root" && find . | cpio -o -H newc 2>/dev/null | gzip -1) > "$cache/initrd.gz.$$"
  mv "$cache/initrd.gz.$$" "$cache/initrd.gz"
fi

# guest_script ROLE: the script a guest runs (ROLE: single, a or b).
guest_script() {
  local role=$1 wire_setup="" wire_env="" body host_name=rxevm
  # A guest needs a name: mpirun (rdma_mesh's cases) refuses to start on an empty one.
  [[ $role != single ]] && host_name=rxevm-$role
  if [[ $role != single ]]; then
    local own=1 peer=2
    [[ $role == b ]] && own=2 peer=1
    wire_setup="
  modprobe virtio_net || return 1
  WIRE_NETDEV=\$(grep -l 52:54:00:57 /sys/class/net/*/address | head -1 | cut -d/ -f5)
  MGMT_NETDEV=\$(grep -l 52:54:00:58 /sys/class/net/*/address | head -1 | cut -d/ -f5)
  [[ -n \$WIRE_NETDEV && -n \$MGMT_NETDEV ]] || { echo 'rxe-vm: the guest lacks a virtio NIC'; return 1; }
  ip link set \$MGMT_NETDEV up && ip addr add 10.58.0.$own/24 dev \$MGMT_NETDEV || return 1
  ip link set \$WIRE_NETDEV up && ip addr add 10.57.0.$own/24 dev \$WIRE_NETDEV || return 1
  ip -6 addr add fd57::$own/64 dev \$WIRE_NETDEV nodad || return 1
  rdma link add rxe1 type rxe netdev \$WIRE_NETDEV || return 1"
    wire_env="export WIRE_DEV=rxe1 WIRE_NETDEV MGMT_NETDEV WIRE_ADDR=10.57.0.$own WIRE_ADDR6=fd57::$own"
    wire_env+=" MGMT_ADDR=10.58.0.$own PEER_MGMT_ADDR=10.58.0.$peer"
    wire_env+=" PEER_ADDR=10.57.0.$peer PEER_ADDR6=fd57::$peer RXEVM_RPC=$rpc"
  fi
  # shellcheck disable=SC2016  # the agents' scripts are expanded in the guest
  case $role in
    single) body=$command_line ;;
    # The guests boot side by side: b's COMMAND starts once a's agent is ready.
    b) body="for _ in \$(seq 600); do [[ -e $rpc/agent.ready ]] && break; sleep 0.2; done
[[ -e $rpc/agent.ready ]] || { echo 'rxe-vm: the peer guest never became ready'; exit 98; }
# The first rdma_cm resolve across the wire once timed out (5 s) in CI: b's COMMAND starts
# only when both wire addresses answer (a neighbour entry with a link-layer address).
wire_answers() {
  local family=\$1 addr=\$2
  ip \$family neigh show \$addr dev \$WIRE_NETDEV 2>/dev/null | grep -q lladdr
}
wire_started=\$EPOCHREALTIME
for _ in \$(seq 120); do
  timeout 1 bash -c \"exec 3<>/dev/tcp/\$PEER_ADDR/9\" 2>/dev/null
  timeout 1 bash -c \"exec 3<>/dev/tcp/\$PEER_ADDR6/9\" 2>/dev/null
  wire_answers -4 \$PEER_ADDR && wire_answers -6 \$PEER_ADDR6 && break
  sleep 0.5
done
if ! wire_answers -4 \$PEER_ADDR || ! wire_answers -6 \$PEER_ADDR6; then
  echo 'rxe-vm: the wire to the peer guest never answered'; ip -s link show \$WIRE_NETDEV; ip neigh; exit 98
fi
wire_wait=\$(awk -v a=\$wire_started -v b=\$EPOCHREALTIME 'BEGIN { printf \"%.1f\", b - a }')
echo \"rxe-vm: the wire to the peer answers (after \$wire_wait s)\"
$command_line" ;;
    # The peer agent: b drops NAME.req (a shell script) into the RPC folder's inbox; a runs
    # it in the background with output in NAME.out/NAME.err, its pid in NAME.pid and its
    # exit status in NAME.rc (each written whole, by rename, in the RPC folder). NAME.sig in
    # the inbox is a fault to inject now, "kill SIGNAL PID", "write VALUE FILE" or "clock -
    # -", then a line "end"; the agent answers NAME.sent: the status and when it was done
    # ($EPOCHREALTIME). Faults use only shell builtins, so one lands within a poll even on
    # a busy guest. b writes "shutdown" when it is done.
    # Each poll reads the inbox over 9p, which holds only what is not yet taken: the RPC
    # folder itself grows by six files a command, hundreds in a pair stage. b pokes the agent
    # when it drops something in (remote.sh, poke_peer): a connection to port 7399 over the
    # management network, whose line busybox nc writes into the agent's tick fifo, so the
    # wait ends at once; the poll, once a second, only catches a poke that was lost. Polling
    # every 50 ms instead cost 0.16 of a host core for as long as the pair ran, idle or not.
    a) body='mkfifo /tmp/agent.tick && exec 9<> /tmp/agent.tick  # read -t on it: a sleep without a process
printf "#!/bin/sh\nexec cat > /tmp/agent.tick\n" > /tmp/agent.poke && chmod +x /tmp/agent.poke
busybox nc -ll -p 7399 -e /tmp/agent.poke &
echo $$ > "$RXEVM_RPC/agent.ready"
while [[ ! -e $RXEVM_RPC/shutdown ]]; do
  for entry in "$RXEVM_RPC"/inbox/*; do
    name=$RXEVM_RPC/${entry##*/}
    case $entry in
      *.sig)
        lines=()
        mapfile -t lines < "$entry"
        [[ ${lines[1]:-} == end ]] || continue
        read -r action argument target <<< "${lines[0]}"
        case $action in
          kill) kill "-$argument" "$target" 2> /dev/null ;;
          write) echo "$argument" 2> /dev/null > "${target//@WIRE_NETDEV@/$WIRE_NETDEV}" ;;
          clock) true ;;  # only the time in the answer: b uses it to relate the two clocks
          *) false ;;
        esac
        echo "$? $EPOCHREALTIME" > "${name%.sig}.sent"
        mv "$entry" "$name" ;;
      *.req)
        name=${name%.req}
        mv "$entry" "$name.cmd"
        (
          bash "$name.cmd" > "$name.out" 2> "$name.err" &
          echo $! > "$name.pid.new" && mv "$name.pid.new" "$name.pid"
          rc=0; wait $! || rc=$?
          echo $rc > "$name.rc.new" && mv "$name.rc.new" "$name.rc"
        ) & ;;
    esac
  done
  read -r -t 1 -u 9 || true
done
exit 0' ;;
  esac
  cat <<GUEST
set -u
setup() {
  modprobe rdma_rxe && modprobe rdma_ucm && modprobe dummy numdummies=0 || return 1
  hostname $host_name || return 1
  ip link set lo up
  ip link add rxenet0 type dummy && ip link set rxenet0 up || return 1
  ip addr add 10.55.0.1/24 dev rxenet0 && ip addr add 10.55.0.2/24 dev rxenet0 || return 1
  ip -6 addr add fd55::1/64 dev rxenet0 nodad || return 1
  ip link add plainnet0 type dummy && ip link set plainnet0 up && ip addr add 10.56.0.1/24 dev plainnet0 || return 1
  rdma link add rxe0 type rxe netdev rxenet0 || return 1$wire_setup
}
if ! setup; then echo "rxe-vm: guest setup failed"; exit 98; fi
ulimit -l unlimited
export RDMAKIT_VM=1 RXE_DEV=rxe0 RXE_NETDEV=rxenet0 RXE_ADDR=10.55.0.1 RXE_ADDR2=10.55.0.2 RXE_ADDR6=fd55::1 PLAIN_ADDR=10.56.0.1
$wire_env
$body
GUEST
}

# boot STATE_NAME SMP NIC_ARGS...: runs one guest to the end; its state folder is DIR/STATE_NAME.
# tsc=reliable: the guest kernel finds TCG's vCPUs' TSCs unsynchronized (emulation is too
# slow for its check) and falls back to the emulated HPET, where every clock_gettime is a
# system call and an emulated device read: a quarter of the CPU of a busy-polling loop that
# times itself, and of everything else that reads the time. TCG's TSC is the host's, which
# is invariant and synchronized, so the kernel may trust it (and the vDSO reads it).
# norandmaps: TCG keys each translated block by its virtual address, so with address-space
# randomisation every new process (thousands a suite: bash, jq, the tools) translated again
# the libc, libstdc++ and ld.so code it ran at addresses of its own: seven cases filled
# qemu's 1 GiB translation buffer (1.86 M blocks) and took 61 s; without it 285 MiB
# (0.52 M blocks) and 36 s, the guest's CPU 117 -> 73 s. The guest is our test bench, not
# a host under attack; nothing in the suite relies on random addresses.
# -cpu: TCG's default model (qemu64) lacks SSSE3, SSE4.1/4.2 and POPCNT, and clang's
# ThreadSanitizer runtime is built with -msse4.2: every TSan program (build-tsan) died of
# SIGILL before main. These instructions only, so that the guest stays what it was otherwise.
boot() {
  local state_name=$1 smp=$2 append=""
  shift 2
  $systemd && append=" rxevm_systemd=1 systemd.unit=rxevm.target"
  timeout -k 10 "$timeout_s" qemu-system-x86_64 -accel tcg -cpu qemu64,+ssse3,+sse4.1,+sse4.2,+popcnt \
    -m "$memory_mib" -smp "$smp" -nographic -no-reboot \
    -kernel "/boot/vmlinuz-$kver" -initrd "$cache/initrd.gz" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs "local,path=$dir,mount_tag=work,security_model=none" "$@" \
    -append "console=ttyS0 quiet loglevel=0 panic=-1 tsc=reliable norandmaps rxevm_dir=$dir rxevm_state=$state_name rxevm_root_cache=$root_cache rxevm_work_cache=$work_cache$append" \
    > "$dir/$state_name/console" 2>&1
}

# finished STATE_NAME QEMU_STATUS: prints the guest's output; false when it never finished.
finished() {
  local state=$dir/$1 status=$2
  cat "$state/out" 2>/dev/null || true
  [[ -s $state/rc ]] && return 0
  if [[ $status -eq 124 || $status -eq 137 ]]; then
    echo "rxe-vm: guest $1 killed after ${timeout_s}s (--timeout); console log: $state/console" >&2
  else
    echo "rxe-vm: guest $1 did not finish (qemu exit $status); console log: $state/console" >&2
    tail -20 "$state/console" >&2 || true
  fi
  return 1
}

states=("$state_prefix")
$pair && states=("$state_prefix-a" "$state_prefix-b")
for state_name in "${states[@]}"; do
  mkdir -p "$dir/$state_name"
  rm -f "$dir/$state_name"/{rc,out,console}
done

if ! $pair; then
  rpc=""
  guest_script single > "$dir/$state_prefix/guest.sh"
  status=0
  boot "$state_prefix" 2 -nic none || status=$?
  finished "$state_prefix" "$status" || exit 99
  exit "$(cat "$dir/$state_prefix/rc")"
fi

rpc=$dir/$state_prefix-pair
rm -rf "$rpc"
mkdir -p "$rpc/inbox"
guest_script a > "$dir/$state_prefix-a/guest.sh"
guest_script b > "$dir/$state_prefix-b/guest.sh"
# The wires: qemu stream sockets; guest a listens on them, so a boots first.
sockets=$(mktemp -d)
wire=$sockets/wire.sock mgmt=$sockets/mgmt.sock
boot "$state_prefix-a" 2 -netdev "stream,id=wire,server=on,addr.type=unix,addr.path=$wire" \
  -device virtio-net-pci,netdev=wire,mac=52:54:00:57:00:01 \
  -netdev "stream,id=mgmt,server=on,addr.type=unix,addr.path=$mgmt" \
  -device virtio-net-pci,netdev=mgmt,mac=52:54:00:58:00:01 &
peer_pid=$!
for _ in $(seq 100); do [[ -S $wire && -S $mgmt ]] && break; sleep 0.1; done
[[ -S $wire && -S $mgmt ]] || { kill "$peer_pid" 2>/dev/null; die "guest a never opened the wire sockets in $sockets"; }
status=0
boot "$state_prefix-b" 2 -netdev "stream,id=wire,server=off,addr.type=unix,addr.path=$wire" \
  -device virtio-net-pci,netdev=wire,mac=52:54:00:57:00:02 \
  -netdev "stream,id=mgmt,server=off,addr.type=unix,addr.path=$mgmt" \
  -device virtio-net-pci,netdev=mgmt,mac=52:54:00:58:00:02 || status=$?
touch "$rpc/shutdown"
peer_status=0
wait "$peer_pid" || peer_status=$?
rm -rf "$sockets"
echo "== rxe-vm: peer guest a"
finished "$state_prefix-a" "$peer_status" || true
echo "== rxe-vm: guest b"
finished "$state_prefix-b" "$status" || exit 99
exit "$(cat "$dir/$state_prefix-b/rc")"
