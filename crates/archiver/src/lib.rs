//! Archiver: move change-feed rows older than a cutoff to S3 — billed only for what is due,
//! nothing lost, nothing doubled, nothing newer than what was archived ever deleted.
//!
//! ## The change feed
//! One row per entity (`pk = <entity>#<id>`): a rewrite replaces the row, with a new sort key
//! `tsid = <13-digit ms>#<pk>` in the `by_shard` index (`shard = changes#<k>`). The feed keeps the
//! **last write per entity**; the archiver archives each version that was due when it was read and
//! deletes a row only while it is still that version.
//!
//! ## One tick (the skeleton of [`tickwork_lambda::job`], with this job's steps)
//! 1. Parse and guard the event; the cutoff is its `time` minus the configured age.
//! 2. Read the state item (1 GetItem): pause switch, and `oldest` — the oldest row not yet due at
//!    the last probe — with the probe's time. While the cutoff has not passed `oldest` and the
//!    probe is younger than [`ArchiverConfig::probe_every`], nothing can be due: return. That is
//!    the whole cost of an idle tick: **1 read**.
//! 3. Otherwise probe every shard ([`sweep::probe`]: one `Limit 1` key-condition Query each).
//!    Nothing due: record the new `oldest` and return.
//! 4. Take the lease; archive each due shard batch by batch ([`sweep`]), crash-safe by an intent
//!    recorded before each object ([`intent`]).
//! 5. Drained: probe again and record `oldest`.
//!
//! ## Layout
//! [`config`] settings; [`object`] keys, bytes, S3; [`intent`] the crash-safety record;
//! [`sweep`] probe and batches; [`restore`] the operator's way back; this file the job's glue.

pub mod config;
pub mod intent;
pub mod object;
pub mod restore;
pub mod sweep;

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tickwork::budget::Budget;
use tickwork::changes::cutoff_key;
use tickwork::checkpoint::{CheckpointError, Checkpoints};
use tickwork::clock::{Millis, SharedClock};
use tickwork::config::{ConfigError, Env};
use tickwork::env as vars;
use tickwork::lease::{Lease, LeaseStore};
use tickwork::pager::{for_each_page, Page, PageError};
use tickwork::watermark::{WatermarkState, Watermarks};
use tickwork::{Db, DbError};
use tickwork_lambda::{BadEvent, Base, JobCore, JobReport, LeasedJob, Tick};

pub use config::ArchiverConfig;
pub use object::{decode_batch, encode_batch, object_key, s3_client};
pub use restore::restore;
pub use tickwork_lambda::Outcome;

/// State-item mark: the oldest not-yet-due row's timestamp at the last probe (13-digit ms).
pub const OLDEST: &str = "oldest";
/// State-item mark: when the last probe ran (13-digit ms).
pub const PROBED: &str = "probed";

/// Everything the handler needs.
#[derive(Debug, Clone)]
pub struct Deps {
    /// What every leased job has.
    pub core: JobCore,
    /// Metered DynamoDB client.
    pub db: Db,
    /// S3 client.
    pub s3: aws_sdk_s3::Client,
    /// Settings.
    pub cfg: ArchiverConfig,
    /// Change-feed table.
    pub table: String,
    /// Leases.
    pub leases: LeaseStore,
    /// State item: pause switch, `oldest`, `probed`.
    pub marks: Watermarks,
    /// Per-shard positions.
    pub checkpoints: Checkpoints,
    /// Wall clock.
    pub clock: SharedClock,
}

impl Deps {
    /// Builds from the environment.
    pub async fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let base = Base::from_env(env, "archiver").await?;
        let cfg = ArchiverConfig::from_core(env, &base.core)?;
        let table = base.core.table_from(env, vars::CHANGES_TABLE, "changes");
        let s3 = s3_client(&base.sdk);
        let mut d = Self::new(base.db, s3, base.clock, cfg, &base.core.control_table, table);
        d.core.namespace = base.core.metrics_namespace.clone();
        Ok(d.resolve_shards().await)
    }

    /// Start-up: records this process's change-feed shard count and archives every shard ever
    /// written to ([`tickwork::shard::ShardRegistry`]): rows written with a larger count before a
    /// setting was lowered are still found.
    pub async fn resolve_shards(mut self) -> Self {
        let reg = tickwork::shard::ShardRegistry::new(self.db.clone(), self.leases.table());
        self.cfg.shards = reg.resolve("changes", self.cfg.shards).await;
        self
    }

    /// Builds from parts.
    pub fn new(
        db: Db,
        s3: aws_sdk_s3::Client,
        clock: SharedClock,
        cfg: ArchiverConfig,
        control: &str,
        table: String,
    ) -> Self {
        let marks = Watermarks::new(db.clone(), control, clock.clone());
        let leases = LeaseStore::new(db.clone(), control, clock.clone());
        Self {
            core: JobCore {
                function: "archiver",
                db: db.clone(),
                clock: clock.clone(),
                leases: leases.clone(),
                marks: marks.clone(),
                lease: cfg.lease.clone(),
                margin: cfg.margin,
                dry_run: cfg.dry_run,
                namespace: "tickwork".into(),
            },
            checkpoints: Checkpoints::new(db.clone(), control, clock.clone(), Duration::from_secs(30 * 86_400)),
            leases,
            marks,
            db,
            s3,
            cfg,
            table,
            clock,
        }
    }
}

/// What a sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// How it ended.
    pub outcome: Outcome,
    /// The cutoff (ms).
    pub cutoff_ms: Millis,
    /// Shards probed this tick (0 when the state item said nothing could be due).
    pub probed: u32,
    /// Rows archived and deleted.
    pub archived: u64,
    /// Objects written.
    pub objects: u64,
    /// Rows archived but not deleted: rewritten since they were read (their new version is
    /// archived when due).
    pub kept: u64,
    /// Batches an earlier, interrupted sweep left, finished by this one.
    pub recovered: u64,
    /// Shards with rows left (resumed next sweep).
    pub shards_left: u32,
    /// Dry run: due rows per shard.
    pub due_by_shard: Vec<u64>,
}

impl JobReport for Report {
    fn outcome(&self) -> Outcome {
        self.outcome
    }
    fn set_outcome(&mut self, o: Outcome) {
        self.outcome = o;
    }
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        // ShardsLeft staying above 0 sweep after sweep is the backlog alarm.
        vec![("ShardsLeft", f64::from(self.shards_left))]
    }
}

/// Why a sweep failed; rows are deleted only after their object is stored, so nothing is lost.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The event.
    #[error(transparent)]
    BadEvent(#[from] BadEvent),
    /// DynamoDB.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The checkpoint.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A cursor.
    #[error(transparent)]
    Cursor(#[from] tickwork::pager::CursorError),
    /// An intent record that cannot be read: nothing of that shard is touched.
    #[error("archive intent of shard {shard} is unreadable ({problem}); nothing was deleted. Inspect it with `tickctl status`")]
    Intent {
        /// Shard.
        shard: u32,
        /// What is wrong.
        problem: String,
    },
    /// S3.
    #[error("S3 call on `s3://{bucket}/{key}` failed ({reason}); its rows were not deleted")]
    S3 {
        /// Bucket.
        bucket: String,
        /// Key.
        key: String,
        /// Why.
        reason: String,
    },
}

impl From<ArchiveError> for lambda_runtime::Diagnostic {
    fn from(e: ArchiveError) -> Self {
        let error_type = match &e {
            ArchiveError::BadEvent(_) => "BadEvent",
            ArchiveError::Db(_) => "DynamoDb",
            ArchiveError::Checkpoint(_) | ArchiveError::Intent { .. } => "Checkpoint",
            ArchiveError::Cursor(_) => "Cursor",
            ArchiveError::S3 { .. } => "S3",
        };
        tickwork_lambda::diagnostic(error_type, &e)
    }
}

/// What a tick found due.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The cutoff sort key.
    pub cutoff: String,
    /// Shards holding due rows.
    pub shards: Vec<u32>,
}

fn mark_ms(state: &WatermarkState, name: &str) -> Option<Millis> {
    state.marks.get(name).and_then(|v| v.parse().ok())
}

impl Deps {
    /// Probes every shard; when none is due (and `write`), records the oldest not-yet-due row.
    /// Returns the due shards. While any shard is due the mark is left as it is: it stays at or
    /// below the cutoff, so the next tick probes again until the backlog is gone.
    async fn probe_and_record(&self, cutoff: &str, write: bool) -> Result<Vec<u32>, ArchiveError> {
        let probes = sweep::probe(self, cutoff).await?;
        let due: Vec<u32> = probes.iter().filter(|p| p.due).map(|p| p.k).collect();
        if write && due.is_empty() {
            let now = self.clock.now_ms();
            // A row written after this probe is newer than it, give or take the clock-skew bound.
            let floor = now - self.cfg.lease.clock_skew.as_millis() as i64;
            let oldest = probes.iter().filter_map(|p| p.oldest_ms).min().unwrap_or(floor).min(floor);
            self.marks
                .set_marks(config::JOB, &[(OLDEST, &format!("{oldest:013}")), (PROBED, &format!("{now:013}"))])
                .await?;
        }
        Ok(due)
    }
}

impl LeasedJob for Deps {
    type Plan = Plan;
    type Report = Report;
    type Error = ArchiveError;

    fn core(&self) -> &JobCore {
        &self.core
    }

    async fn due(&self, state: &WatermarkState, tick: &Tick) -> Result<(Report, Option<Plan>), ArchiveError> {
        let cutoff_ms = tick.time_ms - self.cfg.age.as_millis() as i64;
        let mut report = Report { cutoff_ms, ..Default::default() };
        if let (Some(oldest), Some(probed)) = (mark_ms(state, OLDEST), mark_ms(state, PROBED)) {
            let fresh = self.clock.now_ms() - probed < self.cfg.probe_every.as_millis() as i64;
            if cutoff_ms <= oldest && fresh {
                return Ok((report, None));
            }
        }
        let cutoff = cutoff_key(cutoff_ms);
        let shards = self.probe_and_record(&cutoff, !tick.dry_run).await?;
        report.probed = self.cfg.shards;
        Ok((report, (!shards.is_empty()).then_some(Plan { cutoff, shards })))
    }

    async fn dry_run(
        &self,
        _: &Tick,
        plan: Plan,
        budget: &dyn Budget,
        mut report: Report,
    ) -> Result<Report, ArchiveError> {
        report.due_by_shard = vec![0; self.cfg.shards as usize];
        for k in plan.shards {
            let mut n = 0u64;
            let run = for_each_page(
                &self.db,
                sweep::due_query(self, k, &plan.cutoff),
                None,
                self.cfg.page_size,
                budget,
                "archive dry run",
                |p: Page| {
                    n += p.items.len() as u64;
                    std::future::ready(Ok::<(), DbError>(()))
                },
            )
            .await;
            match run {
                Ok(_) => {}
                Err(PageError::Db(e)) | Err(PageError::Handler(e)) => return Err(e.into()),
                Err(PageError::Cursor(c)) => return Err(c.into()),
            }
            report.due_by_shard[k as usize] = n;
            tracing::info!(
                shard = k,
                due = n,
                objects = n.div_ceil(self.cfg.page_size as u64),
                "dry run: would archive"
            );
        }
        Ok(report)
    }

    async fn work(
        &self,
        _: &Tick,
        lease: &Lease,
        plan: Plan,
        budget: &dyn Budget,
        mut report: Report,
    ) -> Result<Report, ArchiveError> {
        let fence = lease.fence(self.leases.table());
        let results = sweep::archive(self, &fence, &plan.shards, &plan.cutoff, budget).await?;
        let mut lost = false;
        for r in results {
            report.archived += r.rows;
            report.objects += r.objects;
            report.kept += r.kept;
            report.recovered += r.recovered;
            report.shards_left += u32::from(!r.drained);
            lost |= r.lost;
        }
        report.outcome = if lost {
            Outcome::LostLease
        } else if report.shards_left > 0 {
            Outcome::Partial
        } else {
            // Everything due is archived: what is the oldest row left?
            self.probe_and_record(&plan.cutoff, true).await?;
            Outcome::Completed
        };
        Ok(report)
    }
}

/// The Lambda entry ([`tickwork_lambda::job::handle`]).
pub async fn handle(deps: &Deps, event: Value, deadline_ms: Millis) -> Result<Report, ArchiveError> {
    tickwork_lambda::job::handle(deps, event, deadline_ms).await
}

/// One sweep for `tick`, within `budget` ([`tickwork_lambda::job::run`]).
pub async fn run(deps: &Deps, tick: &Tick, budget: &dyn Budget, owner: &str) -> Result<Report, ArchiveError> {
    tickwork_lambda::job::run(deps, tick, budget, owner).await
}
