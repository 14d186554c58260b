#!/usr/bin/env bash
# smoke-step-test.sh BIN_DIR: runs the rdma_smoke step of doc/ci/github-rdma-smoke.yml here
# (run-github-step.sh) with each exit the job must tell apart, under NO_DEVICE=fail and skip:
# 0 and 1 from a stand-in rdmakit-rdma_smoke, and 77 from the real BIN_DIR/rdma_smoke, which
# on this host without RDMA has nothing to test (a stand-in where the host has a device).
# The step must exit as rdma_smoke did, but 0 for 77 under skip with a ::warning, and leave
# rc=<status> in $GITHUB_OUTPUT (the test report's condition reads it).
# Not run here, from that workflow: the apt-get and modprobe steps (sudo on the runner's own
# system), the soft-RoCE device (RDMA in this host's kernel), the install (its package path is
# an expression); the package step runs in scripts/test.sh's package stage.
# Exits 77 where node (the workflow reader) is absent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$(cd "${1:?usage: smoke-step-test.sh BIN_DIR}" && pwd)
command -v node > /dev/null || { echo "SKIP: node is not installed (scripts/install-deps.sh installs it)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# check STAND_IN NO_DEVICE WANT_EXIT: STAND_IN is a status for a stand-in, or "real".
check() {
  local stand_in=$1 no_device=$2 want=$3 rc=0 work="$tmp/$1-$2"
  mkdir -p "$work/path"
  if [[ $stand_in == real ]]; then
    ln -s "$bin/rdma_smoke" "$work/path/rdmakit-rdma_smoke"
  else
    printf '#!/bin/sh\necho "<testsuites/>" > rdma-smoke.xml\nexit %s\n' "$stand_in" > "$work/path/rdmakit-rdma_smoke"
    chmod +x "$work/path/rdmakit-rdma_smoke"
  fi
  "$here/run-github-step.sh" --outputs "$work/output" --workdir "$work" "$root/doc/ci/github-rdma-smoke.yml" \
    rdma-smoke smoke NO_DEVICE="$no_device" PATH="$work/path:$PATH" > "$work/stdout" 2> "$work/stderr" || rc=$?
  local status=${stand_in/real/77} problem=""
  ((rc == want)) || problem="exit $rc, expected $want"
  [[ $(cat "$work/output") == "rc=$status" ]] || problem+="${problem:+; }\$GITHUB_OUTPUT holds '$(cat "$work/output")', not rc=$status"
  [[ -f $work/rdma-smoke.xml ]] || problem+="${problem:+; }no rdma-smoke.xml in the workspace"
  if [[ $status == 77 && $no_device == skip ]]; then
    grep -q '^::warning title=rdma_smoke::' "$work/stdout" || problem+="${problem:+; }no ::warning line"
  fi
  if [[ -n $problem ]]; then
    echo "FAIL rdma_smoke exiting $status, NO_DEVICE=$no_device: $problem"
    sed 's/^/  stdout: /' "$work/stdout"
    sed 's/^/  stderr: /' "$work/stderr"
    failures=$((failures + 1))
  else
    echo "ok   rdma_smoke exiting $status, NO_DEVICE=$no_device: the step exits $rc, rc=$status"
  fi
}

real=real
if compgen -G "/sys/class/infiniband/*" > /dev/null; then
  echo "this host has an RDMA device: a stand-in gives the 77"
  real=77
fi
for no_device in fail skip; do
  check 0 "$no_device" 0
  check 1 "$no_device" 1
done
check "$real" fail 77
check "$real" skip 0
((failures == 0))
