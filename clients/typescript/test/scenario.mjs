// The control function driven through the TypeScript client, as a team's service would drive it.
// Run by tests/it/control.rs under a real Node.js against the function behind the local Invoke
// API: `node scenario.mjs lifecycle|setup|refusals`, with TICKWORK_CONTROL_ENDPOINT and
// TICKWORK_CONTROL_FUNCTION (and TICKWORK_TIMER_AT, TICKWORK_SOON_AT for `lifecycle`). Prints one JSON document.
import { LambdaClient } from "@aws-sdk/client-lambda";
import { Control, Refused } from "../index.js";

const ZONES = ["Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Sydney", "Asia/Kolkata", "UTC"];

const tw = new Control(
  process.env.TICKWORK_CONTROL_FUNCTION,
  new LambdaClient({
    endpoint: process.env.TICKWORK_CONTROL_ENDPOINT,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  }),
);

async function lifecycle() {
  const tenants = Array.from({ length: 100 }, (_, i) => ({ id: `t${String(i).padStart(3, "0")}`, zone: ZONES[i % ZONES.length] }));
  const added = await tw.addTenants(tenants);
  const again = await tw.addTenants(tenants);
  const daily = await tw.putSchedules(
    tenants.map((t) => ({ tenant: t.id, name: "nudge", spec: "daily 08:00", payload: { kind: "summary" } })),
  );
  const timers = [];
  // A payload of each tenant's own: what the reminder is for, delivered with its fire.
  for (const [n, t] of tenants.entries()) {
    timers.push((await tw.setTimer(t.id, "call", process.env.TICKWORK_TIMER_AT, { reason: "call", n })).outcome);
  }
  const moved = await tw.moveTenant("t001", "Asia/Tokyo");
  const suspended = await tw.suspendTenant("t002");
  const cancelled = await tw.cancelTimer("t003", "call");
  const soon = await tw.setTimer("t004", "soon", process.env.TICKWORK_SOON_AT);
  await tw.suspendTenant("t006");
  const resumed = await tw.resumeTenant("t006");
  const removed = await tw.removeTenant("t005");
  const listed = [];
  for await (const t of tw.iterTenants(30)) listed.push(t.id);
  return {
    added: added.entries.map((e) => e.outcome),
    again: again.entries.map((e) => e.outcome),
    daily: daily.entries.map((e) => e.outcome),
    refused: [...added.refused, ...again.refused, ...daily.refused],
    timers,
    moved,
    suspended,
    cancelled,
    soon,
    resumed,
    removed,
    listed: listed.sort(),
    next: await tw.nextFires("t001", { name: "nudge", count: 1 }),
  };
}

async function setup() {
  await tw.addTenant("r1", "Europe/Berlin");
  await tw.putSchedule("r1", "nudge", "daily 08:00");
  return { tenant: await tw.getTenant("r1") };
}

async function refusals() {
  const cases = {
    "unknown zone": () => tw.addTenant("x1", "Mars/Olympus_Mons"),
    "added again in another zone": () => tw.addTenant("r1", "Asia/Tokyo"),
    "over-long id": () => tw.addTenant("x".repeat(1000), "UTC"),
    "owed_from not a date": () => tw.addTenant("x2", "UTC", "yesterday"),
    "batch over its limit": () => tw.addTenants(Array.from({ length: 101 }, (_, i) => ({ id: `b${i}`, zone: "UTC" }))),
    "invalid spec": () => tw.putSchedule("r1", "n2", "hourly 08:00"),
    "invalid spread": () => tw.putSchedule("r1", "n2", "daily 08:00", { spreadMin: 2000 }),
    "schedule of no tenant": () => tw.putSchedule("nobody", "n", "daily 08:00"),
    "no such tenant": () => tw.getTenant("nobody"),
    "no such schedule": () => tw.pauseSchedule("r1", "nope"),
    "timer over a recurring schedule": () => tw.setTimer("r1", "nudge", "2030-01-01T09:00"),
    "cancel of a recurring schedule": () => tw.cancelTimer("r1", "nudge"),
    "move to an unknown zone": () => tw.moveTenant("r1", "Nowhere/Land"),
    "unknown operation": () => tw.call({ op: "tenants.frobnicate" }),
    "no op": () => tw.call({ id: "r1" }),
    "not an object": () => tw.call([1, 2, 3]),
    "field of the wrong type": () => tw.call({ op: "tenants.get", id: 5 }),
    "unknown field": () => tw.call({ op: "tenants.get", id: "r1", colour: "red" }),
    "entry field of the wrong type": () => tw.call({ op: "tenants.add", tenants: [{ id: "a", zone: "UTC" }, { id: "b", zone: 7 }] }),
    "cursor not ours": () => tw.listTenants("bm90IGEgY3Vyc29y"),
  };
  const out = {};
  for (const [name, f] of Object.entries(cases)) {
    try {
      await f();
      out[name] = { raised: null };
    } catch (e) {
      if (!(e instanceof Refused)) throw e;
      out[name] = { raised: e.constructor.name, type: e.type, field: e.field ?? null, index: e.index ?? null };
    }
  }
  return out;
}

const run = { lifecycle, setup, refusals }[process.argv[2]];
console.log(JSON.stringify(await run()));
