#!/usr/bin/env bash
# mpi-rsh-agent.sh HOST COMMAND...: Open MPI's remote-shell agent (plm_rsh_agent) between
# the two guests of scripts/rxe-vm.sh --pair, in place of ssh: guest b (where mpirun runs)
# starts Open MPI's daemon on guest a, rxevm-a, through the peer agent's shared RPC folder,
# and waits for it as ssh would, with its exit status.
set -uo pipefail
while [[ ${1:-} == -* ]]; do shift; done  # options meant for ssh
host=${1:?usage: mpi-rsh-agent.sh HOST COMMAND...}
shift
[[ $host == rxevm-a ]] || { echo "mpi-rsh-agent: only rxevm-a is reachable, not $host" >&2; exit 255; }
[[ -n ${RXEVM_RPC:-} && -e $RXEVM_RPC/agent.ready ]] || { echo "mpi-rsh-agent: no peer guest" >&2; exit 255; }
id="mpi-$$-$RANDOM"
printf '%s\n' "$*" > "$RXEVM_RPC/inbox/$id.req.new"
mv "$RXEVM_RPC/inbox/$id.req.new" "$RXEVM_RPC/inbox/$id.req"
trap 'kill -9 "$(cat "$RXEVM_RPC/$id.pid" 2> /dev/null)" 2> /dev/null; exit 143' TERM INT
until [[ -s $RXEVM_RPC/$id.rc ]]; do sleep 0.2; done
cat "$RXEVM_RPC/$id.out" 2> /dev/null
cat "$RXEVM_RPC/$id.err" >&2 2> /dev/null
exit "$(< "$RXEVM_RPC/$id.rc")"
