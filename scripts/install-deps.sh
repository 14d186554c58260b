#!/usr/bin/env bash
# install-deps.sh [--if-missing] [--build | --print-build]: installs what rdmakit needs to build, test and
# boot the soft-RoCE test VM, from Debian packages, and the CI files' checkers (tests/ci) from
# npm. With --build, only what building the tools and their .deb needs (scripts/package.sh,
# cmake without the tests): what doc/ci's examples install, so that their list cannot fall
# behind the build's (tests/ci/build-deps-test.sh checks it against CMake's requirements).
# --print-build prints those packages' names, one a line, and installs nothing.
# Idempotent; runs apt-get and npm only when something is missing (with --if-missing it says
# nothing when all is there). Root or sudo.
set -euo pipefail
build_packages=(
  build-essential cmake pkg-config
  libibverbs-dev librdmacm-dev libcli11-dev libspdlog-dev nlohmann-json3-dev
  # rdma_smoke writes JUnit XML with pugixml
  libpugixml-dev
  # the side channels' key handshake: HMAC-SHA256, RAND_bytes and CRYPTO_memcmp from OpenSSL's libcrypto
  libssl-dev
  # the diag-connect agent keeps CAP_NET_ADMIN and drops the rest of root's capabilities with libcap
  libcap-dev
  # rdma_pingmesh's /metrics endpoint
  libmicrohttpd-dev
  # diag-connect reads the firewall through libnftables (without it, it cannot see nftables' rules)
  libnftables-dev
  # rdma_mesh's ranks meet through MPI (without it, rdma_mesh is not built)
  libopenmpi-dev
  # the .deb (scripts/package.sh): CPack picks the programs for dpkg-shlibdeps with file(1)
  file
)
packages=(
  "${build_packages[@]}"
  ninja-build clang-format
  # .clang-tidy's checks (the complexity cap, bugprone, performance, readability), with Debian 12's
  # newest clang-tidy: it reads a unity source in a third of clang-tidy 14's time; the shell scripts' lint
  clang-tidy-22 shellcheck
  # the report schemas' validator (tests/schema)
  python3-jsonschema
  # libFuzzer targets (scripts/fuzz.sh); lld links the clang builds (scripts/test.sh)
  clang libclang-rt-dev lld
  libgtest-dev
  # the tests validate rdma_smoke's JUnit XML with xmllint
  libxml2-utils
  # rdma_mesh: its ranks are started by mpirun (or srun)
  openmpi-bin
  # ... and under Slurm (the mesh_slurm case starts munged, slurmctld and slurmd in the guest).
  # srun --mpi=pmix opens the unversioned libpmix.so, which only libpmix-dev ships.
  slurm-wlm munge libpmix-dev
  # run and test against the stock tools
  rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest iproute2 jq gnuplot-nox
  # the integration cases' jq (tests/integration/lib.sh: a start in the TCG guest is 40 ms, not 300)
  gojq
  # the cases break RoCE with nft
  nftables
  # systemd-analyze checks the agent's unit (tests/packaging)
  systemd
  # the cases parse rdma_pingmesh's OpenMetrics text with Prometheus' own Python parser, and
  # promtool checks the alert rules in doc/pingmesh
  python3-prometheus-client prometheus
  # ... and its textfile as node_exporter reads it: the cases run Debian's node_exporter on it
  prometheus-node-exporter
  # one memcheck run of every tool (tests/integration/valgrind_cases.sh)
  valgrind
  # scripts/test.sh --under-load: CPU burners beside the guests
  stress-ng
  # scripts/bench-idle.sh: an idle server's system calls (strace -c); scripts/bench-mesh.sh: peak RSS
  # of rdma_mesh --analyse (/usr/bin/time -v)
  strace time
  # the soft-RoCE VM (scripts/rxe-vm.sh)
  qemu-system-x86 linux-image-amd64 busybox-static kmod cpio
)
quiet=false build_only=false
for argument in "$@"; do
  case $argument in
    --if-missing) quiet=true ;;
    --build) build_only=true ;;
    --print-build) printf '%s\n' "${build_packages[@]}"; exit 0 ;;
    *) echo "install-deps: unknown argument '$argument' (expected --if-missing, --build, --print-build)" >&2; exit 2 ;;
  esac
done
$build_only && packages=("${build_packages[@]}")
# The checkers of the CI files in doc/ci (tests/ci) run on node, with npm to install them.
# Any node and npm will do (a host with NodeSource's nodejs, which bundles npm and conflicts
# with Debian's npm, keeps its own); Debian's otherwise.
if ! $build_only && { ! command -v node > /dev/null || ! command -v npm > /dev/null; }; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "install-deps: installing ${missing[*]}"
  as_root=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install ${missing[*]}" >&2; exit 1; }
    as_root=(sudo)
  fi
  "${as_root[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if $build_only; then
  [[ ${#missing[@]} -gt 0 ]] || $quiet || echo "install-deps: everything the build needs is installed"
  exit 0
fi
# tests/ci's node packages, at the versions its package-lock.json pins, into tests/ci/node_modules
# (git-ignored); again only when that lock file differs from the one last installed.
ci=$(cd "$(dirname "$0")/../tests/ci" && pwd)
if ! cmp -s "$ci/package-lock.json" "$ci/node_modules/.installed-package-lock.json"; then
  echo "install-deps: npm ci in tests/ci"
  (cd "$ci" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$ci/package-lock.json" "$ci/node_modules/.installed-package-lock.json"
elif [[ ${#missing[@]} -eq 0 ]]; then
  $quiet || echo "install-deps: everything is installed"
fi
