//! The sweep as a leased job: what a tick finds due (one read), its dry run, its work (alone or
//! shared by shard workers) and a helper's work.

use tickwork::budget::Budget;
use tickwork::lease::Lease;
use tickwork::watermark::WatermarkState;
use tickwork_lambda::{JobCore, LeasedJob, Tick};

use crate::deps::Deps;
use crate::due::{due_groups, Due};
use crate::report::{PulseError, Report};
use crate::{fires, shared, sweep, wake};
use tickwork_lambda::Outcome;

impl LeasedJob for Deps {
    type Plan = Due;
    type Report = Report;
    type Error = PulseError;

    fn core(&self) -> &JobCore {
        &self.core
    }

    async fn due(&self, state: &WatermarkState, tick: &Tick) -> Result<(Report, Option<Due>), PulseError> {
        let mut due = due_groups(state, tick.time_ms);
        // A schedule due before the next tick, no wake set for it: set one (an idle tick with
        // nothing due before the next stays one read).
        if !tick.dry_run && !state.paused && !tick.helper {
            if let Some(at) =
                wake::wake_at(state.sched_next, state.sched_wake, tick.time_ms, self.cfg.policy.interval_ms)
            {
                due.wake_set = self.wake(at).await;
            }
        }
        // A wake set already for before the next tick (by this tick's first plan, when it plans
        // again under its lease): the lease is let go as the tick ends, or the wake finds it held.
        due.wake_set |= wake::wake_pending(state.sched_wake, tick.time_ms, self.cfg.policy.interval_ms);
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
        let mut let_go = plan.wake_set;
        if let (Some(adds_seen), false) = (plan.schedules, report.outcome == Outcome::LostLease) {
            match Box::pin(fires::fire_due(
                self,
                (&lease.owner, lease.expires_at_ms),
                tick.time_ms,
                adds_seen,
                budget,
                &mut report,
            ))
            .await?
            {
                fires::FireEnd::Done(earliest) => {
                    if let Some(at) = wake::wake_at(earliest, None, tick.time_ms, self.cfg.policy.interval_ms) {
                        self.wake(at).await;
                    }
                    let_go = true;
                }
                fires::FireEnd::Stopped => {
                    // What is due now waits a minute, not for the next tick: a wake goes on where
                    // the budget stopped (each shard's cursor kept). At least 5 s on: a wake for
                    // the minute about to begin could arrive before this lease is let go.
                    report.outcome = Outcome::Partial;
                    let now = self.clock.now_ms().max(tick.time_ms);
                    if let Some(at) = wake::wake_at(Some(now + 5_000), None, now, self.cfg.policy.interval_ms) {
                        self.wake(at).await;
                    }
                    let_go = true;
                }
                fires::FireEnd::LeaseLost => report.outcome = Outcome::LostLease,
            }
        }
        // A tick that fired schedules (a wake is one) or set a wake lets its lease go as it ends:
        // kept, the lease would outlast the wake it set (which would find it held and fire
        // nothing), or hold the next quarter-hour tick off. What it wrote is fenced or
        // conditional, so a tick that takes the lease after it repeats nothing.
        if let_go && report.outcome != Outcome::LostLease {
            if let Err(e) = self.leases.release(lease).await {
                tracing::warn!(error = %e, "lease release after schedules failed; it lapses on its own");
            }
        }
        // Fired one-offs' members and definitions, after the lease is let go: a cleaning of
        // minutes holds back no fire, and its deletes are repeatable without a fence.
        if !report.cleaning.is_empty() && report.outcome != Outcome::LostLease {
            let groups = std::mem::take(&mut report.cleaning);
            report.schedules_cleaned += Box::pin(crate::clean::clean(self, &groups, budget)).await;
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

impl Deps {
    /// Sets the wake for `at`: claimed on the state item first (refused when a wake at or before
    /// it is pending: that one runs first, and sets the next as it ends), armed, then the claim
    /// read back: one earlier than `at`, claimed by another meanwhile (a stream batch, a tick),
    /// is armed again, so the Scheduler's one wake is the earliest claimed whoever armed last.
    /// `true` when a wake before the next tick is set or pending; `false` (logged) when there is
    /// no waker or it could not be set: the next tick fires what the wake would have.
    pub(crate) async fn wake(&self, at: tickwork::clock::Millis) -> bool {
        let Some(w) = &self.waker else { return false };
        let now = self.clock.now_ms();
        match self.schedules.claim_wake(at, now).await {
            Ok(true) => {}
            Ok(false) => return true,
            Err(e) => tracing::warn!(error = %e, "wake not claimed: armed all the same"),
        }
        if let Err(e) = w.arm(at).await {
            tracing::warn!(error = %e, "wake not set: the schedule fires at the next tick");
            if let Err(e) = self.schedules.unclaim_wake(at).await {
                tracing::warn!(error = %e, "a wake not set is still claimed: later ones wait until it passes");
            }
            return false;
        }
        tracing::info!(at, "wake set for a schedule due before the next tick");
        match self.schedules.wake_claimed().await.map(|c| wake::rearm_at(c, at, now)) {
            Ok(Some(c)) => {
                if let Err(e) = w.arm(c).await {
                    tracing::warn!(error = %e, at = c, "an earlier wake claimed meanwhile not set again: the next tick fires it");
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "the wake's claim not read back"),
        }
        true
    }
}
