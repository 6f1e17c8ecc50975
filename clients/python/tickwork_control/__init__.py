"""A thin client of a tickwork stack's control function.

Every method sends one request through Lambda's Invoke (synchronous) and returns the answer's
``result``; a refusal raises the :class:`Refused` subclass of its ``type`` (nothing was written
for it), a failure of the stack raises :class:`StackError` (boto3 does not retry it: Lambda answers a
function error with HTTP 200; every operation is idempotent, so sending it again is harmless).
The request and answer shapes are ``docs/control/*.schema.json``, generated from the function's
own types.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List, Optional, TypedDict

__all__ = [
    "Control",
    "Refused",
    "StackError",
    "Malformed",
    "UnknownOperation",
    "InvalidField",
    "InvalidSpec",
    "UnknownZone",
    "NoSuchTenant",
    "NoSuchSchedule",
    "Conflict",
    "TooLarge",
    "Throttled",
    "Raced",
]


class Refused(Exception):
    """The function refused the request (or one entry of a batch); nothing was written for it."""

    def __init__(self, error: Dict[str, Any]):
        self.type: str = error.get("type", "")
        self.message: str = error.get("message", "")
        self.field: Optional[str] = error.get("field")
        self.index: Optional[int] = error.get("index")
        self.retryable: bool = bool(error.get("retryable", False))
        super().__init__(f"{self.type}: {self.message}" + (f" (field {self.field})" if self.field else ""))


class Malformed(Refused):
    """Not a JSON object, no `op`, or `op` not a string."""


class UnknownOperation(Refused):
    """`op` names no operation."""


class InvalidField(Refused):
    """A field missing, unknown, of the wrong type or out of range."""


class InvalidSpec(Refused):
    """A schedule's spec, name, spread or DST policy that cannot be right."""


class UnknownZone(Refused):
    """A zone not in the bundled IANA database."""


class NoSuchTenant(Refused):
    """No tenant with that id."""


class NoSuchSchedule(Refused):
    """The tenant has no schedule or timer of that name."""


class Conflict(Refused):
    """The request contradicts what is stored (a tenant added again in another zone)."""


class TooLarge(Refused):
    """An id, a batch or a page past its limit."""


class Throttled(Refused):
    """DynamoDB throttled the request after retries: send it again later (a batch's earlier entries may be written)."""


class Raced(Refused):
    """Something changed the same item meanwhile: send it again."""


_TYPES = {c.__name__: c for c in Refused.__subclasses__()}


def refusal(error: Dict[str, Any]) -> Refused:
    """The exception of a refusal the function answered."""
    return _TYPES.get(error.get("type", ""), Refused)(error)


class StackError(Exception):
    """The function failed (a table missing, DynamoDB unreachable): not the request's fault."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(f"{kind}: {message}")


class Entry(TypedDict, total=False):
    index: int
    id: str
    name: str
    outcome: str


class BatchResult(TypedDict):
    entries: List[Entry]
    refused: List[Dict[str, Any]]


class Tenant(TypedDict, total=False):
    id: str
    zone: str
    status: str
    owed_from: str
    position: str


class Done(TypedDict, total=False):
    id: str
    name: str
    outcome: str
    zone: str
    fires_at: str


class Control:
    """The control function `function_name` (its name or ARN), through `lambda_client` (a boto3
    Lambda client; one is made from the default session when none is given)."""

    def __init__(self, function_name: str, lambda_client: Any = None):
        if lambda_client is None:
            import boto3

            lambda_client = boto3.client("lambda")
        self.function_name = function_name
        self._lambda = lambda_client

    def call(self, request: Dict[str, Any]) -> Any:
        """Sends one request; returns its `result`, raises its refusal or the stack's failure."""
        r = self._lambda.invoke(
            FunctionName=self.function_name,
            InvocationType="RequestResponse",
            Payload=json.dumps(request).encode(),
        )
        body = r["Payload"].read()
        if r.get("FunctionError"):
            try:
                e = json.loads(body)
            except ValueError:
                e = {}
            raise StackError(e.get("errorType", r["FunctionError"]), e.get("errorMessage", body.decode(errors="replace")))
        answer = json.loads(body)
        if not answer.get("ok"):
            raise refusal(answer.get("error", {}))
        return answer.get("result")

    def _one(self, batch: BatchResult) -> Entry:
        """A batch of one: its entry, or its refusal raised."""
        if batch["refused"]:
            raise refusal(batch["refused"][0])
        return batch["entries"][0]

    # ---- tenants

    def add_tenants(self, tenants: List[Dict[str, Any]]) -> BatchResult:
        """Adds up to 100 tenants (`{"id", "zone", "owed_from"?}`); each entry is done or refused."""
        return self.call({"op": "tenants.add", "tenants": tenants})

    def add_tenant(self, id: str, zone: str, owed_from: Optional[str] = None) -> str:
        """Adds one tenant: `added` or `unchanged`; raises its refusal."""
        t: Dict[str, Any] = {"id": id, "zone": zone}
        if owed_from is not None:
            t["owed_from"] = owed_from
        return self._one(self.add_tenants([t]))["outcome"]

    def get_tenant(self, id: str) -> Tenant:
        return self.call({"op": "tenants.get", "id": id})

    def suspend_tenant(self, id: str) -> Done:
        return self.call({"op": "tenants.suspend", "id": id})

    def resume_tenant(self, id: str) -> Done:
        return self.call({"op": "tenants.resume", "id": id})

    def move_tenant(self, id: str, zone: str) -> Done:
        return self.call({"op": "tenants.move", "id": id, "zone": zone})

    def remove_tenant(self, id: str) -> Done:
        return self.call({"op": "tenants.remove", "id": id})

    def list_tenants(self, cursor: Optional[str] = None, limit: Optional[int] = None) -> Dict[str, Any]:
        """One page (`{"tenants", "cursor"?}`); pass `cursor` back for the next."""
        req: Dict[str, Any] = {"op": "tenants.list"}
        if cursor is not None:
            req["cursor"] = cursor
        if limit is not None:
            req["limit"] = limit
        return self.call(req)

    def iter_tenants(self, limit: Optional[int] = None) -> Iterator[Tenant]:
        """Every tenant, following the cursor to the end."""
        cursor = None
        while True:
            page = self.list_tenants(cursor, limit)
            yield from page["tenants"]
            cursor = page.get("cursor")
            if cursor is None:
                return

    def explain_tenant(self, id: str) -> Dict[str, Any]:
        return self.call({"op": "tenants.explain", "id": id})

    # ---- schedules

    def put_schedules(self, schedules: List[Dict[str, Any]]) -> BatchResult:
        """Adds or changes up to 100 schedules (`{"tenant", "name", "spec", "spread_min"?, "gap"?, "fold"?, "payload"?}`)."""
        return self.call({"op": "schedules.put", "schedules": schedules})

    def put_schedule(
        self,
        tenant: str,
        name: str,
        spec: str,
        spread_min: int = 0,
        gap: Optional[str] = None,
        fold: Optional[str] = None,
        payload: Any = None,
    ) -> str:
        """One schedule: `added`, `changed` or `unchanged`; raises its refusal.

        `payload`, any JSON document up to 4,096 bytes, is delivered in every fire's unit."""
        s: Dict[str, Any] = {"tenant": tenant, "name": name, "spec": spec, "spread_min": spread_min}
        for k, v in (("gap", gap), ("fold", fold), ("payload", payload)):
            if v is not None:
                s[k] = v
        return self._one(self.put_schedules([s]))["outcome"]

    def pause_schedule(self, tenant: str, name: str) -> Done:
        return self.call({"op": "schedules.pause", "tenant": tenant, "name": name})

    def resume_schedule(self, tenant: str, name: str) -> Done:
        return self.call({"op": "schedules.resume", "tenant": tenant, "name": name})

    def remove_schedule(self, tenant: str, name: str) -> Done:
        return self.call({"op": "schedules.remove", "tenant": tenant, "name": name})

    def list_schedules(self, tenant: str) -> List[Dict[str, Any]]:
        return self.call({"op": "schedules.list", "tenant": tenant})["schedules"]

    def next_fires(
        self, tenant: str, name: Optional[str] = None, count: Optional[int] = None, from_: Optional[str] = None
    ) -> List[Dict[str, Any]]:
        req: Dict[str, Any] = {"op": "schedules.next", "tenant": tenant}
        for k, v in (("name", name), ("count", count), ("from", from_)):
            if v is not None:
                req[k] = v
        return self.call(req)["fires"]

    # ---- timers

    def set_timer(self, tenant: str, name: str, at: str, payload: Any = None) -> Done:
        """A one-off at `at`: an instant (`…Z`, or with an offset) or a local time of the tenant's zone.

        `payload` is delivered in the fire's unit (what the reminder is for)."""
        req: Dict[str, Any] = {"op": "timers.at", "tenant": tenant, "name": name, "at": at}
        if payload is not None:
            req["payload"] = payload
        return self.call(req)

    def cancel_timer(self, tenant: str, name: str) -> Done:
        return self.call({"op": "timers.cancel", "tenant": tenant, "name": name})
