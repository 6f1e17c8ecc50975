//! One seed's deployment and schedule: processes with faulty clients and skewed clocks, running
//! the real handlers, overlapping where the schedule says so.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tickwork::budget::{Budget, Steps, Unlimited};
use tickwork::clock::{Clock, ManualClock, Millis, SharedClock};
use tickwork::config::Env;
use tickwork::queue::{queue_table, Queue, QueueConfig};
use tickwork::tenants::{tenants_table, Tenant, Tenants};
use tickwork::watermark::Watermarks;
use tickwork::Db;
use tickwork_lambda::Tick;
use tickwork_tests::faults::{Fault, Faults, Planned, Rates};
use tickwork_tests::{quick_retry, unique, Local};

use super::Report;

/// Which fault classes a schedule draws from.
#[derive(Debug, Clone, Copy)]
pub struct Classes {
    /// Crashes before a request is sent.
    pub crash_before: bool,
    /// Crashes after a request was applied (answer lost).
    pub crash_after: bool,
    /// Answers lost and the request retried by the SDK.
    pub lose_answer: bool,
    /// Throttling, conflicts, unprocessed batches, S3 errors.
    pub throttle: bool,
    /// Duplicate deliveries (two invocations of one event at once).
    pub duplicates: bool,
    /// Late and out-of-order events, and a 30-hour outage.
    pub late: bool,
    /// Clock offsets within the skew bound.
    pub skew: bool,
    /// A leader stalled past its lease.
    pub stall: bool,
    /// The archiver dies right after an object's put was applied (before its deletes).
    pub crash_after_put: bool,
    /// Tenants added, suspended, resumed, moved during the run.
    pub churn: bool,
    /// Budgets that stop invocations between pages.
    pub budgets: bool,
}

impl Classes {
    /// Everything.
    pub fn all() -> Self {
        Self {
            crash_before: true,
            crash_after: true,
            lose_answer: true,
            throttle: true,
            duplicates: true,
            late: true,
            skew: true,
            stall: true,
            crash_after_put: true,
            churn: true,
            budgets: true,
        }
    }

    /// Nothing.
    pub fn quiet() -> Self {
        Self {
            crash_before: false,
            crash_after: false,
            lose_answer: false,
            throttle: false,
            duplicates: false,
            late: false,
            skew: false,
            stall: false,
            crash_after_put: false,
            churn: false,
            budgets: false,
        }
    }
}

/// A bug planted at the SDK boundary, to test the harness itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plant {
    /// None.
    None,
    /// The archiver's row deletes lose their version condition (deletes by key alone).
    UnconditionalArchiveDeletes,
}

/// One seed.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// The seed.
    pub seed: u64,
    /// Fault classes.
    pub classes: Classes,
    /// Planted bug.
    pub plant: Plant,
    /// Simulated days.
    pub days: u32,
}

/// The zones tenants live in: both DST directions, a half-hour offset, none.
pub const ZONES: [&str; 6] =
    ["UTC", "Europe/Berlin", "Asia/Tokyo", "America/Los_Angeles", "Asia/Kolkata", "Pacific/Auckland"];
/// 2026-03-28T00:00Z: Berlin's spring-forward on the 29th, month and quarter end on the 31st.
pub const START: Millis = 1_774_656_000_000;
const MIN: Millis = 60_000;
const HOUR: Millis = 3_600_000;
/// Change rows become due after a day.
pub const ARCHIVE_AGE: Millis = 86_400_000;

/// A clock offset from the shared simulated one (a machine whose clock is off by a little).
#[derive(Debug, Clone)]
struct Skewed(ManualClock, Millis);

impl Clock for Skewed {
    fn now_ms(&self) -> Millis {
        self.0.now_ms() + self.1
    }
}

/// The S3-free half of the planted bug: strips the condition from DeleteItem on the changes table.
#[derive(Debug, Clone)]
struct StripDeleteCondition(String);

impl aws_smithy_runtime_api::client::interceptors::Intercept for StripDeleteCondition {
    fn name(&self) -> &'static str {
        "PlantedBug"
    }
    fn modify_before_serialization(
        &self,
        ctx: &mut aws_smithy_runtime_api::client::interceptors::context::BeforeSerializationInterceptorContextMut<'_>,
        _: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        _: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        if let Some(d) = ctx.input_mut().downcast_mut::<aws_sdk_dynamodb::operation::delete_item::DeleteItemInput>() {
            if d.table_name.as_deref() == Some(self.0.as_str()) {
                d.condition_expression = None;
                d.expression_attribute_names = None;
                d.expression_attribute_values = None;
            }
        }
        Ok(())
    }
}

/// What the harness knows about a tenant, to compute what it is owed.
#[derive(Debug, Clone)]
pub struct Life {
    /// When it was added.
    pub since: Millis,
    /// Its zone at its first visit.
    pub first_zone: String,
    /// Its zone now.
    pub zone: String,
    /// Each zone it was moved out of, and when: periods that had ended there by then may already
    /// have been pulsed (no period lost or pulsed twice across a move), or wait for the new zone.
    pub left: Vec<(String, Millis)>,
    /// Active now.
    pub active: bool,
    /// Never suspended, moved, or added late: owed every fan-out window.
    pub stable: bool,
}

/// The deployment of one seed.
pub struct World {
    pub local: Local,
    pub control: String,
    pub tenants_table: String,
    pub queue: String,
    pub summaries: String,
    pub changes: String,
    pub bucket: String,
    pub clock: ManualClock,
    pub(super) rng: fastrand::Rng,
    cfg: Config,
    pub report: Report,
    pub tenants: BTreeMap<String, Life>,
    /// Every change-row version written: (pk, tsid).
    pub versions: Vec<(String, String)>,
    /// The latest version per entity: pk → (tsid, ts).
    pub latest: BTreeMap<String, (String, Millis)>,
    faults: Vec<Faults>,
    entity: u64,
    /// The first fan-out window.
    pub first_window: Option<String>,
    /// When the archiver last ran (its cutoff is this minus the age).
    pub last_archive_at: Millis,
    /// A leader has stalled (once per seed).
    stalled: bool,
    /// Every unit key the worker's handlers completed, and how often (all drains).
    pub deliveries: queue_worker::registry::Deliveries,
    /// The schedules written, as the harness knows them ([`super::scheds`]).
    pub scheds: super::scheds::Scheds,
}

fn ev(at: Millis) -> Tick {
    Tick::parse(&Tick::envelope(at, false)).expect("an envelope parses")
}

impl World {
    async fn new(cfg: Config) -> Self {
        let local = Local::on(cfg.seed as usize).await;
        let bucket = unique("chaos").to_lowercase();
        archiver::s3_client(&local.sdk).create_bucket().bucket(&bucket).send().await.expect("bucket");
        let clock = local.clock.clone();
        clock.set(START);
        Self {
            control: local.control().await,
            tenants_table: local.table(&tenants_table()).await,
            queue: local.table(&queue_table()).await,
            summaries: local.table(&queue_worker::summary::summaries_table()).await,
            changes: local.table(&tickwork::changes::changes_table()).await,
            bucket,
            local,
            clock,
            rng: fastrand::Rng::with_seed(cfg.seed),
            cfg,
            report: Report::default(),
            tenants: BTreeMap::new(),
            versions: Vec::new(),
            latest: BTreeMap::new(),
            faults: Vec::new(),
            entity: 0,
            first_window: None,
            last_archive_at: 0,
            stalled: false,
            deliveries: Default::default(),
            scheds: Default::default(),
        }
    }

    pub(super) fn count(&mut self, what: &str) {
        *self.report.events.entry(what.to_string()).or_default() += 1;
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.f64() < p
    }

    /// A process: its fault interceptor and its clock.
    pub(super) fn process(&mut self, faulty: bool) -> (Faults, SharedClock) {
        let f = Faults::new();
        let c = self.cfg.classes;
        if faulty {
            let rates = Rates {
                throttle: if c.throttle { 200 } else { 0 },
                txn: if c.throttle { 150 } else { 0 },
                unprocessed: if c.throttle { 300 } else { 0 },
                s3_error: if c.throttle { 150 } else { 0 },
                lose_answer: if c.lose_answer { 30 } else { 0 },
            };
            f.random(self.rng.u64(..), rates);
            if c.crash_before && self.chance(0.12) {
                f.crash_before(None, self.rng.u64(1..=40));
            }
            if c.crash_after && self.chance(0.10) {
                f.plan(Planned { op: None, nth: self.rng.u64(1..=40), fault: Fault::CrashAfter });
            }
        }
        let offset = if faulty && c.skew { self.rng.i64(-500..=500) } else { 0 };
        if offset != 0 {
            self.count("clock offsets");
        }
        self.faults.push(f.clone());
        (f, Arc::new(Skewed(self.clock.clone(), offset)))
    }

    fn db(&self, f: &Faults) -> Db {
        let db = self.local.db_with(Some(f), None, &quick_retry());
        db.register_gsis(&self.queue, queue_table().gsi_shapes());
        db
    }

    fn budget(&mut self, faulty: bool) -> Box<dyn Budget> {
        if faulty && self.cfg.classes.budgets && self.chance(0.3) {
            self.count("budget-limited invocations");
            Box::new(Steps::new(self.rng.u64(2..12)))
        } else {
            Box::new(Unlimited)
        }
    }

    pub(super) fn sweep_deps(&self, f: &Faults, clock: SharedClock) -> pulse_sweep::Deps {
        let env = Env::from_pairs([("TICKWORK_PULSE_PAGE_SIZE", "4"), ("TICKWORK_PULSE_TENANT_CONCURRENCY", "4")]);
        let cfg = pulse_sweep::PulseConfig::from_env(&env, Duration::from_secs(1)).expect("sweep settings");
        let t = pulse_sweep::Tables {
            control: self.control.clone(),
            tenants: self.tenants_table.clone(),
            queue: self.queue.clone(),
        };
        pulse_sweep::Deps::new(self.db(f), clock, cfg, t, 4, queue_cfg())
    }

    /// A sweep invocation of the event at `at`, as a task.
    fn spawn_sweep(
        &mut self,
        at: Millis,
        faulty: bool,
        stall_at: Option<u64>,
    ) -> (tokio::task::JoinHandle<Result<(), String>>, Faults) {
        let (f, clock) = self.process(faulty);
        if let Some(n) = stall_at {
            f.plan(Planned { op: None, nth: n, fault: Fault::Stall });
        }
        let deps = self.sweep_deps(&f, clock);
        let budget = self.budget(faulty);
        let owner = unique("sweep");
        let task = tokio::spawn(async move {
            match pulse_sweep::run(&deps, &ev(at), budget.as_ref(), &owner).await {
                Ok(_) => Ok(()),
                Err(e) => Err(tickwork_lambda::error_chain(&e)),
            }
        });
        (task, f)
    }

    async fn join(&mut self, task: tokio::task::JoinHandle<Result<(), String>>, f: &Faults, job: &str) {
        let trace = std::env::var("CHAOS_TRACE").is_ok();
        if trace {
            eprintln!("  joining {job} (calls so far {})", f.calls());
        }
        let out = task.await;
        if trace {
            eprintln!(
                "  joined {job}: {:?} after {} calls, injected {:?}",
                out.as_ref().map(|r| r.as_ref().err().map(|e| e.chars().take(120).collect::<String>())),
                f.calls(),
                f.injected()
            );
        }
        match out {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                if !f.crashed() && !e.contains("throttled") && !e.contains("injected") && !e.contains("after retries") {
                    // A failure with no fault to explain it is a finding, not noise.
                    if f.injected().is_empty() {
                        self.report.violations.push(format!("{job}: failed with no fault injected: {e}"));
                    }
                }
                self.count(&format!("{job} invocations failed"));
            }
            Err(j) if j.is_panic() => self.report.violations.push(format!("{job}: panicked: {j}")),
            Err(j) => self.report.violations.push(format!("{job}: task failed: {j}")),
        }
    }

    /// One sweep delivery of the event at `at`, with the schedule's extras.
    async fn sweep_round(&mut self, at: Millis, stall: bool) {
        let c = self.cfg.classes;
        // The writers' records since the last round, handed over before the tick (the mapping
        // runs within a second of a write).
        self.hand_over_stream(true).await;
        let mut tasks = Vec::new();
        let stall_at = stall.then(|| self.rng.u64(2..8));
        let (main, main_faults) = self.spawn_sweep(at, true, stall_at);
        if c.duplicates && self.chance(0.12) {
            self.count("duplicate deliveries (overlapping)");
            tasks.push(self.spawn_sweep(at, true, None));
        }
        if c.late && self.chance(0.06) {
            self.count("late, out-of-order events");
            let late = at - self.rng.i64(HOUR..=8 * HOUR);
            tasks.push(self.spawn_sweep(late, true, None));
        }
        if c.churn && self.chance(0.15) {
            self.churn().await;
        }
        if c.churn && self.chance(0.25) {
            self.sched_churn().await;
            // Sometimes handed over while the tick runs (it may be between its read of the
            // shards and its set of `sched_next`).
            if self.chance(0.5) {
                self.hand_over_stream(true).await;
            }
        }
        if stall_at.is_some() {
            // Wait for the stall (or for the invocation to finish without reaching it).
            let waited = std::time::Instant::now();
            while !main_faults.is_stalled() && !main.is_finished() {
                if waited.elapsed() > Duration::from_secs(120) {
                    self.report
                        .violations
                        .push("harness: a stalled invocation neither stalled nor finished in 120 s".into());
                    main_faults.release();
                    break;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            if main_faults.is_stalled() {
                self.stalled = true;
                self.count("leaders stalled past their lease");
                // Its lease lapses; another worker takes the same tick over; then it resumes.
                self.clock.advance(55_000);
                let (takeover, tf) = self.spawn_sweep(at, false, None);
                self.join(takeover, &tf, "sweep").await;
                main_faults.release();
            }
        }
        self.join(main, &main_faults, "sweep").await;
        for (t, f) in tasks {
            self.join(t, &f, "sweep").await;
        }
    }

    /// A tenant added, suspended, resumed or moved, through the supported API, while a boundary
    /// may be running.
    async fn churn(&mut self) {
        let admin = self.churn_tenants();
        let ids: Vec<String> = self.tenants.keys().cloned().collect();
        let pick = ids[self.rng.usize(..ids.len())].clone();
        match self.rng.u8(0..4) {
            0 => {
                let id = format!("late{}", self.tenants.len());
                let zone = ZONES[self.rng.usize(..ZONES.len())].to_string();
                let now = self.clock.now_ms();
                admin
                    .add(
                        &[Tenant {
                            id: id.clone(),
                            zone: zone.clone(),
                            active: true,
                            since_ms: None,
                            pos: Default::default(),
                        }],
                        now,
                    )
                    .await
                    .expect("add");
                self.tenants.insert(
                    id,
                    Life { since: now, first_zone: zone.clone(), zone, left: Vec::new(), active: true, stable: false },
                );
                self.count("tenants added mid-run");
            }
            1 if self.tenants[&pick].active => {
                admin.suspend(&pick).await.expect("suspend");
                let l = self.tenants.get_mut(&pick).expect("tenant");
                l.active = false;
                l.stable = false;
                self.count("tenants suspended");
                self.sched_sync(&pick).await;
            }
            2 if !self.tenants[&pick].active => {
                admin.resume(&pick).await.expect("resume");
                self.tenants.get_mut(&pick).expect("tenant").active = true;
                self.count("tenants resumed");
                self.sched_retarget(&pick).await;
            }
            _ => {
                // Moved only once visited (a first visit's owed history depends on its zone).
                let visited = self
                    .admin_tenants()
                    .get(&pick)
                    .await
                    .expect("tenant")
                    .is_some_and(|t| t.pos != tickwork::tenants::Position::Fresh);
                if visited {
                    let zone = ZONES[self.rng.usize(..ZONES.len())].to_string();
                    admin.move_zone(&pick, &zone).await.expect("move");
                    let now = self.clock.now_ms();
                    let l = self.tenants.get_mut(&pick).expect("tenant");
                    let old = std::mem::replace(&mut l.zone, zone);
                    l.left.push((old, now));
                    l.stable = false;
                    self.count("tenants re-zoned");
                    self.sched_retarget(&pick).await;
                }
            }
        }
    }

    fn admin_tenants(&self) -> Tenants {
        self.admin_tenants_with(None)
    }

    /// The operator's tenants API, on a client that is throttled and answered "unprocessed" (but
    /// never crashes: an operator's command that fails is simply run again).
    fn churn_tenants(&mut self) -> Tenants {
        let f = Faults::new();
        if self.cfg.classes.throttle {
            f.random(self.rng.u64(..), Rates { throttle: 200, unprocessed: 400, ..Rates::default() });
        }
        self.faults.push(f.clone());
        self.admin_tenants_with(Some(&f))
    }

    fn admin_tenants_with(&self, f: Option<&Faults>) -> Tenants {
        let db = match f {
            Some(f) => self.local.db_with(Some(f), None, &quick_retry()),
            None => self.local.fresh_db(),
        };
        Tenants::new(db.clone(), &self.tenants_table, 4)
            .with_registry(Watermarks::new(db, &self.control, Arc::new(self.clock.clone())), "pulse-sweep")
    }

    /// Change rows: new entities, and a rewrite of an existing one (a new version of it).
    async fn write_changes(&mut self) {
        let db = self.local.fresh_db();
        let now = self.clock.now_ms();
        let mut ids: Vec<String> = (0..3)
            .map(|_| {
                self.entity += 1;
                format!("e{}", self.entity)
            })
            .collect();
        if !self.latest.is_empty() && self.chance(0.7) {
            // Half the time the oldest row still in the feed (the next the archiver will take, or
            // the one it was taking when it died), else any entity.
            let oldest = self.oldest_in_feed().await;
            let pk = if let Some(pk) = oldest.filter(|_| self.chance(0.5)) {
                pk
            } else {
                let existing: Vec<String> = self.latest.keys().cloned().collect();
                existing[self.rng.usize(..existing.len())].clone()
            };
            ids.push(pk.trim_start_matches("order#").to_string());
        }
        for (i, id) in ids.iter().enumerate() {
            let ts = now + i as i64;
            let pk = tickwork::changes::record_change(
                &db,
                &self.changes,
                2,
                "order",
                id,
                &serde_json::json!({"at": ts}),
                ts,
            )
            .await
            .expect("change row");
            let tsid = format!("{}#{pk}", tickwork::changes::cutoff_key(ts));
            self.versions.push((pk.clone(), tsid.clone()));
            self.latest.insert(pk, (tsid, ts));
        }
    }

    /// The entity of the oldest row in the change feed (a Scan: the harness's view, not the code's).
    async fn oldest_in_feed(&self) -> Option<String> {
        let rows = tickwork_sim::scan_all(&self.local.db, &self.changes).await.ok()?;
        rows.iter()
            .filter_map(|i| Some((i.get("pk")?.as_s().ok()?, i.get("tsid")?.as_s().ok()?)))
            .min_by(|a, b| a.1.cmp(b.1))
            .map(|(pk, _)| pk.clone())
    }

    /// The fan-out, the archiver and the worker, each its own process, at once.
    async fn others_round(&mut self, at: Millis, faulty: bool) {
        let (ff, fc) = self.process(faulty);
        let fanout = {
            let env = Env::from_pairs([("TICKWORK_FANOUT_PAGE_SIZE", "4"), ("TICKWORK_FANOUT_SHARD_CONCURRENCY", "2")]);
            let cfg = tenant_fanout::FanoutConfig::from_env(&env, Duration::from_secs(1)).expect("fan-out settings");
            let t = tenant_fanout::Tables {
                control: self.control.clone(),
                tenants: self.tenants_table.clone(),
                queue: self.queue.clone(),
            };
            tenant_fanout::Deps::new(self.db(&ff), fc, cfg, &t, 4, queue_cfg())
        };
        let (af, ac) = self.process(faulty);
        if faulty
            && self.cfg.classes.crash_after_put
            && self.chance(if self.cfg.plant == Plant::None { 0.1 } else { 0.5 })
        {
            af.plan(Planned { op: Some("PutObject"), nth: 1, fault: Fault::CrashAfter });
        }
        let arch = {
            let age = (ARCHIVE_AGE / 1000).to_string();
            let env = Env::from_pairs([
                ("TICKWORK_ARCHIVE_BUCKET", self.bucket.as_str()),
                ("TICKWORK_ARCHIVE_AGE_SECS", age.as_str()),
                ("TICKWORK_ARCHIVE_PAGE_SIZE", "3"),
                ("TICKWORK_CHANGE_SHARDS", "2"),
                ("TICKWORK_ARCHIVE_SHARD_CONCURRENCY", "2"),
            ]);
            let cfg = archiver::ArchiverConfig::from_env(&env, Duration::from_secs(1)).expect("archiver settings");
            let mut b = aws_sdk_dynamodb::config::Builder::from(&self.local.sdk)
                .retry_config(quick_retry().sdk())
                .retry_classifier(tickwork::retry::ConflictClassifier)
                .interceptor(af.clone());
            if self.cfg.plant == Plant::UnconditionalArchiveDeletes {
                b = b.interceptor(StripDeleteCondition(self.changes.clone()));
            }
            if let Some(r) = tickwork::iam::suite_recorder() {
                b = b.interceptor(r);
            }
            let db = Db::new(
                aws_sdk_dynamodb::Client::from_conf(b.build()),
                tickwork::meter::Meter::new(tickwork::meter::CapacitySource::Estimate),
            );
            archiver::Deps::new(db, self.local.s3_with(Some(&af), None), ac, cfg, &self.control, self.changes.clone())
        };
        let (wf, wc) = self.process(faulty);
        let wdb = self.db(&wf);
        let queue = Queue::new(wdb.clone(), &self.queue, queue_cfg(), wc.clone());
        // Delivery on AWS's terms: the target throttles a round's calls (a 429 with a Retry-After,
        // which spends no attempt); the drain event is delivered twice (two drains at once) or
        // ages out of Lambda's asynchronous queue (no drain this round: the next one's finds it).
        let delivery = faulty && self.cfg.classes.throttle;
        let throttle = (delivery && self.chance(0.3)).then(|| {
            self.count("rounds whose target throttled");
            Arc::new(TargetThrottle {
                rng: std::sync::Mutex::new(fastrand::Rng::with_seed(self.rng.u64(..))),
                n: Default::default(),
            })
        });
        let twice = faulty && self.cfg.classes.duplicates && self.chance(0.2);
        let aged_out = !twice && delivery && self.chance(0.1);
        if twice {
            self.count("drain events delivered twice");
        }
        if aged_out {
            self.count("drain events aged out");
        }
        let handlers = handlers_like(wdb, &self.summaries, wc, &self.deliveries, throttle.clone());
        let (fb, ab, wb) = (self.budget(faulty), self.budget(faulty), self.budget(faulty));
        let tick = ev(at);
        let t1 = tokio::spawn({
            let tick = tick.clone();
            async move {
                tenant_fanout::run(&fanout, &tick, fb.as_ref(), &unique("f"))
                    .await
                    .map(|_| ())
                    .map_err(|e| tickwork_lambda::error_chain(&e))
            }
        });
        let t2 = tokio::spawn(async move {
            archiver::run(&arch, &tick, ab.as_ref(), &unique("a"))
                .await
                .map(|_| ())
                .map_err(|e| tickwork_lambda::error_chain(&e))
        });
        // The second delivery of the drain event is an invocation of its own: its own process
        // (faults, clock, clients), so a crash in one is not the other's.
        let twin = twice.then(|| {
            let (tf, tc) = self.process(faulty);
            let tdb = self.db(&tf);
            let q = Queue::new(tdb.clone(), &self.queue, queue_cfg(), tc.clone());
            (tf, q, handlers_like(tdb, &self.summaries, tc, &self.deliveries, throttle.clone()), self.budget(faulty))
        });
        let drain = |queue: Queue, handlers: queue_worker::registry::Registry, wb: Box<dyn Budget>| {
            tokio::spawn(async move {
                if aged_out {
                    return Ok(());
                }
                queue_worker::drain(
                    &queue,
                    &handlers,
                    &unique("w"),
                    wb.as_ref(),
                    &queue_worker::WorkerConfig::default(),
                )
                .await
                .map(|_| ())
                .map_err(|e| tickwork_lambda::error_chain(&e))
            })
        };
        let twin = twin.map(|(tf, q, h, b)| (tf, drain(q, h, b)));
        let t3 = drain(queue, handlers, wb);
        self.join(t1, &ff, "fan-out").await;
        self.join(t2, &af, "archiver").await;
        self.join(t3, &wf, "queue worker").await;
        if let Some((tf, t)) = twin {
            self.join(t, &tf, "queue worker (its event's second delivery)").await;
        }
        if let Some(t) = throttle {
            *self.report.injected.entry("target throttles (429)".into()).or_default() +=
                t.n.load(std::sync::atomic::Ordering::SeqCst);
        }
        if self.first_window.is_none() {
            self.first_window = Some(tenant_fanout::window_of(at));
        }
        self.last_archive_at = at;
    }

    fn tally_faults(&mut self) {
        for f in &self.faults {
            for (k, v) in f.injected() {
                let name = match k {
                    Fault::ServerError => "S3 error / server error",
                    other => other.name(),
                };
                *self.report.injected.entry(name.to_string()).or_default() += v;
            }
        }
    }
}

/// The shipped handlers, with every pulse's effect also recorded once in a ledger row
/// (`ledger#<grain>#<period>`, a conditional put: the effect the checks hold to exactly once),
/// and every completion counted into [`World::deliveries`] (a unit run again after a crash counts
/// twice there, never in the ledger).
fn handlers_like(
    db: tickwork::Db,
    summaries: &str,
    clock: SharedClock,
    deliveries: &queue_worker::registry::Deliveries,
    throttle: Option<Arc<TargetThrottle>>,
) -> queue_worker::registry::Registry {
    let shipped = queue_worker::summary::registry(db.clone(), summaries, clock);
    let inner = shipped.get("pulse").expect("the pulse handler").clone();
    shipped
        .with("pulse", Arc::new(Ledger { db, table: summaries.to_string(), inner, throttle }))
        .counted_into(deliveries)
}

/// A target that answers half its calls with a 429 and a one-second Retry-After, for a round.
pub(super) struct TargetThrottle {
    rng: std::sync::Mutex<fastrand::Rng>,
    /// Throttles answered.
    n: std::sync::atomic::AtomicU64,
}

/// Records a pulse's effect (once: a conditional put), then runs the shipped handler; while its
/// target throttles, answers some calls with a throttle before doing anything.
struct Ledger {
    db: tickwork::Db,
    table: String,
    inner: Arc<dyn queue_worker::registry::Handler>,
    throttle: Option<Arc<TargetThrottle>>,
}

impl queue_worker::registry::Handler for Ledger {
    fn handle<'a>(
        &'a self,
        job: &'a tickwork::queue::Job,
    ) -> futures::future::BoxFuture<'a, Result<(), queue_worker::registry::HandlerError>> {
        Box::pin(async move {
            use queue_worker::registry::HandlerError;
            if let Some(t) = &self.throttle {
                if t.rng.lock().expect("rng").bool() {
                    t.n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    return Err(HandlerError::Throttled {
                        why: "429 TooManyRequestsException (injected)".into(),
                        after_ms: Some(1_000),
                    });
                }
            }
            let v: serde_json::Value =
                serde_json::from_str(&job.payload).map_err(|e| HandlerError::Permanent(e.to_string()))?;
            let (Some(t), Some(g), Some(p)) = (v["tenant"].as_str(), v["grain"].as_str(), v["period"].as_str()) else {
                return Err(HandlerError::Permanent(format!("not a pulse: {}", job.payload)));
            };
            let req = self
                .db
                .client()
                .put_item()
                .table_name(&self.table)
                .item("pk", tickwork::schema::av_s(t))
                .item("sk", tickwork::schema::av_s(format!("ledger#{g}#{p}")))
                .condition_expression("attribute_not_exists(pk)");
            match self.db.put(req).await {
                Ok(_) | Err(tickwork::DbError::ConditionFailed { .. }) => {}
                Err(e) => return Err(HandlerError::of_db(&e)),
            }
            self.inner.handle(job).await
        })
    }
}

/// The queue settings of the whole deployment.
pub fn queue_cfg() -> QueueConfig {
    QueueConfig {
        shards: 4,
        backoff_base: Duration::from_secs(10),
        backoff_max: Duration::from_secs(60),
        ..Default::default()
    }
}

/// Runs one seed: the schedule with faults, then the stack settled without them, then the checks.
pub async fn run(cfg: Config) -> Report {
    let started = std::time::Instant::now();
    let mut w = World::new(cfg).await;
    // Tenants across the zones, added before the start.
    let admin = w.admin_tenants();
    let initial: Vec<Tenant> = (0..16)
        .map(|i| Tenant {
            id: format!("t{i:02}"),
            zone: ZONES[i % ZONES.len()].to_string(),
            active: true,
            since_ms: None,
            pos: Default::default(),
        })
        .collect();
    admin.add(&initial, START).await.expect("tenants");
    for t in &initial {
        w.tenants.insert(
            t.id.clone(),
            Life {
                since: START,
                first_zone: t.zone.clone(),
                zone: t.zone.clone(),
                left: Vec::new(),
                active: true,
                stable: true,
            },
        );
    }
    w.sched_setup().await;
    // The schedule: a round every 30 minutes; the sweep's two schedules 15 minutes apart; the
    // others every 2 hours; an outage of 30 hours somewhere in the middle.
    let rounds = i64::from(cfg.days) * 48;
    let outage = if cfg.classes.late {
        let from = w.rng.i64(8..rounds.max(10) - 8);
        w.count("30-hour outages");
        Some((from, from + 60))
    } else {
        None
    };
    // From a random round on, each first sweep invocation is armed to stall at an early call until
    // one really stalls (an idle tick makes one call and never reaches it).
    let stall_from = if cfg.classes.stall { Some(w.rng.i64(0..rounds / 2)) } else { None };
    for r in 0..rounds {
        if std::env::var("CHAOS_TRACE").is_ok() {
            eprintln!("seed {} round {r}", cfg.seed);
        }
        let at = START + r * 30 * MIN;
        if outage.is_some_and(|(a, b)| r >= a && r < b) {
            continue;
        }
        for k in 0..2 {
            let t = at + k * 15 * MIN;
            w.clock.set(t);
            let armed = k == 0 && stall_from.is_some_and(|f| r >= f) && !w.stalled;
            w.sweep_round(t, armed).await;
            w.sched_scan(t).await;
        }
        if cfg.classes.churn && w.chance(0.1) {
            w.apply_ttl().await;
        }
        if r % 4 == 0 {
            w.clock.set(at + 20 * MIN);
            w.write_changes().await;
            w.others_round(at + 20 * MIN, true).await;
        }
    }
    // Settle, faults off: every tenant active, leases lapsed, everything drained.
    let end = START + rounds * 30 * MIN;
    for (id, life) in w.tenants.clone() {
        if !life.active {
            admin.resume(&id).await.expect("resume");
            w.tenants.get_mut(&id).expect("tenant").active = true;
            w.sched_retarget(&id).await;
        }
    }
    for (i, extra) in [0, 5, 10].iter().enumerate() {
        let t = end + extra * MIN;
        w.clock.set(t);
        w.hand_over_stream(false).await;
        let (task, f) = w.spawn_sweep(t, false, None);
        w.join(task, &f, "sweep (settling)").await;
        w.sched_scan(t).await;
        if i == 0 {
            w.others_round(t + MIN, false).await;
        }
    }
    for i in 0..6 {
        w.clock.set(end + (20 + i * 10) * MIN);
        w.others_round(end + (20 + i * 10) * MIN, false).await;
    }
    w.tally_faults();
    super::checks::check(&mut w, end + 10 * MIN).await;
    eprintln!(
        "chaos seed {}: {} checks, {} violations, {:.1} s",
        cfg.seed,
        w.report.checks,
        w.report.violations.len(),
        started.elapsed().as_secs_f64()
    );
    w.report
}
