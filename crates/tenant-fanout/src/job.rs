//! The fan-out as a leased job: what a tick finds due (one read), its dry run and its work.

use tickwork::budget::Budget;
use tickwork::lease::Lease;
use tickwork::watermark::WatermarkState;
use tickwork_lambda::{JobCore, LeasedJob, Tick};

use crate::deps::Deps;
use crate::fanout;
use crate::report::{FanoutError, Outcome, Report};
use crate::window::{self, window_of, MARK_GROUP};

/// What a tick found due.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Windows, oldest first.
    pub windows: Vec<String>,
    /// The job has no watermark yet: set it to the day before its first window before working,
    /// so that window, if unfinished today, is caught up tomorrow.
    pub init_mark: Option<String>,
}

impl LeasedJob for Deps {
    type Plan = Plan;
    type Report = Report;
    type Error = FanoutError;

    fn core(&self) -> &JobCore {
        &self.core
    }

    async fn due(&self, state: &WatermarkState, tick: &Tick) -> Result<(Report, Option<Plan>), FanoutError> {
        let mark = state.marks.get(MARK_GROUP).map(String::as_str);
        let windows = window::due_windows(mark, tick.time_ms, self.cfg.max_lateness_days);
        let report = Report {
            window: windows.first().cloned().unwrap_or_else(|| window_of(tick.time_ms)),
            outcome: Outcome::AlreadyDone,
            windows_due: windows.len() as u32,
            ..Default::default()
        };
        let init_mark = window::first_mark(mark, windows.first().map(String::as_str));
        Ok((report, (!windows.is_empty()).then_some(Plan { windows, init_mark })))
    }

    async fn dry_run(&self, _: &Tick, plan: Plan, budget: &dyn Budget, report: Report) -> Result<Report, FanoutError> {
        fanout::fan_out(self, fanout::Mode::Dry, &plan.windows[..1], budget, report).await
    }

    async fn work(
        &self,
        _: &Tick,
        lease: &Lease,
        plan: Plan,
        budget: &dyn Budget,
        mut report: Report,
    ) -> Result<Report, FanoutError> {
        let fence = lease.fence(self.leases.table());
        if let Some(before) = &plan.init_mark {
            if let tickwork::watermark::Advance::Stale = self.marks.advance(&fence, MARK_GROUP, before).await? {
                report.outcome = Outcome::LostLease;
                return Ok(report);
            }
        }
        fanout::fan_out(self, fanout::Mode::Live(&fence), &plan.windows, budget, report).await
    }
}
