//! The archiver as a leased job: what a tick finds due (one read while nothing can be due, else a
//! probe of every shard), its dry run and its work.

use tickwork::budget::Budget;
use tickwork::changes::cutoff_key;
use tickwork::clock::Millis;
use tickwork::lease::Lease;
use tickwork::pager::{for_each_page, Page, PageError};
use tickwork::watermark::WatermarkState;
use tickwork::DbError;
use tickwork_lambda::{JobCore, LeasedJob, Tick};

use crate::config;
use crate::deps::Deps;
use crate::report::{ArchiveError, Outcome, Report};
use crate::sweep;

/// State-item mark: the oldest not-yet-due row's timestamp at the last probe (13-digit ms).
pub const OLDEST: &str = "oldest";
/// State-item mark: when the last probe ran (13-digit ms).
pub const PROBED: &str = "probed";

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
        let probes = crate::probe::probe(self, cutoff).await?;
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
        let (oldest, probed) = (mark_ms(state, OLDEST), mark_ms(state, PROBED));
        let every = self.cfg.probe_every.as_millis() as i64;
        if crate::probe::nothing_due(cutoff_ms, oldest, probed, self.clock.now_ms(), every) {
            return Ok((report, None));
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
                crate::probe::due_query(self, k, &plan.cutoff),
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
