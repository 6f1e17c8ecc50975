#!/usr/bin/env bash
# Run a command with the local AWS-API servers up, and always stop them afterwards.
#
#   scripts/with-servers.sh CMD [ARGS...]
#
# Starts, each on a free loopback port:
#   - moto (DynamoDB + S3) through scripts/moto_locked.py, so each request is atomic;
#   - dynalite (DynamoDB only), the capacity-unit reference (skipped when TICKWORK_NO_DYNALITE=1).
# Waits until each answers, exports the endpoints, runs CMD, and stops both on any exit.
# Logs go to .local/*.log.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
state="$root/.local"
mkdir -p "$state"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

wait_port() { # name port
  for _ in $(seq 1 300); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "$1 did not answer on 127.0.0.1:$2 within 30 s; see $state/$1.log" >&2
  return 1
}

# A tiny thread switch interval makes any race in the server far likelier, so the atomicity tests
# would catch a missing lock (bare moto then loses 12 of 800 CAS increments; locked: none).
TICKWORK_MOTO_SWITCH_INTERVAL=${TICKWORK_MOTO_SWITCH_INTERVAL:-0.00001}
# TICKWORK_MOTO_INSTANCES servers (default 1): moto answers one request at a time on one core,
# so the integration tests spread over two on a two-core machine (each test keeps to one).
endpoints=()
for i in $(seq 1 "${TICKWORK_MOTO_INSTANCES:-1}"); do
  portfile="$state/moto.port.$$.$i"
  rm -f "$portfile"
  "$root/.venv/bin/python" "$root/scripts/moto_locked.py" --port-file "$portfile" ${TICKWORK_MOTO_UNLOCKED:+--unlocked} \
    ${TICKWORK_MOTO_SWITCH_INTERVAL:+--switch-interval "$TICKWORK_MOTO_SWITCH_INTERVAL"} >"$state/moto.$i.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 300); do [ -s "$portfile" ] && break; sleep 0.1; done
  [ -s "$portfile" ] || { echo "moto did not start; see $state/moto.$i.log" >&2; exit 1; }
  port=$(cat "$portfile"); rm -f "$portfile"
  wait_port moto "$port"
  endpoints+=("http://127.0.0.1:$port")
done
moto_port=${endpoints[0]##*:}
export TICKWORK_MOTO_ENDPOINTS="${endpoints[*]}"

export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-test}
export AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-test}
export AWS_REGION=${AWS_REGION:-us-east-1}
export AWS_DEFAULT_REGION=$AWS_REGION
# moto reports placeholder capacity; estimate by DynamoDB's rules instead.
export TICKWORK_CAPACITY_SOURCE=${TICKWORK_CAPACITY_SOURCE:-estimate}
export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$moto_port"
export AWS_ENDPOINT_URL_S3="http://127.0.0.1:$moto_port"
# Never let a local run pick up a real profile's settings.
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null

if [ "${TICKWORK_NO_DYNALITE:-0}" != 1 ]; then
  dyn_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  node "$root/.tools/dynalite/node_modules/dynalite/cli.js" --host 127.0.0.1 --port "$dyn_port" \
    --createTableMs 0 --deleteTableMs 0 --updateTableMs 0 >"$state/dynalite.log" 2>&1 &
  pids+=($!)
  wait_port dynalite "$dyn_port"
  export TICKWORK_DYNALITE_ENDPOINT="http://127.0.0.1:$dyn_port"
fi

echo "local servers: DynamoDB+S3 (moto, locked) $TICKWORK_MOTO_ENDPOINTS${TICKWORK_DYNALITE_ENDPOINT:+, dynalite $TICKWORK_DYNALITE_ENDPOINT}" >&2
set +e
"$@"
rc=$?
set -e
exit $rc
