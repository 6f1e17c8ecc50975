// A thin client of a tickwork stack's control function: each method sends one request through
// Lambda's Invoke (synchronous) and resolves to the answer's `result`; a refusal rejects with the
// `Refused` subclass of its `type` (nothing was written for it), a failure of the stack with
// `StackError` (the SDK does not retry it: Lambda answers a function error with HTTP 200; every
// operation is idempotent, so sending it again is harmless). Shapes: docs/control/*.schema.json.
import { InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";

export class Refused extends Error {
  constructor(error) {
    const e = error || {};
    super(`${e.type}: ${e.message}${e.field ? ` (field ${e.field})` : ""}`);
    this.name = e.type || "Refused";
    this.type = e.type;
    this.field = e.field;
    this.index = e.index;
    this.retryable = Boolean(e.retryable);
    this.detail = e.message;
  }
}

const TYPES = [
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
];
/** One subclass of Refused per refusal type: `err instanceof NoSuchTenant`. */
export const refusals = Object.fromEntries(
  TYPES.map((t) => [t, { [t]: class extends Refused {} }[t]]),
);
export const {
  Malformed, UnknownOperation, InvalidField, InvalidSpec, UnknownZone, NoSuchTenant,
  NoSuchSchedule, Conflict, TooLarge, Throttled, Raced,
} = refusals;

/** The error of a refusal the function answered. */
export function refusal(error) {
  const C = refusals[(error || {}).type] || Refused;
  return new C(error);
}

export class StackError extends Error {
  constructor(kind, message) {
    super(`${kind}: ${message}`);
    this.name = "StackError";
    this.kind = kind;
  }
}

export class Control {
  /** `functionName`: the stack's ControlFunctionName output (or its ARN). */
  constructor(functionName, client) {
    this.functionName = functionName;
    this.client = client || new LambdaClient({});
  }

  async call(request) {
    const r = await this.client.send(
      new InvokeCommand({
        FunctionName: this.functionName,
        InvocationType: "RequestResponse",
        Payload: new TextEncoder().encode(JSON.stringify(request)),
      }),
    );
    const body = new TextDecoder().decode(r.Payload || new Uint8Array());
    if (r.FunctionError) {
      let e = {};
      try { e = JSON.parse(body); } catch { /* not JSON: the body is the message */ }
      throw new StackError(e.errorType || r.FunctionError, e.errorMessage || body);
    }
    const answer = JSON.parse(body);
    if (!answer.ok) throw refusal(answer.error);
    return answer.result;
  }

  one(batch) {
    if (batch.refused.length) throw refusal(batch.refused[0]);
    return batch.entries[0];
  }

  // ---- tenants
  addTenants(tenants) { return this.call({ op: "tenants.add", tenants }); }
  async addTenant(id, zone, owedFrom) {
    const t = { id, zone };
    if (owedFrom !== undefined) t.owed_from = owedFrom;
    return this.one(await this.addTenants([t])).outcome;
  }
  getTenant(id) { return this.call({ op: "tenants.get", id }); }
  suspendTenant(id) { return this.call({ op: "tenants.suspend", id }); }
  resumeTenant(id) { return this.call({ op: "tenants.resume", id }); }
  moveTenant(id, zone) { return this.call({ op: "tenants.move", id, zone }); }
  removeTenant(id) { return this.call({ op: "tenants.remove", id }); }
  listTenants(cursor, limit) {
    const req = { op: "tenants.list" };
    if (cursor !== undefined) req.cursor = cursor;
    if (limit !== undefined) req.limit = limit;
    return this.call(req);
  }
  async *iterTenants(limit) {
    let cursor;
    do {
      const page = await this.listTenants(cursor, limit);
      yield* page.tenants;
      cursor = page.cursor;
    } while (cursor !== undefined);
  }
  explainTenant(id) { return this.call({ op: "tenants.explain", id }); }

  // ---- schedules
  putSchedules(schedules) { return this.call({ op: "schedules.put", schedules }); }
  async putSchedule(tenant, name, spec, options = {}) {
    const s = { tenant, name, spec, spread_min: options.spreadMin || 0 };
    if (options.gap !== undefined) s.gap = options.gap;
    if (options.fold !== undefined) s.fold = options.fold;
    if (options.payload !== undefined) s.payload = options.payload;
    return this.one(await this.putSchedules([s])).outcome;
  }
  pauseSchedule(tenant, name) { return this.call({ op: "schedules.pause", tenant, name }); }
  resumeSchedule(tenant, name) { return this.call({ op: "schedules.resume", tenant, name }); }
  removeSchedule(tenant, name) { return this.call({ op: "schedules.remove", tenant, name }); }
  async listSchedules(tenant) { return (await this.call({ op: "schedules.list", tenant })).schedules; }
  async nextFires(tenant, options = {}) {
    const req = { op: "schedules.next", tenant };
    if (options.name !== undefined) req.name = options.name;
    if (options.count !== undefined) req.count = options.count;
    if (options.from !== undefined) req.from = options.from;
    return (await this.call(req)).fires;
  }

  // ---- timers
  setTimer(tenant, name, at, payload) {
    const req = { op: "timers.at", tenant, name, at };
    if (payload !== undefined) req.payload = payload;
    return this.call(req);
  }
  cancelTimer(tenant, name) { return this.call({ op: "timers.cancel", tenant, name }); }
}
