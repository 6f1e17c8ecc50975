"""A team's first hour against `make dev`: add a tenant, set a timer a minute ahead, advance a
tick, and see the handler's effect written.

Run it with the environment `make dev` prints (or as `make dev HANDLER=examples/python-handler
SCRIPT=clients/python/examples/first_hour.py`). It prints one JSON line: the tenant, the timer and
the effect the handler wrote for the timer's fire. `TICKWORK_DEV_AHEAD_SECS` sets how far ahead
the timer is (60 by default).
"""

import datetime
import json
import os
import sys
import time

import boto3

from tickwork_control import Control

REGION = os.environ.get("AWS_REGION", "us-east-1")
AHEAD = int(os.environ.get("TICKWORK_DEV_AHEAD_SECS", "60"))
prefix = os.environ["TICKWORK_TABLE_PREFIX"]
lam = boto3.client("lambda", endpoint_url=os.environ["AWS_ENDPOINT_URL_LAMBDA"], region_name=REGION)
tw = Control(os.environ["TICKWORK_CONTROL_FUNCTION"], lam)

tenant = f"first-hour-{int(time.time())}"
tw.add_tenant(tenant, "Europe/Berlin")
at = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=AHEAD)).replace(microsecond=0)
timer = tw.set_timer(tenant, "welcome", at.isoformat().replace("+00:00", "Z"), payload={"template": "welcome-email"})
fires_at = datetime.datetime.fromisoformat(timer["fires_at"].replace("Z", "+00:00"))
# Its fire's unit key, as the handler receives it: the idempotency key its effect is written under.
occurrence = tw.next_fires(tenant, name="welcome", count=1)[0]["occurrence"]
key = f"sched#{tenant}#welcome#{occurrence}"

# Nothing fires early: wait for the instant, then advance a tick (the sweep hands the fire to the
# queue, the worker delivers it to the handler).
time.sleep(max(0.0, (fires_at - datetime.datetime.now(datetime.timezone.utc)).total_seconds()) + 1)
for fn in (f"{prefix}-pulse-sweep", f"{prefix}-queue-worker"):
    r = lam.invoke(FunctionName=fn, Payload=b"{}")
    if r.get("FunctionError"):
        sys.exit(f"{fn}: {r['Payload'].read().decode()}")

ddb = boto3.client("dynamodb", endpoint_url=os.environ["AWS_ENDPOINT_URL_DYNAMODB"], region_name=REGION)
effects = os.environ["EFFECTS_TABLE"]
deadline = time.time() + 90  # the sweep ticks at most once a minute (its lease)
effect = None
while effect is None and time.time() < deadline:
    effect = ddb.get_item(TableName=effects, Key={"pk": {"S": key}}, ConsistentRead=True).get("Item")
    if effect is None:
        time.sleep(1)
print(json.dumps({"tenant": tenant, "timer": timer, "effect": effect}))
sys.exit(0 if effect else 1)
