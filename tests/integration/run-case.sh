#!/usr/bin/env bash
# run-case.sh CASE BIN_DIR TEST_BIN_DIR: runs one integration case (see rping_cases.sh):
# the tools from BIN_DIR (build/bin), the test programs (crafted_peer) from TEST_BIN_DIR
# (build/tests/bin). Exit 0 pass, 1 fail, 77 skipped (no RDMA device here).
set -uo pipefail
CASE_NAME=$1
BIN=$(cd "$2" && pwd)
TEST_BIN=$(cd "$3" && pwd)
here=$(cd "${0%/*}" && pwd)
OURS_RPING=$BIN/rping
STOCK_RPING=$(command -v rping 2>/dev/null || echo /usr/bin/rping)
# shellcheck source=lib.sh
source "$here/lib.sh"
# shellcheck source=rping_cases.sh
source "$here/rping_cases.sh"
OURS_DIAG=$BIN/diag-bind
# shellcheck source=diag_bind_cases.sh
source "$here/diag_bind_cases.sh"
OURS_RDMA_SERVER=$BIN/rdma_server
OURS_RDMA_CLIENT=$BIN/rdma_client
# shellcheck source=echo_cases.sh
source "$here/echo_cases.sh"
OURS_UDADDY=$BIN/udaddy
OURS_UCMATOSE=$BIN/ucmatose
OURS_MCKEY=$BIN/mckey
# shellcheck source=group_cases.sh
source "$here/group_cases.sh"
OURS_SEND_BW=$BIN/send_bw
# shellcheck source=send_bw_cases.sh
source "$here/send_bw_cases.sh"
# shellcheck source=bad_input_cases.sh
source "$here/bad_input_cases.sh"
# shellcheck source=soak_cases.sh
source "$here/soak_cases.sh"
# shellcheck source=valgrind_cases.sh
source "$here/valgrind_cases.sh"
# shellcheck source=remote.sh
source "$here/remote.sh"
# shellcheck source=pair_cases.sh
source "$here/pair_cases.sh"
# shellcheck source=crafted_cases.sh
source "$here/crafted_cases.sh"
OURS_RDMA_MESH=$BIN/rdma_mesh
# shellcheck source=mesh_cases.sh
source "$here/mesh_cases.sh"
# shellcheck source=analyse_cases.sh
source "$here/analyse_cases.sh"
OURS_DIAG_CONNECT=$BIN/diag-connect
# shellcheck source=connect_cases.sh
source "$here/connect_cases.sh"
OURS_SMOKE=$BIN/rdma_smoke
# shellcheck source=smoke_cases.sh
source "$here/smoke_cases.sh"
# shellcheck source=key_cases.sh
source "$here/key_cases.sh"
# shellcheck source=routed_cases.sh
source "$here/routed_cases.sh"
# shellcheck source=tsan_cases.sh
source "$here/tsan_cases.sh"
# shellcheck source=allow_cases.sh
source "$here/allow_cases.sh"
OURS_PINGMESH=$BIN/rdma_pingmesh
# shellcheck source=pingmesh_cases.sh
source "$here/pingmesh_cases.sh"
# shellcheck source=personality_cases.sh
source "$here/personality_cases.sh"
# shellcheck source=report_cases.sh
source "$here/report_cases.sh"
# shellcheck source=attack_cases.sh
source "$here/attack_cases.sh"
declare -F "case_$CASE_NAME" > /dev/null || { echo "no such case: $CASE_NAME"; exit 2; }
"case_$CASE_NAME"
check_schemas
echo "PASS: $CASE_NAME"
