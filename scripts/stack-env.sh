#!/usr/bin/env bash
# Writes .local/stacks/<stack>.env from a deployed stack's outputs, for `tickctl --stack <stack>`:
# the variables the functions get from the template, so tickctl reads the tables, shards and
# namespace the deployment uses.
#
#   scripts/stack-env.sh SAM_COMMAND STACK_NAME [SAM_ARGS...]
#
# SAM_COMMAND is how to run the SAM CLI (the Makefile passes its pinned one); it is called as
# `SAM_COMMAND list stack-outputs --stack-name STACK --output json SAM_ARGS...` (the Makefile adds
# `--config-env ENV`, so the environment's region is the one asked).
set -euo pipefail
sam=${1:?usage: stack-env.sh SAM_COMMAND STACK_NAME}
stack=${2:?usage: stack-env.sh SAM_COMMAND STACK_NAME [SAM_ARGS...]}
shift 2
extra=("$@")
out_dir=${TICKWORK_STACKS_DIR:-.local/stacks}
mkdir -p "$out_dir"
json=$(eval "$sam list stack-outputs --stack-name \"\$stack\" --output json \"\${extra[@]}\"")
printf '%s' "$json" | python3 "$(dirname "$0")/stack_env.py" "$stack" "$out_dir/$stack.env"
