#!/usr/bin/env bash
# demo.sh: installs missing dependencies, builds, boots the soft-RoCE VM and runs rping —
# ours against itself, and against rdma-core's rping in both directions — printing the
# human output and a JSON report. On a host with a real RDMA device run build/bin/rping
# directly instead (see scripts/rxe-setup.sh to add soft-RoCE to a real host).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh" --if-missing
"$root/scripts/build.sh" "$root/build" > /dev/null
rping=$root/build/bin/rping
"$root/scripts/rxe-vm.sh" "$root" "
set -e
echo '### ours <-> ours: rping -s / rping -c -C 5 -v -V'
$rping -s -a \$RXE_ADDR -p 7174 & sleep 1
$rping -c -a \$RXE_ADDR -p 7174 -C 5 -v -V; wait
echo; echo '### ours (client, --json) -> stock rping -s'
rping -s -a \$RXE_ADDR -p 7175 -S 1024 -V > /dev/null 2>&1 & sleep 1
$rping -c -a \$RXE_ADDR -p 7175 -C 100 -S 1024 -V --json; wait || true
echo; echo '### stock rping -c -> ours (server)'
$rping -s -a \$RXE_ADDR -p 7176 & sleep 1
rping -c -a \$RXE_ADDR -p 7176 -C 3 -v -V; wait
"
