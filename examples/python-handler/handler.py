"""A tickwork target in Python: the units of a batch, in the shape of an SQS event.

Each record's ``messageId`` is the unit's idempotency key and its ``body`` the unit:
``{"key", "kind", "tenant", "attempt", "payload"}``. A unit can arrive more than once (a batch
retried after a failure, a worker that died after the call), so the effect is written once per
key: a conditional put that fails when the key is already there. Units this function cannot
handle now are listed in ``batchItemFailures``: tickwork retries those alone (then dead-letters
them after the queue's attempts) and counts the rest done. Raising fails the whole batch: every
unit in it is retried.

Three switches show the failure paths (docs/targets.md): ``EXAMPLE_FAIL_TENANTS`` lists tenants
whose units are always reported failed, ``EXAMPLE_RAISE_TENANTS`` tenants whose units raise on
their first attempt, ``EXAMPLE_POISON_TENANTS`` tenants whose units always raise.
"""

import json
import os
import time

import boto3
from botocore.exceptions import ClientError

TABLE = os.environ["EFFECTS_TABLE"]
FAIL = {t for t in os.environ.get("EXAMPLE_FAIL_TENANTS", "").split(",") if t}
RAISE = {t for t in os.environ.get("EXAMPLE_RAISE_TENANTS", "").split(",") if t}
POISON = {t for t in os.environ.get("EXAMPLE_POISON_TENANTS", "").split(",") if t}

dynamodb = boto3.client("dynamodb")


def handle(event, context):
    failures = []
    units = [json.loads(r["body"]) for r in event["Records"]]
    for unit in units:
        if unit.get("tenant") in POISON:
            raise RuntimeError(f"tenant {unit['tenant']}'s unit cannot be handled")
        if unit.get("tenant") in RAISE and unit["attempt"] == 1:
            raise RuntimeError(f"tenant {unit['tenant']} is not ready yet")
    for record, unit in zip(event["Records"], units):
        if unit.get("tenant") in FAIL:
            failures.append({"itemIdentifier": record["messageId"]})
            continue
        try:
            dynamodb.put_item(
                TableName=TABLE,
                Item={
                    "pk": {"S": unit["key"]},
                    # A unit of no tenant (a job of the whole stack) has `tenant: null`.
                    "tenant": {"S": unit.get("tenant") or ""},
                    "kind": {"S": unit["kind"]},
                    "runtime": {"S": "python"},
                    "at": {"N": str(int(time.time() * 1000))},
                },
                # The effect happens once per key, however often the unit is delivered.
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as e:
            if e.response["Error"]["Code"] != "ConditionalCheckFailedException":
                failures.append({"itemIdentifier": record["messageId"]})
                continue
            print(json.dumps({"level": "INFO", "message": "already handled", "key": unit["key"]}))
    return {"batchItemFailures": failures}
