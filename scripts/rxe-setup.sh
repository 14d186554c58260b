#!/usr/bin/env bash
# rxe-setup.sh: soft-RoCE on a real host (a kernel with rdma_rxe).
#   rxe-setup.sh add NETDEV [NAME]   load rdma_rxe/rdma_ucm, create NAME (default rxe_NETDEV) on NETDEV
#   rxe-setup.sh remove NAME         delete the rxe device NAME
#   rxe-setup.sh status              list RDMA links and devices
# Needs root, iproute2's rdma tool and kmod.
set -euo pipefail
die() { echo "rxe-setup: $*" >&2; exit 1; }
command -v rdma >/dev/null || die "the rdma tool is missing (apt-get install iproute2)"
case ${1:-} in
  add)
    netdev=${2:?usage: rxe-setup.sh add NETDEV [NAME]}
    name=${3:-rxe_$netdev}
    [[ -e /sys/class/net/$netdev ]] || die "no netdev $netdev (see: ip -br link)"
    modprobe rdma_rxe || die "cannot load rdma_rxe: this kernel has no soft-RoCE (use scripts/rxe-vm.sh)"
    modprobe rdma_ucm || die "cannot load rdma_ucm"
    if rdma link show | grep -q "netdev $netdev\b"; then
      echo "rxe-setup: $netdev already has an RDMA link:"; rdma link show | grep "netdev $netdev\b"; exit 0
    fi
    rdma link add "$name" type rxe netdev "$netdev"
    rdma link show "$name/1"
    echo "rxe-setup: memlock limit is $(ulimit -l); raise it (ulimit -l unlimited) for large registrations"
    ;;
  remove)
    name=${2:?usage: rxe-setup.sh remove NAME}
    rdma link delete "$name"
    ;;
  status)
    rdma link show
    ibv_devices 2>/dev/null || true
    ;;
  *)
    sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
