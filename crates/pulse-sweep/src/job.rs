//! The sweep as a leased job: what a tick finds due (one read), its dry run, its work (alone or
//! shared by shard workers) and a helper's work.

use tickwork::budget::Budget;
use tickwork::lease::Lease;
use tickwork::watermark::WatermarkState;
use tickwork_lambda::{JobCore, LeasedJob, Tick};

use crate::deps::Deps;
use crate::due::{due_groups, Due};
use crate::report::{PulseError, Report};
use crate::{fires, shared, sweep};
use tickwork_lambda::Outcome;

impl LeasedJob for Deps {
    type Plan = Due;
    type Report = Report;
    type Error = PulseError;

    fn core(&self) -> &JobCore {
        &self.core
    }

    async fn due(&self, state: &WatermarkState, tick: &Tick) -> Result<(Report, Option<Due>), PulseError> {
        let due = due_groups(state, tick.time_ms);
        let report =
            Report { groups_due: due.groups.len() as u32, unknown_zones: due.unknown.clone(), ..Default::default() };
        Ok((report, (!due.is_empty()).then_some(due)))
    }

    async fn dry_run(&self, tick: &Tick, plan: Due, budget: &dyn Budget, report: Report) -> Result<Report, PulseError> {
        let r = sweep::sweep(self, tick, sweep::Mode::Dry, &plan, budget, report).await?;
        let (reads, _) = self.db.meter().read_write_requests();
        tracing::info!(tenants = r.tenants, pulses = ?r.pulses, skipped = ?r.skipped, reads_made = reads, "dry run: nothing written");
        Ok(r)
    }

    async fn work(
        &self,
        tick: &Tick,
        lease: &Lease,
        plan: Due,
        budget: &dyn Budget,
        report: Report,
    ) -> Result<Report, PulseError> {
        let fence = lease.fence(&self.tables.control);
        let mut report = if self.cfg.shard_workers > 1 {
            // The boundary is shared: this leader starts the runs and its helpers, then pages
            // shards beside them, each under its own lease.
            shared::lead_shared(self, tick, &fence, &plan, budget, report).await?
        } else {
            sweep::sweep(self, tick, sweep::Mode::Live(&fence), &plan, budget, report).await?
        };
        // Schedules after the groups, under the same lease (a lost lease: the next leader fires).
        if let (Some(adds_seen), false) = (plan.schedules, report.outcome == Outcome::LostLease) {
            match fires::fire_due(self, &fence, tick.time_ms, adds_seen, budget, &mut report).await? {
                fires::FireEnd::Done => {}
                fires::FireEnd::Stopped => report.outcome = Outcome::Partial,
                fires::FireEnd::LeaseLost => report.outcome = Outcome::LostLease,
            }
        }
        Ok(report)
    }

    async fn help(
        &self,
        tick: &Tick,
        plan: Due,
        budget: &dyn Budget,
        report: Report,
        owner: &str,
    ) -> Result<Report, PulseError> {
        shared::help(self, tick, &plan, owner, budget, report).await
    }
}
