"""The control function driven through the Python client, as a team's service would drive it.

Run by tests/it/control.rs under a real CPython against the function behind the local Invoke API:
`scenario.py lifecycle|setup|refusals`, with TICKWORK_CONTROL_ENDPOINT (the Invoke API) and
TICKWORK_CONTROL_FUNCTION; `lifecycle` also takes TICKWORK_TIMER_AT and TICKWORK_SOON_AT (the timers' instants). Prints
one JSON document of what it saw, which the Rust test holds against the tables and the queue.
"""

import json
import os
import sys

import boto3
from botocore.config import Config

from tickwork_control import Control, Refused

ZONES = ["Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Sydney", "Asia/Kolkata", "UTC"]


def control() -> Control:
    client = boto3.client(
        "lambda",
        endpoint_url=os.environ["TICKWORK_CONTROL_ENDPOINT"],
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        # Past the test function's 90 s deadline: at boto3's default 60 s a slow answer is sent
        # again, and the retry's answer is `unchanged` for what the first attempt wrote.
        config=Config(read_timeout=150, retries={"max_attempts": 0}),
    )
    return Control(os.environ["TICKWORK_CONTROL_FUNCTION"], client)


def lifecycle(tw: Control) -> dict:
    tenants = [{"id": f"t{i:03}", "zone": ZONES[i % len(ZONES)]} for i in range(100)]
    added = tw.add_tenants(tenants)
    again = tw.add_tenants(tenants)  # at least once: a repeat changes nothing
    daily = tw.put_schedules(
        [{"tenant": t["id"], "name": "nudge", "spec": "daily 08:00", "payload": {"kind": "summary"}} for t in tenants]
    )
    at = os.environ["TICKWORK_TIMER_AT"]
    # A payload of each tenant's own: what the reminder is for, delivered with its fire.
    timers = [tw.set_timer(t["id"], "call", at, payload={"reason": "call", "n": i})["outcome"] for i, t in enumerate(tenants)]
    moved = tw.move_tenant("t001", "Asia/Tokyo")
    suspended = tw.suspend_tenant("t002")
    cancelled = tw.cancel_timer("t003", "call")
    soon = tw.set_timer("t004", "soon", os.environ["TICKWORK_SOON_AT"])
    tw.suspend_tenant("t006")
    resumed = tw.resume_tenant("t006")
    removed = tw.remove_tenant("t005")
    listed = list(tw.iter_tenants(limit=30))
    return {
        "added": [e["outcome"] for e in added["entries"]],
        "again": [e["outcome"] for e in again["entries"]],
        "daily": [e["outcome"] for e in daily["entries"]],
        "refused": added["refused"] + again["refused"] + daily["refused"],
        "timers": timers,
        "moved": moved,
        "suspended": suspended,
        "cancelled": cancelled,
        "soon": soon,
        "resumed": resumed,
        "removed": removed,
        "listed": sorted(t["id"] for t in listed),
        "next": tw.next_fires("t001", name="nudge", count=1),
    }


def setup(tw: Control) -> dict:
    tw.add_tenant("r1", "Europe/Berlin")
    tw.put_schedule("r1", "nudge", "daily 08:00")
    return {"tenant": tw.get_tenant("r1")}


def refusals(tw: Control) -> dict:
    """Each refusal, sent through the client: the typed error it raised."""
    cases = {
        "unknown zone": lambda: tw.add_tenant("x1", "Mars/Olympus_Mons"),
        "added again in another zone": lambda: tw.add_tenant("r1", "Asia/Tokyo"),
        "over-long id": lambda: tw.add_tenant("x" * 1000, "UTC"),
        "owed_from not a date": lambda: tw.add_tenant("x2", "UTC", owed_from="yesterday"),
        "batch over its limit": lambda: tw.add_tenants([{"id": f"b{i}", "zone": "UTC"} for i in range(101)]),
        "invalid spec": lambda: tw.put_schedule("r1", "n2", "hourly 08:00"),
        "invalid spread": lambda: tw.put_schedule("r1", "n2", "daily 08:00", spread_min=2000),
        "schedule of no tenant": lambda: tw.put_schedule("nobody", "n", "daily 08:00"),
        "no such tenant": lambda: tw.get_tenant("nobody"),
        "no such schedule": lambda: tw.pause_schedule("r1", "nope"),
        "timer over a recurring schedule": lambda: tw.set_timer("r1", "nudge", "2030-01-01T09:00"),
        "cancel of a recurring schedule": lambda: tw.cancel_timer("r1", "nudge"),
        "move to an unknown zone": lambda: tw.move_tenant("r1", "Nowhere/Land"),
        "unknown operation": lambda: tw.call({"op": "tenants.frobnicate"}),
        "no op": lambda: tw.call({"id": "r1"}),
        "not an object": lambda: tw.call([1, 2, 3]),
        "field of the wrong type": lambda: tw.call({"op": "tenants.get", "id": 5}),
        "unknown field": lambda: tw.call({"op": "tenants.get", "id": "r1", "colour": "red"}),
        "entry field of the wrong type": lambda: tw.call({"op": "tenants.add", "tenants": [{"id": "a", "zone": "UTC"}, {"id": "b", "zone": 7}]}),
        "cursor not ours": lambda: tw.list_tenants(cursor="bm90IGEgY3Vyc29y"),
    }
    out = {}
    for name, f in cases.items():
        try:
            f()
            out[name] = {"raised": None}
        except Refused as e:
            out[name] = {"raised": type(e).__name__, "type": e.type, "field": e.field, "index": e.index}
    return out


if __name__ == "__main__":
    tw = control()
    print(json.dumps({"lifecycle": lifecycle, "setup": setup, "refusals": refusals}[sys.argv[1]](tw)))
