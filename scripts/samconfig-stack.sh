#!/usr/bin/env bash
# Prints the stack name samconfig.toml gives environment $1 (dev, prod).
set -euo pipefail
env=${1:?usage: samconfig-stack.sh ENV}
python3 - "$env" <<'PY'
import sys, tomllib
cfg = tomllib.load(open("samconfig.toml", "rb"))
env = sys.argv[1]
try:
    print(cfg[env]["deploy"]["parameters"]["stack_name"])
except KeyError:
    sys.exit(f"samconfig.toml has no environment `{env}` with a stack_name (environments: {', '.join(k for k in cfg if k != 'version')})")
PY
