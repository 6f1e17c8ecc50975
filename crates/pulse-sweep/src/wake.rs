//! Waking the sweep at a schedule's instant: when the earliest due record falls before the next
//! quarter-hour tick, the sweep sets a one-time EventBridge Scheduler schedule (`at(...)`) to
//! invoke itself then, so a fire is handed to the queue within a minute of its instant instead of
//! up to an interval late, without polling: an idle stack sets nothing and reads nothing more.
//!
//! The schedule belongs to the template (`SweepWakeSchedule`, created disabled); the sweep only
//! updates it (`scheduler:UpdateSchedule`, passing `WakeRole`, which may invoke the sweep alone).
//! Its target input is the Scheduler shape [`tickwork_lambda::Tick`] reads, so a wake is a tick
//! like any other, at the instant it was set for. The instant set last is kept in the state item
//! (`sched_wake`), so the same wake is not set twice. A wake that cannot be set is logged and the
//! quarter-hour tick fires the schedule instead: a wake makes fires prompt, never makes them
//! happen.

use std::fmt::Debug;

use futures::future::BoxFuture;
use tickwork::clock::Millis;
use tickwork::config::{ConfigError, Env};
use tickwork::env as vars;

/// The wake schedule's settings: all three, or none (no waking: schedules fire at the tick).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WakeConfig {
    /// The one-time schedule's name (in the default group).
    pub schedule: String,
    /// The sweep function's ARN: what the schedule invokes.
    pub target_arn: String,
    /// The role EventBridge Scheduler assumes to invoke it.
    pub role_arn: String,
}

impl WakeConfig {
    /// From [`vars::WAKE_SCHEDULE`], [`vars::WAKE_TARGET_ARN`], [`vars::WAKE_ROLE_ARN`]: all set,
    /// or none; one without the others is refused by name.
    pub fn from_env(env: &Env) -> Result<Option<Self>, ConfigError> {
        let get = |v: &str| env.get(v).filter(|s| !s.trim().is_empty());
        let (s, t, r) = (get(vars::WAKE_SCHEDULE), get(vars::WAKE_TARGET_ARN), get(vars::WAKE_ROLE_ARN));
        match (s, t, r) {
            (None, None, None) => Ok(None),
            (Some(schedule), Some(target_arn), Some(role_arn)) => {
                Ok(Some(WakeConfig { schedule, target_arn, role_arn }))
            }
            (s, t, _) => {
                let missing = if s.is_none() {
                    vars::WAKE_SCHEDULE
                } else if t.is_none() {
                    vars::WAKE_TARGET_ARN
                } else {
                    vars::WAKE_ROLE_ARN
                };
                Err(ConfigError::invalid(
                    missing,
                    format!(
                        "the wake needs {}, {} and {} together (the template sets all three); this one is missing",
                        vars::WAKE_SCHEDULE,
                        vars::WAKE_TARGET_ARN,
                        vars::WAKE_ROLE_ARN
                    ),
                ))
            }
        }
    }
}

/// When to wake: the earliest due record `next`, if it falls after `now` and before the next
/// regular tick, and is not the wake set already (`armed`). Pure.
pub fn wake_at(next: Option<Millis>, armed: Option<Millis>, now_ms: Millis, interval_ms: Millis) -> Option<Millis> {
    let next = next?;
    let next_tick = (now_ms.div_euclid(interval_ms.max(1)) + 1) * interval_ms.max(1);
    (next > now_ms && next < next_tick && armed != Some(next)).then_some(next)
}

/// When a stream batch of writers' records whose earliest is `pos` wakes the sweep: before the
/// next regular tick, unless a wake at or before `pos` is pending (`armed`: it runs first, and
/// sets the next as it ends); not before 5 s from now (a record already due is fired at the next
/// minute, not at the next tick); and not before the lease another invocation holds lapses
/// (`held_until`, plus the clock `skew`): a tick that had only calendar work keeps its lease, and
/// a wake that found it held would fire nothing. Pure.
pub fn stream_wake_at(
    pos: Millis,
    armed: Option<Millis>,
    held_until: Option<Millis>,
    now_ms: Millis,
    interval_ms: Millis,
    skew_ms: Millis,
) -> Option<Millis> {
    let next_tick = (now_ms.div_euclid(interval_ms.max(1)) + 1) * interval_ms.max(1);
    if armed.is_some_and(|a| a > now_ms && a <= pos) {
        return None;
    }
    let mut at = pos.max(now_ms + 5_000);
    if let Some(h) = held_until.filter(|h| *h > now_ms) {
        at = at.max(h + skew_ms);
    }
    (pos < next_tick && at < next_tick).then_some(at)
}

/// After arming `at`: the wake to arm again when the claim read back (`claimed`) is another's,
/// earlier and still ahead (it claimed after this one, and may have armed before it: the one
/// Scheduler schedule holds whichever armed last). Pure.
pub fn rearm_at(claimed: Option<Millis>, at: Millis, now_ms: Millis) -> Option<Millis> {
    claimed.filter(|c| *c < at && *c > now_ms)
}

/// Whether the wake set already (`armed`) falls after `now` and before the next regular tick: the
/// tick lets its lease go as it ends, or that wake finds it held (a tick that plans again under
/// its lease sees the wake its first plan armed, and does not arm it again). Pure.
pub fn wake_pending(armed: Option<Millis>, now_ms: Millis, interval_ms: Millis) -> bool {
    let next_tick = (now_ms.div_euclid(interval_ms.max(1)) + 1) * interval_ms.max(1);
    armed.is_some_and(|a| a > now_ms && a < next_tick)
}

/// The schedule expression for a wake at `at_ms`: the whole minute at or after it, in UTC.
/// Scheduler invokes "with 60 second precision" (a schedule for 1:00 runs between 1:00:00 and
/// 1:00:59; EventBridge Scheduler User Guide, "Schedule types"): a wake for a second within a
/// minute could run before it.
pub fn at_expression(at_ms: Millis) -> String {
    let mins = at_ms.div_euclid(60_000) + i64::from(at_ms.rem_euclid(60_000) > 0);
    let t = jiff::Timestamp::from_second(mins * 60).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    format!("at({})", t.strftime("%Y-%m-%dT%H:%M:%S"))
}

/// The target input: the Scheduler shape a [`tickwork_lambda::Tick`] reads.
pub const WAKE_INPUT: &str =
    r#"{"scheduled-time":"<aws.scheduler.scheduled-time>","execution-id":"<aws.scheduler.execution-id>"}"#;

/// Sets the wake.
pub trait Waker: Send + Sync + Debug {
    /// Sets the one wake to `at_ms` (replacing any set before).
    fn arm(&self, at_ms: Millis) -> BoxFuture<'_, Result<(), String>>;
}

/// The EventBridge Scheduler waker.
#[derive(Debug, Clone)]
pub struct SchedulerWaker {
    client: aws_sdk_scheduler::Client,
    cfg: WakeConfig,
}

impl SchedulerWaker {
    /// A waker on `client` with `cfg`.
    pub fn new(client: aws_sdk_scheduler::Client, cfg: WakeConfig) -> Self {
        Self { client, cfg }
    }
}

impl Waker for SchedulerWaker {
    fn arm(&self, at_ms: Millis) -> BoxFuture<'_, Result<(), String>> {
        use aws_sdk_scheduler::types::{
            FlexibleTimeWindow, FlexibleTimeWindowMode, RetryPolicy, ScheduleState, Target,
        };
        Box::pin(async move {
            let target = Target::builder()
                .arn(&self.cfg.target_arn)
                .role_arn(&self.cfg.role_arn)
                .input(WAKE_INPUT)
                // As the template declares it (an update replaces the whole target).
                .retry_policy(
                    RetryPolicy::builder().maximum_event_age_in_seconds(300).maximum_retry_attempts(2).build(),
                )
                .build()
                .map_err(|e| e.to_string())?;
            let window =
                FlexibleTimeWindow::builder().mode(FlexibleTimeWindowMode::Off).build().map_err(|e| e.to_string())?;
            self.client
                .update_schedule()
                .name(&self.cfg.schedule)
                .schedule_expression(at_expression(at_ms))
                .schedule_expression_timezone("UTC")
                .flexible_time_window(window)
                .target(target)
                .state(ScheduleState::Enabled)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| {
                    format!(
                        "UpdateSchedule `{}`: {}",
                        self.cfg.schedule,
                        aws_sdk_scheduler::error::DisplayErrorContext(e)
                    )
                })
        })
    }
}

/// Scheduler requests → the IAM accesses they need: `scheduler:UpdateSchedule` on the schedule,
/// and `iam:PassRole` on the role it names ("To create or update a schedule, you need permission
/// to pass the execution role", EventBridge Scheduler User Guide, "Using identity-based policies").
pub fn scheduler_accesses(
    input: &aws_smithy_runtime_api::client::interceptors::context::Input,
) -> Option<Vec<tickwork::iam::Access>> {
    use tickwork::iam::{Access, Resource};
    let i = input.downcast_ref::<aws_sdk_scheduler::operation::update_schedule::UpdateScheduleInput>()?;
    let mut out = vec![Access {
        action: "scheduler:UpdateSchedule".into(),
        resource: Resource::Schedule { name: i.name().unwrap_or_default().to_string() },
        leading_key: None,
    }];
    if let Some(role) = i.target().map(|t| t.role_arn()) {
        out.push(Access {
            action: "iam:PassRole".into(),
            resource: Resource::Role { arn: role.to_string() },
            leading_key: None,
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_armed_before_the_next_tick_is_pending() {
        let q = 900_000;
        assert!(wake_pending(Some(300_000), 0, q), "07:05 at the 07:00 tick");
        assert!(!wake_pending(Some(900_000), 0, q), "at the next tick: the tick fires it");
        assert!(!wake_pending(Some(0), 0, q), "now: not after");
        assert!(!wake_pending(None, 0, q));
    }

    const Q: Millis = 900_000;

    #[test]
    fn a_wake_is_set_only_before_the_next_tick_and_only_once() {
        let now = 1_800_000_000_000 - 1_800_000_000_000 % Q + 60_000; // a minute past a tick
        assert_eq!(wake_at(Some(now + 300_000), None, now, Q), Some(now + 300_000));
        assert_eq!(wake_at(Some(now + 300_000), Some(now + 300_000), now, Q), None, "set already");
        assert_eq!(wake_at(Some(now + 840_000), None, now, Q), None, "the next tick is as early");
        assert_eq!(wake_at(Some(now - 1), None, now, Q), None, "due now: this tick fires it");
        assert_eq!(wake_at(None, None, now, Q), None);
    }

    #[test]
    fn a_batch_wakes_the_sweep_at_its_record_unless_an_earlier_wake_or_a_held_lease_comes_first() {
        let now = 1_800_000_000_000 - 1_800_000_000_000 % Q + 60_000; // a minute past a tick
        let at = |pos, armed, held| stream_wake_at(pos, armed, held, now, Q, 1_000);
        assert_eq!(at(now + 300_000, None, None), Some(now + 300_000));
        // Whatever `sched_next` says (a fire between its read and its set leaves it in the past).
        assert_eq!(at(now + 300_000, Some(now - 60_000), None), Some(now + 300_000), "an old wake passed");
        assert_eq!(at(now + 300_000, Some(now + 120_000), None), None, "an earlier wake runs first");
        assert_eq!(at(now + 300_000, Some(now + 300_000), None), None, "set already");
        assert_eq!(at(now + 300_000, Some(now + 600_000), None), Some(now + 300_000), "a later one is replaced");
        assert_eq!(at(now - 30_000, None, None), Some(now + 5_000), "due already: in a moment, not at the tick");
        assert_eq!(at(now + 300_000, None, Some(now + 400_000)), Some(now + 401_000), "after the lease held lapses");
        assert_eq!(at(now + 300_000, None, Some(now - 1)), Some(now + 300_000), "a lease let go");
        assert_eq!(at(now + 300_000, None, Some(now + 900_000)), None, "held past the next tick: the tick fires it");
        assert_eq!(at(now + 840_000, None, None), None, "the next tick is as early");
    }

    #[test]
    fn the_earlier_claim_of_another_is_armed_again_and_no_other() {
        assert_eq!(rearm_at(Some(500), 800, 100), Some(500), "an earlier claim, ahead");
        assert_eq!(rearm_at(Some(800), 800, 100), None, "its own");
        assert_eq!(rearm_at(Some(900), 800, 100), None, "a later one cannot have won the claim");
        assert_eq!(rearm_at(Some(50), 800, 100), None, "passed already");
        assert_eq!(rearm_at(None, 800, 100), None, "given back");
    }

    #[test]
    fn the_expression_rounds_up_to_the_minute_in_utc() {
        let t = "2026-12-02T07:00:00Z".parse::<jiff::Timestamp>().unwrap().as_millisecond();
        assert_eq!(at_expression(t), "at(2026-12-02T07:00:00)");
        assert_eq!(at_expression(t + 1), "at(2026-12-02T07:01:00)");
    }

    #[test]
    fn the_three_settings_go_together() {
        let env = |pairs: &[(&str, &str)]| Env::from_pairs(pairs.iter().copied());
        assert_eq!(WakeConfig::from_env(&env(&[])).unwrap(), None);
        let all =
            [(vars::WAKE_SCHEDULE, "s-sweep-wake"), (vars::WAKE_TARGET_ARN, "arn:t"), (vars::WAKE_ROLE_ARN, "arn:r")];
        assert!(WakeConfig::from_env(&env(&all)).unwrap().is_some());
        let e = WakeConfig::from_env(&env(&all[..2])).unwrap_err();
        assert_eq!(e.var, vars::WAKE_ROLE_ARN);
    }
}
