#!/usr/bin/env bash
# run-github-step.sh [--outputs FILE] [--workdir DIR] WORKFLOW JOB STEP_ID [NAME=VALUE...]: runs
# one run: step of a GitHub workflow (doc/ci/github-*.yml) here, in DIR (default the checkout's
# root, the runner's workspace), as the runner does: its script through the step's shell (bash: bash --noprofile --norc -eo pipefail; none:
# bash -e), the workflow's, job's and step's env (NAME=VALUE arguments override them), and
# GITHUB_OUTPUT a file (FILE, default a temporary one). After the step, that file must hold
# only name=value lines (the one-line form; a value with a newline would need the
# name<<DELIMITER form, which our steps do not use).
# Exits with the step's status; 125 when the output file breaks that format or the step
# cannot run here (an expression ${{ ... }} in its script, another shell).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
outputs="" workdir=$root
while [[ ${1:-} == --outputs || ${1:-} == --workdir ]]; do
  [[ $1 == --outputs ]] && outputs=$2 || workdir=$2
  shift 2
done
[[ $# -ge 3 ]] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
workflow=$1 job=$2 step=$3
shift 3

step_json=$(node "$here/check-workflows.mjs" --step "$workflow" "$job" "$step")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
jq -r .run <<< "$step_json" > "$tmp/step.sh"
# shellcheck disable=SC2016  # the literal text of a GitHub expression
if grep -qF '${{' "$tmp/step.sh"; then
  echo "run-github-step: $workflow $job/$step: its script holds an expression that only the runner expands" >&2
  exit 125
fi
case $(jq -r .shell <<< "$step_json") in
  bash) shell=(bash --noprofile --norc -eo pipefail) ;;
  "") shell=(bash -e) ;;
  *) echo "run-github-step: $workflow $job/$step: shell '$(jq -r .shell <<< "$step_json")' is not run here" >&2; exit 125 ;;
esac
mapfile -t step_env < <(jq -r '.env | to_entries[] | "\(.key)=\(.value)"' <<< "$step_json")
[[ -n $outputs ]] || outputs=$tmp/github-output
: > "$outputs"

rc=0
(cd "$workdir" && env "${step_env[@]}" "$@" GITHUB_OUTPUT="$outputs" "${shell[@]}" "$tmp/step.sh") || rc=$?
if grep -nvE '^[A-Za-z_][A-Za-z0-9_-]*=' "$outputs" >&2; then
  echo "run-github-step: $workflow $job/$step: the lines above of \$GITHUB_OUTPUT are not name=value" >&2
  exit 125
fi
exit "$rc"
