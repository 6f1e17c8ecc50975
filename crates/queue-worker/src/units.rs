//! One claimed item as the drain holds it: its units, how each ended, and the one settle that
//! follows them.
//!
//! A single job is an item of one unit (its own id the key). A batch ([`tickwork::batch`]) is run
//! unit by unit, each as a job of its own whose id is its unit key (what the handler is idempotent
//! on), and settled once: finished when every unit is; otherwise the units left (failed with a
//! retry left, or not started) go back, regrouped and split to the batch size, and the ones that
//! can never succeed become dead letters of their own — one bad tenant never holds back the
//! others ([`plan_batch`], pure).

use std::collections::{BTreeMap, BTreeSet};
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use tickwork::batch::{Batch, Unit};
use tickwork::queue::{BatchSettle, Job, Queue, QueueError, Settle};

use crate::config::WorkerConfig;
use crate::registry::{HandlerError, Registry};

/// A claimed item the drain holds until it settles (cloned to try a failed settle again).
#[derive(Debug, Clone)]
pub(crate) struct Held {
    pub(crate) job: Job,
    /// The batch it carries (`None`: a single job, run as one unit keyed by its id).
    pub(crate) batch: Option<Batch>,
    pub(crate) units: Vec<Unit>,
    /// The next unit to start.
    pub(crate) next: usize,
    /// Units started and not ended.
    pub(crate) running: usize,
    pub(crate) ends: Vec<(String, UnitEnd)>,
    /// Run with nothing beside it ([`Job::died`] or [`Job::suspect`]): a death while it runs is
    /// its own.
    pub(crate) alone: bool,
}

impl Held {
    /// An item as claimed, unless its batch payload cannot be read (`Err`: why).
    pub(crate) fn new(job: Job, batch: Option<Batch>) -> Self {
        let units = match &batch {
            Some(b) => b.units(&job.kind),
            None => vec![Unit {
                key: job.id.clone(),
                tenant: job.tenant.clone().unwrap_or_default(),
                payload: job.payload.clone(),
            }],
        };
        let alone = job.died || job.suspect;
        Self { job, batch, units, next: 0, running: 0, ends: Vec::new(), alone }
    }

    /// Units not yet started.
    pub(crate) fn unstarted(&self) -> usize {
        self.units.len() - self.next
    }

    /// The job a handler runs for unit `i`: the item itself for a single job.
    pub(crate) fn unit_job(&self, i: usize) -> Job {
        match &self.batch {
            None => self.job.clone(),
            Some(_) => {
                let u = &self.units[i];
                Job {
                    id: u.key.clone(),
                    payload: u.payload.clone(),
                    tenant: Some(u.tenant.clone()),
                    ..self.job.clone()
                }
            }
        }
    }
}

/// What happened to one unit.
#[derive(Debug, Clone)]
pub(crate) enum UnitEnd {
    Done,
    NotStarted,
    Failed(HandlerError),
}

/// Units run, failed and dead-lettered in one settle.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UnitCounts {
    pub(crate) run: u64,
    pub(crate) failed: u64,
    /// Units dead-lettered (the `FailedUnits` metric).
    pub(crate) dead: u64,
}

/// A held item's settle and what it counted.
#[derive(Debug)]
pub(crate) struct Settled {
    pub(crate) settle: Settle,
    pub(crate) counts: UnitCounts,
    /// Units sent back unstarted with the attempt refunded (only the deadline stopped them).
    pub(crate) refunded: bool,
    /// Units sent back because their target throttled (the attempt refunded; visible again at
    /// the settle's instant, which the drain waits for as for a retry).
    pub(crate) throttled: bool,
}

/// One handler call for one or more units of a kind, time-boxed and with panics caught: one
/// result per job, in order (a call that panicked or ran too long fails every unit it carried,
/// to be retried).
pub(crate) async fn call(handlers: &Registry, jobs: &[Job], cfg: &WorkerConfig) -> Vec<Result<(), HandlerError>> {
    let Some(first) = jobs.first() else { return Vec::new() };
    let all = |e: HandlerError| vec![Err(e); jobs.len()];
    let Some(h) = handlers.get(&first.kind) else {
        return all(HandlerError::Permanent(format!("no handler for kind `{}`", first.kind)));
    };
    let run = async {
        match jobs {
            [one] => vec![h.handle(one).await],
            many => h.handle_batch(many).await,
        }
    };
    match tokio::time::timeout(cfg.handler_timeout, AssertUnwindSafe(run).catch_unwind()).await {
        Ok(Ok(r)) if r.len() == jobs.len() => r,
        Ok(Ok(r)) => {
            all(HandlerError::Retry(format!("the handler answered {} results for {} units", r.len(), jobs.len())))
        }
        Ok(Err(panic)) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            all(HandlerError::Retry(format!("handler panicked: {what}")))
        }
        Err(_) => all(HandlerError::Retry(format!("handler ran longer than {} s", cfg.handler_timeout.as_secs_f64()))),
    }
}

/// Units of a held item one handler call takes ([`crate::registry::Handler::batch_limit`]): one
/// for an item run alone, and on an item's `last` attempt for a handler whose calls fail as a
/// whole ([`crate::registry::Handler::whole_call_failures`]: a poison unit would take its
/// call-mates to the dead letters with it). Pure.
pub(crate) fn units_per_call(handlers: &Registry, kind: &str, last: bool, alone: bool) -> usize {
    match handlers.get(kind) {
        None => 1,
        Some(_) if alone => 1,
        Some(h) if last && h.whole_call_failures() => 1,
        Some(h) => h.batch_limit().max(1),
    }
}

/// Settles a held item once, from how its units ended (a unit never started ended
/// [`UnitEnd::NotStarted`]).
pub(crate) async fn settle_held(queue: &Queue, mut h: Held) -> Result<Settled, QueueError> {
    // A throttle past the item's free ones is a failure ([`crate::throttle::counted`]).
    for (_, end) in h.ends.iter_mut() {
        if let UnitEnd::Failed(e) = end {
            *e = crate::throttle::counted(std::mem::replace(e, HandlerError::Retry(String::new())), h.job.throttles);
        }
    }
    let seen: BTreeSet<String> = h.ends.iter().map(|(k, _)| k.clone()).collect();
    for u in &h.units {
        if !seen.contains(&u.key) {
            h.ends.push((u.key.clone(), UnitEnd::NotStarted));
        }
    }
    let job = &h.job;
    let Some(b) = &h.batch else {
        let (_, end) = h.ends.pop().expect("a single job has one unit");
        let counts = |run, failed, dead| UnitCounts { run, failed, dead };
        let settled = |settle, counts, refunded| Settled { settle, counts, refunded, throttled: false };
        return Ok(match end {
            UnitEnd::Done => settled(queue.finish(job).await?, counts(1, 0, 0), false),
            UnitEnd::Failed(HandlerError::Retry(msg)) => {
                tracing::warn!(id = %job.id, kind = %job.kind, attempts = job.attempts, error = %msg, "job failed; will retry");
                let settle = queue.fail(job, &msg).await?;
                let dead = u64::from(settle == Settle::DeadLettered);
                settled(settle, counts(1, 1, dead), false)
            }
            UnitEnd::Failed(HandlerError::Permanent(msg)) => {
                tracing::error!(id = %job.id, kind = %job.kind, error = %msg, "job cannot succeed; dead-lettering");
                settled(queue.dead_letter(job, &msg).await?, counts(1, 1, 1), false)
            }
            UnitEnd::Failed(HandlerError::Throttled { why, after_ms }) => {
                let at = queue.clock().now_ms() + crate::throttle::delay_ms(job.throttles, after_ms, &job.id) as i64;
                tracing::warn!(id = %job.id, kind = %job.kind, throttles = job.throttles + 1, error = %why, "throttled; the attempt is refunded");
                let settle = queue.throttled(job, &format!("throttled: {why}"), at).await?;
                Settled { settle, counts: counts(0, 0, 0), refunded: true, throttled: true }
            }
            UnitEnd::NotStarted => {
                let back = BatchSettle { remaining: vec![job.payload.clone()], ..Default::default() };
                settled(queue.settle_batch(job, &back).await?, counts(0, 0, 0), true)
            }
        });
    };
    let total = h.units.len();
    let now = queue.clock().now_ms();
    let throttled_at = |hint| now + crate::throttle::delay_ms(job.throttles, hint, &job.id) as i64;
    let (plan, counts) = plan_batch(
        b,
        &job.kind,
        std::mem::take(&mut h.ends),
        total,
        job.attempts >= queue.config().max_attempts,
        &throttled_at,
    );
    if plan.remaining.is_empty() && plan.dead.is_empty() {
        return Ok(Settled { settle: queue.finish(job).await?, counts, refunded: false, throttled: false });
    }
    let refunded = plan.error.is_none() && !plan.remaining.is_empty();
    let throttled = refunded && plan.throttled.is_some();
    if throttled {
        tracing::warn!(id = %job.id, kind = %job.kind, throttles = job.throttles + 1, error = %plan.throttled.as_ref().map(|t| t.0.as_str()).unwrap_or_default(), "throttled; the attempt is refunded");
    }
    let settle = queue.settle_batch(job, &plan).await?;
    // Out of attempts, the remaining units are dead-lettered with the item.
    let mut counts = counts;
    if settle == Settle::DeadLettered {
        counts.dead += plan.remaining.iter().map(|p| units_in(p, &job.kind)).sum::<u64>();
    }
    Ok(Settled { settle, counts, refunded, throttled })
}

/// Units a job carries: its batch's, or one.
pub(crate) fn units_of(job: &Job) -> u64 {
    match Batch::of_job(job) {
        Some(Ok(b)) => b.len() as u64,
        _ => 1,
    }
}

/// Units in a batch payload.
fn units_in(payload: &str, kind: &str) -> u64 {
    units_of(&Job::unclaimed("", kind, payload))
}

/// A failed remainder or the dead units of at most this many tenants are split one item a tenant
/// ([`Batch::per_tenant`]): the settle's transaction stays far inside DynamoDB's 100 items.
pub(crate) const TENANT_PARTS: usize = 8;

/// A batch's settle, from how its units ended. Pure. The units to run again and the dead ones
/// each regrouped as batches no larger than the batch limits (a subset regrouped per entry can
/// outgrow the item it came from).
pub(crate) fn plan_batch(
    b: &Batch,
    kind: &str,
    ends: Vec<(String, UnitEnd)>,
    total: usize,
    last_attempt: bool,
    throttled_at: &dyn Fn(Option<u64>) -> tickwork::clock::Millis,
) -> (BatchSettle, UnitCounts) {
    let sorted = sort_ends(ends, total, last_attempt);
    // Failed and dead units of a few tenants leave as items of one tenant each, which the
    // queue's trouble index finds by tenant (`tenants.explain`); most of a batch failing stays
    // whole (one item to retry, not one a tenant).
    let parts = |keys: &BTreeSet<String>, by_tenant: bool| -> Vec<String> {
        if keys.is_empty() {
            return Vec::new();
        }
        let sub = b.subset(kind, |k| keys.contains(k));
        let batches: Vec<Batch> = match by_tenant.then(|| sub.per_tenant(TENANT_PARTS)).flatten() {
            Some(each) => each.into_iter().flat_map(Batch::split).collect(),
            None => sub.split(),
        };
        batches.iter().map(Batch::to_payload).collect()
    };
    let mut counts = sorted.counts;
    counts.dead = sorted.dead.len() as u64;
    // With failures the item's attempt is spent: the units that did not run leave it as items
    // of their own, their attempts untouched; without, every unit left stays (the claim refunded).
    let (stay, fresh): (BTreeSet<String>, BTreeSet<String>) = match sorted.error {
        Some(_) => sorted.left.iter().cloned().partition(|k| !sorted.unrun.contains(k)),
        None => (sorted.left.clone(), BTreeSet::new()),
    };
    let failed = sorted.error.is_some();
    let plan = BatchSettle {
        remaining: parts(&stay, failed),
        error: sorted.error,
        dead: parts(&sorted.dead, true),
        dead_why: sorted.dead_why.unwrap_or_default(),
        fresh: parts(&fresh, false),
        throttled: sorted.throttled.map(|(why, hint)| (why, throttled_at(hint))),
    };
    (plan, counts)
}

/// A batch's units as they ended, sorted for its one settle.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Sorted {
    /// Units to run again (failed with a retry left, or not started).
    pub(crate) left: BTreeSet<String>,
    /// Of `left`, those that did not run in this claim (not started, or throttled).
    pub(crate) unrun: BTreeSet<String>,
    /// Units dead-lettered (failed for good, or failed on the item's last attempt).
    pub(crate) dead: BTreeSet<String>,
    /// Why units go back after a backoff; `None` when only the deadline stopped them (the claim
    /// then does not count as an attempt).
    pub(crate) error: Option<String>,
    /// Why the dead ones are dead (the first).
    pub(crate) dead_why: Option<String>,
    /// Units the target throttled go back (with the rest) after this: why (the first), and the
    /// longest hint any gave.
    pub(crate) throttled: Option<(String, Option<u64>)>,
    pub(crate) counts: UnitCounts,
}

/// Sorts unit ends. Pure. Attempts are counted per item, so on its last attempt a unit that failed
/// goes to the dead letters alone, and the units the deadline kept from starting go back without
/// losing an attempt: one failing unit never takes its batch-mates with it. A throttled unit goes
/// back too, spending no attempt ([`crate::throttle`]). A key that ended twice (a tenant listed
/// twice) is dead if either run was.
pub(crate) fn sort_ends(ends: Vec<(String, UnitEnd)>, total: usize, last_attempt: bool) -> Sorted {
    let mut s = Sorted::default();
    let (mut retry_err, mut retries) = (None, 0u64);
    let mut by_key: BTreeMap<String, Vec<UnitEnd>> = BTreeMap::new();
    for (key, end) in ends {
        by_key.entry(key).or_default().push(end);
    }
    let mut ran = BTreeSet::new();
    for (key, ends) in by_key {
        for end in ends {
            if matches!(end, UnitEnd::Done | UnitEnd::Failed(HandlerError::Retry(_) | HandlerError::Permanent(_))) {
                ran.insert(key.clone());
            }
            match end {
                UnitEnd::Done => s.counts.run += 1,
                UnitEnd::NotStarted => {
                    s.left.insert(key.clone());
                    s.unrun.insert(key.clone());
                }
                UnitEnd::Failed(HandlerError::Retry(m)) if last_attempt => {
                    s.counts.run += 1;
                    s.counts.failed += 1;
                    s.dead_why.get_or_insert_with(|| format!("{key}: failed on the last attempt: {m}"));
                    s.dead.insert(key.clone());
                }
                UnitEnd::Failed(HandlerError::Retry(m)) => {
                    s.counts.run += 1;
                    s.counts.failed += 1;
                    retries += 1;
                    retry_err.get_or_insert_with(|| format!("{key}: {m}"));
                    s.left.insert(key.clone());
                }
                UnitEnd::Failed(HandlerError::Permanent(m)) => {
                    s.counts.run += 1;
                    s.counts.failed += 1;
                    s.dead_why.get_or_insert_with(|| format!("{key}: {m}"));
                    s.dead.insert(key.clone());
                }
                UnitEnd::Failed(HandlerError::Throttled { why, after_ms }) => {
                    let t = s.throttled.get_or_insert_with(|| (format!("throttled: {key}: {why}"), None));
                    t.1 = t.1.max(after_ms);
                    s.left.insert(key.clone());
                    s.unrun.insert(key.clone());
                }
            }
        }
    }
    s.left.retain(|k| !s.dead.contains(k));
    // A key that also ran (a tenant listed twice) ran.
    s.unrun.retain(|k| s.left.contains(k) && !ran.contains(k));
    s.error = retry_err.map(|first| format!("{retries} of {total} units failed; first: {first}"));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Batched(usize, bool);
    impl crate::registry::Handler for Batched {
        fn handle<'a>(&'a self, _: &'a Job) -> futures::future::BoxFuture<'a, Result<(), HandlerError>> {
            Box::pin(async { Ok(()) })
        }
        fn batch_limit(&self) -> usize {
            self.0
        }
        fn whole_call_failures(&self) -> bool {
            self.1
        }
    }

    #[test]
    fn a_call_carries_its_batch_but_one_unit_on_the_last_attempt_of_a_target_whose_calls_fail_whole() {
        let reg = Registry::new()
            .with("function", std::sync::Arc::new(Batched(10, true)))
            .with("queue", std::sync::Arc::new(Batched(10, false)));
        assert_eq!(units_per_call(&reg, "function", false, false), 10);
        assert_eq!(units_per_call(&reg, "function", true, false), 1, "a poison unit fails alone");
        assert_eq!(units_per_call(&reg, "queue", true, false), 10, "entries fail on their own");
        assert_eq!(units_per_call(&reg, "queue", false, true), 1, "an item run alone");
        assert_eq!(units_per_call(&reg, "none", false, false), 1);
    }

    fn ends(v: &[(&str, &str)]) -> Vec<(String, UnitEnd)> {
        v.iter()
            .map(|(k, e)| {
                let end = match *e {
                    "done" => UnitEnd::Done,
                    "not started" => UnitEnd::NotStarted,
                    "retry" => UnitEnd::Failed(HandlerError::Retry("slow".into())),
                    "throttled" => {
                        UnitEnd::Failed(HandlerError::Throttled { why: "429".into(), after_ms: Some(2_000) })
                    }
                    _ => UnitEnd::Failed(HandlerError::Permanent("bad".into())),
                };
                (k.to_string(), end)
            })
            .collect()
    }

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn failures_go_back_with_an_error_and_the_deadline_alone_costs_no_attempt() {
        let s = sort_ends(ends(&[("a", "done"), ("b", "retry"), ("c", "not started"), ("d", "permanent")]), 4, false);
        assert_eq!((s.left, s.dead.clone()), (set(&["b", "c"]), set(&["d"])));
        assert_eq!(s.error.as_deref(), Some("1 of 4 units failed; first: b: slow"));
        assert_eq!(s.dead_why.as_deref(), Some("d: bad"));
        assert_eq!((s.counts.run, s.counts.failed), (3, 2));
        let s = sort_ends(ends(&[("a", "done"), ("c", "not started")]), 2, false);
        assert_eq!((s.left, s.error), (set(&["c"]), None), "only the deadline: no attempt spent");
    }

    #[test]
    fn on_the_last_attempt_only_the_failed_units_are_dead() {
        let s = sort_ends(ends(&[("a", "done"), ("b", "retry"), ("c", "not started")]), 3, true);
        assert_eq!((s.left, s.dead), (set(&["c"]), set(&["b"])), "c never ran: it goes back");
        assert_eq!(s.error, None, "so that c's next claim is not an attempt past the last");
        assert!(s.dead_why.unwrap().contains("last attempt"));
    }

    #[test]
    fn a_throttled_unit_goes_back_without_an_error_so_its_claim_is_refunded() {
        let s = sort_ends(ends(&[("a", "done"), ("b", "throttled"), ("c", "not started")]), 3, true);
        assert_eq!((s.left, s.dead), (set(&["b", "c"]), set(&[])), "not dead, even on the last attempt");
        assert_eq!(s.error, None, "no attempt spent");
        assert_eq!(s.throttled, Some(("throttled: b: 429".into(), Some(2_000))));
        assert_eq!((s.counts.run, s.counts.failed), (1, 0), "a throttled unit did not run");
        let s = sort_ends(ends(&[("a", "retry"), ("b", "throttled")]), 2, false);
        assert!(s.error.is_some() && s.throttled.is_some(), "a failure beside it spends the attempt");
    }

    #[test]
    fn units_that_did_not_run_beside_a_failure_leave_as_items_of_their_own() {
        let mut b = Batch::new(Default::default());
        b.add(vec![entry(&[("window", "2026-11-29")])], vec!["a".into(), "b".into(), "c".into(), "d".into()]);
        let key = |t: &str| format!("k#{t}#2026-11-29");
        let ends = |v: &[(&str, &str)]| -> Vec<(String, UnitEnd)> {
            super::tests::ends(v).into_iter().map(|(k, e)| (key(&k), e)).collect()
        };
        let tenants = |payloads: &[String]| -> Vec<String> {
            let mut t: Vec<String> = payloads
                .iter()
                .flat_map(|p| Batch::of_job(&Job::unclaimed("", "k", p.as_str())).unwrap().unwrap().units("k"))
                .map(|u| u.tenant)
                .collect();
            t.sort();
            t
        };
        let at = |_: Option<u64>| 9;
        let failed = ends(&[("a", "retry"), ("b", "not started"), ("c", "done"), ("d", "throttled")]);
        let (plan, _) = plan_batch(&b, "k", failed, 4, false, &at);
        assert_eq!(tenants(&plan.remaining), ["a"], "the failed unit spends the item's attempt");
        assert_eq!(tenants(&plan.fresh), ["b", "d"], "the units that never ran keep theirs");
        assert_eq!(plan.throttled.map(|t| t.1), Some(9), "and wait for the throttle");
        let stopped = ends(&[("a", "done"), ("b", "not started")]);
        let (plan, _) = plan_batch(&b, "k", stopped, 4, false, &at);
        assert_eq!((tenants(&plan.remaining), plan.fresh.len()), (vec!["b".to_string()], 0), "a refund keeps them");
    }

    #[test]
    fn failures_of_a_few_tenants_leave_one_item_a_tenant_and_of_many_one_item() {
        let many: Vec<String> = (0..=TENANT_PARTS).map(|i| format!("t{i}")).collect();
        let mut b = Batch::new(Default::default());
        b.add(vec![entry(&[("window", "2026-11-29")])], many.clone());
        let key = |t: &str| format!("k#{t}#2026-11-29");
        let all_fail = |how: &str| -> Vec<(String, UnitEnd)> {
            super::tests::ends(&many.iter().map(|t| (t.as_str(), how)).collect::<Vec<_>>())
                .into_iter()
                .map(|(k, e)| (key(&k), e))
                .collect()
        };
        let sole = |p: &String| tickwork::queue::trouble_of(p, None);
        // One tenant more than the split takes: the remainder stays one item.
        let (plan, _) = plan_batch(&b, "k", all_fail("retry"), many.len(), false, &|_| 0);
        let several = Some(tickwork::queue::SEVERAL.to_string());
        assert_eq!((plan.remaining.len(), sole(&plan.remaining[0])), (1, several), "in the shared partition");
        // Two failing, one dead, the rest done: an item a tenant, each naming its tenant.
        let mut ends = all_fail("done");
        ends[0].1 = UnitEnd::Failed(HandlerError::Retry("boom".into()));
        ends[3].1 = UnitEnd::Failed(HandlerError::Retry("boom".into()));
        ends[5].1 = UnitEnd::Failed(HandlerError::Permanent("bad".into()));
        let (plan, _) = plan_batch(&b, "k", ends, many.len(), false, &|_| 0);
        let named = |v: &[String]| v.iter().map(sole).collect::<Vec<_>>();
        assert_eq!(named(&plan.remaining), [Some("t0".to_string()), Some("t3".to_string())]);
        assert_eq!(named(&plan.dead), [Some("t5".to_string())]);
        // Stopped by the deadline alone: nothing went wrong, the rest stays one item.
        let mut ends = all_fail("done");
        ends[1].1 = UnitEnd::NotStarted;
        ends[2].1 = UnitEnd::NotStarted;
        let (plan, _) = plan_batch(&b, "k", ends, many.len(), false, &|_| 0);
        assert_eq!(plan.remaining.len(), 1);
    }

    #[test]
    fn a_key_that_ended_twice_is_in_one_place() {
        let s = sort_ends(ends(&[("a", "retry"), ("a", "permanent")]), 2, false);
        assert_eq!((s.left, s.dead), (set(&[]), set(&["a"])));
    }

    fn entry(pairs: &[(&str, &str)]) -> serde_json::Map<String, serde_json::Value> {
        pairs.iter().map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string()))).collect()
    }

    #[test]
    fn a_plan_counts_dead_units_and_keeps_every_part_under_the_batch_limit() {
        // Three entries per tenant; even tenants' day units and odd tenants' week units left, one
        // tenant in ten's month unit dead: regrouped per entry, the remainder lists most tenants
        // twice and outgrows the item (which is under the limit). It comes back in parts under
        // the limit, every unit in exactly one.
        let mut b = Batch::new(Default::default());
        let ids: Vec<String> = (0..1500).map(|i| format!("tenant-{i:04}-{}", "x".repeat(60))).collect();
        b.add(
            vec![
                entry(&[("grain", "day"), ("period", "2026-03-01")]),
                entry(&[("grain", "week"), ("period", "2026-W09")]),
                entry(&[("grain", "month"), ("period", "2026-02")]),
            ],
            ids.clone(),
        );
        assert!(b.to_payload().len() <= tickwork::batch::MAX_BATCH_BYTES);
        let units = b.units("pulse");
        let index = |key: &str| key.split('-').nth(1).unwrap().parse::<usize>().unwrap();
        let ends: Vec<(String, UnitEnd)> = units
            .iter()
            .map(|u| {
                let i = index(&u.key);
                let end = if u.key.contains("#day#") {
                    if i % 2 == 0 {
                        UnitEnd::NotStarted
                    } else {
                        UnitEnd::Done
                    }
                } else if u.key.contains("#week#") {
                    if i % 2 == 1 {
                        UnitEnd::NotStarted
                    } else {
                        UnitEnd::Done
                    }
                } else if i % 10 == 0 {
                    UnitEnd::Failed(HandlerError::Permanent("bad".into()))
                } else {
                    UnitEnd::NotStarted
                };
                (u.key.clone(), end)
            })
            .collect();
        let (plan, counts) = plan_batch(&b, "pulse", ends, units.len(), false, &|_| 0);
        assert_eq!(counts.dead, 150, "FailedUnits counts dead units, not items");
        let whole: usize = plan.remaining.iter().map(String::len).sum();
        assert!(whole > tickwork::batch::MAX_BATCH_BYTES, "the remainder outgrew the item: {whole} bytes");
        assert!(plan.remaining.len() > 1, "so it is split");
        for p in plan.remaining.iter().chain(&plan.dead) {
            assert!(p.len() <= tickwork::batch::MAX_BATCH_BYTES, "{} bytes", p.len());
        }
        let back: u64 = plan.remaining.iter().map(|p| units_in(p, "pulse")).sum();
        let dead: u64 = plan.dead.iter().map(|p| units_in(p, "pulse")).sum();
        assert_eq!((back, dead), (750 + 750 + 1350, 150));
        assert_eq!(plan.error, None, "only the deadline stopped the rest");
    }
}
