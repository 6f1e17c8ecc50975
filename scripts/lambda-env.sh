#!/usr/bin/env bash
# Inside scripts/with-servers.sh: create the tables and bucket on the local servers, seed a few
# tenants, write the environment the functions need to .local/lambda.env, then run CMD.
#
#   scripts/with-servers.sh scripts/lambda-env.sh CMD [ARGS...]
#
# `cargo lambda watch --env-file .local/lambda.env` gives every function that environment, so
# `cargo lambda invoke <fn> --data-file events/<fn>.json` runs it against the local servers.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
env_file="$root/.local/lambda.env"
export TICKWORK_TABLE_PREFIX=${TICKWORK_TABLE_PREFIX:-local}
export TICKWORK_ARCHIVE_BUCKET=${TICKWORK_ARCHIVE_BUCKET:-local-archive}
# The template's fan-out job: `tickctl status` names the stack's (it refuses without one).
export TICKWORK_FANOUT_JOB=${TICKWORK_FANOUT_JOB:-utc-daily}
tickctl="$root/target/debug/tickctl"
"$tickctl" provision
"$tickctl" seed --tenants "${TICKWORK_SEED_TENANTS:-24}"
{
  echo "# written by scripts/lambda-env.sh for the local servers started by scripts/with-servers.sh"
  env | grep -E '^(AWS_(ACCESS_KEY_ID|SECRET_ACCESS_KEY|REGION|DEFAULT_REGION|ENDPOINT_URL_DYNAMODB|ENDPOINT_URL_S3|CONFIG_FILE|SHARED_CREDENTIALS_FILE)|TICKWORK_[A-Z_]+)=' | sort
  echo "RUST_LOG=${RUST_LOG:-info}"
} >"$env_file"
echo "environment for the functions: $env_file" >&2
exec "$@"
