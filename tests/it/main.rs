//! Integration tests against the real local servers (`make test` starts them).
//!
//! One test binary, one module per concern; every test makes its own uniquely named tables.

/// Which alarm fires for a failing, a paused and a stopped sweep.
mod alarms;
/// The archiver Lambda's handler.
mod archive;
/// The local server applies each request atomically (the moto lock), or nothing else here means anything.
mod atomicity;
/// The `tickctl` binary as the tests run it.
mod binary;
/// A one-off campaign larger than a page: fixed at its first page, cleaned after its fire.
mod campaign;
/// Estimated capacity against dynalite's, and EMF output.
mod capacity;
/// Randomised fault schedules over all four jobs, and the checks every schedule must pass.
mod chaos;
/// docs/configuration.md lists every variable the code reads.
mod config_reference;
/// The control function through the Python and TypeScript clients, its refusals, its schema.
mod control;
mod control_cost;
mod control_events;
/// `tickctl cost`'s model against a live simulated run.
mod cost;
/// The defects an adversarial read found, one test each.
mod defects;
/// Delivery at a real deadline: drains that hand on until a backlog is done.
mod delivery;
mod dev;
/// The docs held to the code: the configuration reference, the runbook's alarms, named commands.
mod docs;
/// The pages against the template, the Makefile and samconfig: each kind of contradiction found.
mod drift;
/// `tenants.explain`'s queue section against what the queue holds after failures.
mod explain;
/// A drain that fails hands on after a backoff, a bounded chain.
mod failed_drains;
/// Failure paths as AWS runs them: unit dead letters, a poison unit, an unreadable shard registry.
mod failure_paths;
/// The tenant fan-out Lambda's handler.
mod fanout;
/// Bad input refused; every job paused by its own read; tenant ids at their limit.
mod guards;
/// The hand-on gaps: a failed slot release, a short page of one shard among several.
mod handon;
/// No import cycle between modules; no long file of the Lambdas or tickctl that is not one concept.
mod house;
/// IAM from the recorded calls, against each function's policy in template.yaml.
mod iam;
/// Claim / complete idempotency records.
mod idempotency;
/// An idle day of the whole stack, by the meter.
mod idle_day;
/// Lease, fencing, slot records, watermark.
mod lease;
/// The binaries' stdout through Lambda's log-level filter.
mod logs;
/// What a new tenant is owed: from the period it was added in, or a migration's date.
mod migrate;
/// `tickctl` against a deployed stack: read-only commands write nothing.
mod operator;
mod owed;
/// Pagination to exhaustion and resumable cursors.
mod pager;
/// The pulse sweep: idle cost, enumeration, DST, catch-up, crashes.
mod pulse;
/// The work queue and the queue worker's drain loop.
mod queue;
/// A release a team deploys with the SAM CLI alone.
mod release;
/// Throttling retries and the no-retry probe client.
mod retry;
mod schedules;
mod schedules_dst;
/// A boundary shared by concurrent shard workers, each shard under its own lease.
mod shards;
/// Units delivered to a function in another runtime, a queue, a bus.
mod targets;
/// template.yaml declares exactly the tables the code creates.
mod template;
/// `tickctl tenants`: the binary against the local servers, a move beside a running sweep.
mod tenants_cli;
/// A throttling target costs no unit its attempts.
mod throttling;
/// tickctl against the local servers.
mod tickctl;
