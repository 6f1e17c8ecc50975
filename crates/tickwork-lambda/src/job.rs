//! The one skeleton every leased job runs in: the pulse sweep, the fan-out and the archiver.
//!
//! Why: each rule below was once written three times, and each copy drifted (one job read its
//! pause switch, two did not; one emitted metrics on failure, none did). Written once, a rule
//! holds for every job.
//!
//! ## One tick
//! 1. **Parse and guard the event** ([`Tick::parse`], [`Tick::guard`]): a malformed event or one
//!    further ahead than one interval plus the skew bound is refused before any read or write.
//! 2. **The one read**: the job's state item (watermark, pause switch, registered groups), one
//!    eventually consistent GetItem. Paused: stop ([`Outcome::Paused`]).
//! 3. **What is due** ([`LeasedJob::due`]): pure over the state where it can be. Nothing due:
//!    stop ([`Outcome::Idle`]). That is the whole cost of an idle tick: 1 read, 0 writes.
//! 4. **Dry run**: plan and report, write nothing.
//! 5. **Lease** ([`LeaseStore::run_if_leader`]): kept after success for the rest of the window,
//!    released on failure so another worker retries (every unit of work is idempotent). Held by
//!    another worker: [`Outcome::Busy`].
//! 6. **Work** ([`LeasedJob::work`]) within the earlier of the invocation's deadline and the
//!    lease's safe end (its expiry minus the skew bound), minus the margin: no step starts after
//!    the lease could have lapsed.
//! 7. **Report, on every path**: one metrics line (EMF) with `Paused` and the job's metrics,
//!    whether the tick was idle, paused, busy, finished or failed; a failed tick also logs at
//!    ERROR. What is not known on a path (a tick that failed before its read) is not emitted, so
//!    an alarm that treats missing data as breaching is not told "all is well".

use std::future::Future;
use std::time::Duration;

use serde_json::Value;
use tickwork::budget::{AnyOf, Budget, Deadline};
use tickwork::clock::{Millis, SharedClock};
use tickwork::lease::{LeaderError, Lease, LeaseConfig, LeaseStore};
use tickwork::meter::InvocationLine;
use tickwork::watermark::{WatermarkState, Watermarks};
use tickwork::{Db, DbError};

use crate::event::{BadEvent, Tick};

/// How a tick ended; one enum for every job, so dashboards and tests read the same words.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Nothing was due (one read).
    #[default]
    Idle,
    /// The job's window was already done (one read; the fan-out's idle).
    AlreadyDone,
    /// The job is paused (one read).
    Paused,
    /// Another worker holds the lease.
    Busy,
    /// Everything due was done.
    Completed,
    /// Stopped by the budget (or by isolated failures); resumes next tick.
    Partial,
    /// Our lease was taken over; we stopped writing.
    LostLease,
    /// Dry run: planned, wrote nothing.
    DryRun,
}

impl Outcome {
    /// The snake-case name (`idle`, `lost_lease`), as in the metrics line.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Idle => "idle",
            Outcome::AlreadyDone => "already_done",
            Outcome::Paused => "paused",
            Outcome::Busy => "busy",
            Outcome::Completed => "completed",
            Outcome::Partial => "partial",
            Outcome::LostLease => "lost_lease",
            Outcome::DryRun => "dry_run",
        }
    }
}

/// What a job's report must say for the skeleton to log and emit it.
pub trait JobReport: Clone + Default + Send + serde::Serialize {
    /// How the tick ended.
    fn outcome(&self) -> Outcome;
    /// Sets how the tick ended.
    fn set_outcome(&mut self, o: Outcome);
    /// The job's own metrics (names from [`tickwork::meter::METRICS`]), known from this report.
    fn metrics(&self) -> Vec<(&'static str, f64)>;
}

/// What every leased job has, built once per process.
#[derive(Debug, Clone)]
pub struct JobCore {
    /// The function (owner ids, logs): `pulse-sweep`, `tenant-fanout`, `archiver`.
    pub function: &'static str,
    /// Metered client.
    pub db: Db,
    /// Wall clock (lease expiry, deadlines, the event guard).
    pub clock: SharedClock,
    /// Leases.
    pub leases: LeaseStore,
    /// The job's state item: watermark, pause switch, groups.
    pub marks: Watermarks,
    /// The lease (its job name names the state item too), interval and skew bound.
    pub lease: LeaseConfig,
    /// Stop starting steps this long before a deadline.
    pub margin: Duration,
    /// Every tick a dry run.
    pub dry_run: bool,
    /// CloudWatch namespace of the metrics line.
    pub namespace: String,
}

impl JobCore {
    /// The core of `function`'s job: its leases and state item in the control table `control`,
    /// under `lease`, stopping `margin` before a deadline. The namespace is the default until the
    /// caller sets the stack's.
    pub fn new(
        function: &'static str,
        db: Db,
        clock: SharedClock,
        control: &str,
        lease: LeaseConfig,
        margin: Duration,
        dry_run: bool,
    ) -> Self {
        Self {
            function,
            leases: LeaseStore::new(db.clone(), control, clock.clone()),
            marks: Watermarks::new(db.clone(), control, clock.clone()),
            db,
            clock,
            lease,
            margin,
            dry_run,
            namespace: "tickwork".into(),
        }
    }

    /// The job's name (lease, state item, pause switch, metrics line).
    pub fn job(&self) -> &str {
        &self.lease.job
    }
}

/// What [`LeasedJob::due`] answers: the report so far, and the plan when something is due.
pub type Due<R, P> = (R, Option<P>);

/// A job that runs in the skeleton.
pub trait LeasedJob: Sync {
    /// What [`LeasedJob::due`] found to do.
    type Plan: Send;
    /// The job's report.
    type Report: JobReport;
    /// The job's error.
    type Error: std::error::Error + From<DbError> + From<BadEvent> + Send + Sync + 'static;

    /// The shared parts.
    fn core(&self) -> &JobCore;

    /// Step 3: from the state item and the tick, the report so far (what is due, counted) and
    /// the plan, or no plan when nothing is due.
    fn due(
        &self,
        state: &WatermarkState,
        tick: &Tick,
    ) -> impl Future<Output = Result<Due<Self::Report, Self::Plan>, Self::Error>> + Send;

    /// Step 4: what the work would do, writing nothing.
    fn dry_run(
        &self,
        tick: &Tick,
        plan: Self::Plan,
        budget: &dyn Budget,
        report: Self::Report,
    ) -> impl Future<Output = Result<Self::Report, Self::Error>> + Send;

    /// Step 6: the work, under `lease`, within `budget`.
    fn work(
        &self,
        tick: &Tick,
        lease: &Lease,
        plan: Self::Plan,
        budget: &dyn Budget,
        report: Self::Report,
    ) -> impl Future<Output = Result<Self::Report, Self::Error>> + Send;

    /// Step 6 of a helper invocation ([`Tick::helper`]): a share of the work the leader started,
    /// without the job's lease, each unit of work under a fence of its own. A job that starts no
    /// helpers refuses the event.
    fn help(
        &self,
        tick: &Tick,
        plan: Self::Plan,
        budget: &dyn Budget,
        report: Self::Report,
        owner: &str,
    ) -> impl Future<Output = Result<Self::Report, Self::Error>> + Send {
        let _ = (tick, plan, budget, report, owner);
        async move { Err(BadEvent(format!("`{}` starts no helpers: `detail.helper` is refused", self.core().job())).into()) }
    }
}

/// A tick's result and what was known about it when it failed (for the metrics line).
struct Ran<R, E> {
    result: Result<R, E>,
    known: Option<R>,
}

/// Steps 2 to 6 for a parsed tick (tests and local drivers call this; the Lambda calls
/// [`handle`]).
pub async fn run<J: LeasedJob>(job: &J, tick: &Tick, budget: &dyn Budget, owner: &str) -> Result<J::Report, J::Error> {
    run_inner(job, tick, budget, owner).await.result
}

async fn run_inner<J: LeasedJob>(job: &J, tick: &Tick, budget: &dyn Budget, owner: &str) -> Ran<J::Report, J::Error> {
    let core = job.core();
    let read_at = core.clock.now_ms();
    let state = match core.marks.read(core.job()).await {
        Ok(s) => s,
        Err(e) => return Ran { result: Err(e.into()), known: None },
    };
    if state.paused {
        let mut r = J::Report::default();
        r.set_outcome(Outcome::Paused);
        return Ran { result: Ok(r.clone()), known: Some(r) };
    }
    let (report, plan) = match job.due(&state, tick).await {
        Ok(x) => x,
        Err(e) => return Ran { result: Err(e), known: None },
    };
    let Some(plan) = plan else {
        return Ran { result: Ok(report.clone()), known: Some(report) };
    };
    let known = Some(report.clone());
    if tick.dry_run {
        let result = job.dry_run(tick, plan, budget, report).await.map(|mut r| {
            r.set_outcome(Outcome::DryRun);
            r
        });
        return Ran { result, known };
    }
    if tick.helper {
        let result = job.help(tick, plan, budget, report, owner).await;
        return Ran { result, known };
    }
    let mut busy = report.clone();
    busy.set_outcome(Outcome::Busy);
    let result = core
        .leases
        .run_if_leader(&core.lease, owner, |lease| async move {
            let (report, plan) = if lease.held_since(read_at - READ_LAG_MS, core.lease.clock_skew) {
                match replan(job, tick, &lease).await? {
                    (report, Some(plan)) => (report, plan),
                    (report, None) => return Ok(report),
                }
            } else {
                (report, plan)
            };
            let lease_end = Deadline::new(
                core.clock.clone(),
                lease.safe_until_ms(core.lease.clock_skew),
                core.margin.as_millis() as i64,
            );
            let budget = AnyOf(vec![budget, &lease_end]);
            job.work(tick, &lease, plan, &budget, report).await
        })
        .await;
    let result = match result {
        Ok(Some(r)) => Ok(r),
        Ok(None) => Ok(busy),
        Err(LeaderError::Db(e)) => Err(e.into()),
        Err(LeaderError::Action(e)) => Err(e),
    };
    Ran { result, known }
}

/// How long the state item's first read (eventually consistent) may lag a write before it, beside
/// the clock skew: a release just before the read may not show in it.
const READ_LAG_MS: Millis = 2_000;

/// Step 3 again, under `lease`, when the holder before it could have written after the state item
/// was read (a duplicate delivery of the event, or a tick that took a lease another let go): a
/// plan from that read may name work another invocation has done since. Acted on, it could undo
/// what that work decided (seen: a zone taken out of the registry because its run's shards were
/// found done, chaos seed 47). One strongly consistent read, only then. Nothing due now: the
/// lease is let go, and the report says so.
async fn replan<J: LeasedJob>(job: &J, tick: &Tick, lease: &Lease) -> Result<Due<J::Report, J::Plan>, J::Error> {
    let core = job.core();
    let state = core.marks.read_strong(core.job()).await?;
    let (mut report, plan) = if state.paused {
        let mut r = J::Report::default();
        r.set_outcome(Outcome::Paused);
        (r, None)
    } else {
        job.due(&state, tick).await?
    };
    if plan.is_none() {
        tracing::info!(job = core.job(), "planned again under the lease: done by another invocation since");
        if let Err(e) = core.leases.release(lease).await {
            tracing::warn!(job = core.job(), error = %e, "lease release after planning again failed; it lapses");
        }
        if report.outcome() == Outcome::Idle {
            report.set_outcome(Outcome::AlreadyDone);
        }
    }
    Ok((report, plan))
}

/// The Lambda entry of a leased job: steps 1 to 7.
pub async fn handle<J: LeasedJob>(job: &J, event: Value, deadline_ms: Millis) -> Result<J::Report, J::Error> {
    let core = job.core();
    core.db.meter().reset();
    let owner = crate::invocation::owner_id(core.function);
    let ran = match parse_and_guard(&event, core) {
        Err(e) => Ran { result: Err(e.into()), known: None },
        Ok(tick) => {
            let budget = Deadline::new(core.clock.clone(), deadline_ms, core.margin.as_millis() as i64);
            run_inner(job, &tick, &budget, &owner).await
        }
    };
    finish(core, ran.result.as_ref(), ran.known.as_ref());
    ran.result
}

fn parse_and_guard(event: &Value, core: &JobCore) -> Result<Tick, BadEvent> {
    let mut tick = Tick::parse(event)?;
    tick.guard(
        tickwork::clock::Clock::now_ms(core.clock.as_ref()),
        core.lease.interval.as_millis() as i64,
        core.lease.clock_skew.as_millis() as i64,
    )?;
    tick.dry_run |= core.dry_run;
    Ok(tick)
}

/// Step 7: the metrics line and the log line, on every path.
fn finish<R: JobReport, E: std::error::Error>(core: &JobCore, result: Result<&R, &E>, known: Option<&R>) {
    let (outcome, report, error) = match result {
        Ok(r) => (r.outcome().name().to_string(), Some(r), None),
        Err(e) => ("failed".to_string(), known, Some(crate::errors::error_chain(e))),
    };
    emit(core.db.meter(), &core.namespace, core.job(), core.clock.now_ms(), &outcome, report, error.as_deref());
    match (&error, report) {
        (Some(e), _) => tracing::error!(job = %core.job(), error = %e, "tick failed"),
        (None, Some(r)) => {
            tracing::info!(job = %core.job(), outcome = %outcome, report = %serde_json::to_string(r).unwrap_or_default(), "tick")
        }
        (None, None) => {}
    }
}

/// Prints one invocation's metrics line: `Paused` and the report's metrics when the report is
/// known, the meter's detail always, the error when there was one.
pub fn emit<R: JobReport>(
    meter: &tickwork::meter::Meter,
    namespace: &str,
    job: &str,
    now_ms: Millis,
    outcome: &str,
    report: Option<&R>,
    error: Option<&str>,
) {
    let mut metrics = Vec::new();
    let mut props = serde_json::Map::new();
    if let Some(r) = report {
        metrics.push(("Paused", f64::from(u8::from(r.outcome() == Outcome::Paused))));
        metrics.extend(r.metrics());
        if let Value::Object(m) = serde_json::to_value(r).unwrap_or(Value::Null) {
            props.insert("report".into(), Value::Object(m));
        }
    }
    let line = InvocationLine {
        job: job.to_string(),
        outcome: outcome.to_string(),
        metrics,
        props,
        error: error.map(str::to_string),
    };
    crate::telemetry::print_line(&meter.invocation_line(namespace, now_ms, crate::telemetry::metrics_level(), &line));
}
