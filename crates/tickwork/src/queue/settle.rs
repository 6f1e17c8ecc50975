//! Settling a claimed item (steps 4 to 6 of the protocol in [`crate::queue`]): finish, retry
//! after a backoff, dead-letter, extend, or settle a batch of which only some units ran; every
//! write conditional on the claim (`mine_condition`), so a worker whose claim was re-taken
//! changes nothing.

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};

use crate::clock::Millis;
use crate::error::{condition_held, DbError};
use crate::item::Item;
use crate::queue::claim::Job;
use crate::queue::error::QueueError;
use crate::queue::item::NewItem;
use crate::queue::schema::*;
use crate::queue::store::Queue;
use crate::queue::transition::{batch_transition, Settle, Transition, MAX_ERROR_CHARS};
use crate::queue::trouble::trouble_of;
use crate::schema::{av_n, av_s, PK};

/// What a batch settle does besides moving the item ([`Queue::settle_batch`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchSettle {
    /// The units still to run, as batch payloads: the first replaces the item's payload, each
    /// further one becomes a new pending item. Empty: every unit ran or is dead.
    pub remaining: Vec<String>,
    /// Why units go back after a backoff; `None` when only the deadline stopped them.
    pub error: Option<String>,
    /// Units dead for good, as batch payloads, each a dead letter of its own.
    pub dead: Vec<String>,
    /// Units that did not run in this claim (the deadline or a throttle stopped them) while
    /// others failed, as batch payloads: each a new pending item of its own, so they do not pay
    /// for a claim whose failures were not theirs (a unit that first ran on the item's last
    /// attempt would die on its first transient failure).
    pub fresh: Vec<String>,
    /// Why the dead ones are dead.
    pub dead_why: String,
    /// The target throttled some units (why, and when they may run again): with no failure
    /// beside it, the units left go back then with the claim's attempt refunded and the item's
    /// [`THROTTLES`] counted.
    pub throttled: Option<(String, Millis)>,
}

/// An item a settle leaves behind.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Left {
    /// To run: pending from `due_ms` (now when `None`; `suspect`: run alone); `trouble`: it went
    /// wrong (a failure, a throttle, a death), so it names its tenant in the [`TROUBLE_INDEX`];
    /// `attempts`: the claims its units have spent (attempts are per unit: every unit of an item
    /// has spent the item's, so a part carries what its units spent, never a fresh start);
    /// `error`: why its units failed in this claim, when they did.
    Pending { suspect: bool, due_ms: Option<Millis>, trouble: bool, attempts: u32, error: Option<String> },
    /// A dead letter, with why.
    Dead { why: String },
}

/// Tags of the ids a settle derives ([`derived_id`]); the worker's IAM grants `PutItem` on the
/// queue table for these ids only (`template.yaml`, `LeaveParts`).
pub const REST: &str = "rest";
/// A dead letter split from a batch.
pub const DEAD_PART: &str = "dead";
/// A part of an item whose worker died.
pub const PART: &str = "part";

/// The id of the `i`-th item a settle of claim (`attempts`, `owner`) of `id` leaves behind:
/// `<id>#<tag>#<attempts>#<owner>#<i>`. Pure. An id too long for the queue's key limit with its
/// suffix is replaced by its SHA-256 (the suffix keeps the tag, so the grant still matches).
pub fn derived_id(id: &str, tag: &str, attempts: u32, owner: &str, i: usize) -> String {
    let suffix = format!("#{tag}#{attempts}#{owner}#{i}");
    if id.len() + suffix.len() <= MAX_ID_BYTES {
        return format!("{id}{suffix}");
    }
    use sha2::Digest;
    let digest: String = sha2::Sha256::digest(id.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    format!("{digest}{suffix}")
}

const MINE: &str = "#owner = :owner AND #attempts = :gen AND #state = :claimed";

/// "Still our claim": the item is claimed, by this owner, at this attempt, after as many
/// throttles. Pure; the one condition of every settle, single ([`Queue::mine`]) or in a
/// transaction. The throttles are part of the claim's name: a throttle refunds the attempt, and the
/// drain that gave the item back may claim it again itself (same owner, same attempt), so without
/// them a late retry of the first claim's settle (its answer lost) would settle the second.
pub(super) fn mine_condition(job: &Job) -> crate::schema::ExprParts {
    let names = vec![("#owner", OWNER), ("#attempts", ATTEMPTS), ("#state", STATE), ("#thr", THROTTLES)];
    let mut values = vec![(":owner", av_s(&job.owner)), (":gen", av_n(job.attempts)), (":claimed", av_s(CLAIMED))];
    let cond = match job.throttles {
        0 => format!("{MINE} AND attribute_not_exists(#thr)"),
        n => {
            values.push((":thr", av_n(n)));
            format!("{MINE} AND #thr = :thr")
        }
    };
    (cond, names, values)
}

/// The name of a claim in the ids its settle derives ([`derived_id`]): its owner, and after a
/// throttle its throttles, so that two claims of one owner at one attempt (a throttle refunded the
/// first) leave items of different ids. Pure.
fn claim_name(job: &Job) -> String {
    match job.throttles {
        0 => job.owner.clone(),
        n => format!("{}.t{n}", job.owner),
    }
}

impl Queue {
    fn mine(&self, job: &Job) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        let (cond, names, values) = mine_condition(job);
        let mut req =
            self.db.client().update_item().table_name(&self.table).key(PK, av_s(&job.id)).condition_expression(cond);
        for (k, v) in names {
            req = req.expression_attribute_names(k, v);
        }
        for (k, v) in values {
            req = req.expression_attribute_values(k, v);
        }
        req
    }

    /// Marks the job done (a tombstone out of the ready index), if still ours.
    pub async fn finish(&self, job: &Job) -> Result<Settle, QueueError> {
        let t = Transition::Done { ttl_s: self.done_ttl_s(), now_ms: self.clock.now_ms(), forget: shared(job) };
        self.apply(job, &t).await
    }

    /// Applies a settle transition to our claimed item (one conditional UpdateItem).
    async fn apply(&self, job: &Job, t: &Transition) -> Result<Settle, QueueError> {
        let (expr, names, values) = t.update();
        let mut req = self.mine(job).update_expression(expr);
        for (k, v) in names {
            req = req.expression_attribute_names(k, v);
        }
        for (k, v) in values {
            req = req.expression_attribute_values(k, v);
        }
        settle(self.db.update(req).await, t.outcome())
    }

    fn done_ttl_s(&self) -> i64 {
        self.clock.now_ms() / 1000 + self.cfg.retention.as_secs() as i64
    }

    /// Pushes the claim out by the visibility timeout, if still ours.
    pub async fn extend(&self, job: &Job) -> Result<(Settle, Job), QueueError> {
        let until = self.clock.now_ms() + self.cfg.visibility.as_millis() as i64;
        let req = self
            .mine(job)
            .update_expression("SET #vis = :until")
            .expression_attribute_names("#vis", VISIBLE_AT)
            .expression_attribute_values(":until", av_n(until));
        let s = settle(self.db.update(req).await, Settle::Settled)?;
        Ok((s, Job { claim_until_ms: until, ..job.clone() }))
    }

    /// Records a failure: retry after the backoff, or dead-letter after the last attempt.
    pub async fn fail(&self, job: &Job, error: &str) -> Result<Settle, QueueError> {
        if job.attempts >= self.cfg.max_attempts {
            return self.dead_letter(job, error).await;
        }
        let at = self.clock.now_ms() + self.cfg.backoff(job.attempts).as_millis() as i64;
        let t = Transition::Retry {
            at_ms: at,
            error: error.to_string(),
            payload: None,
            refund: false,
            throttled: false,
            trouble: job_tenant(job),
        };
        self.apply(job, &t).await
    }

    /// Gives the job back because its handler's target throttled: visible again at `at_ms`, the
    /// claim's attempt refunded and counted in [`THROTTLES`] instead (the worker decides when a
    /// throttle counts as a failure: [`Job::throttles`]).
    pub async fn throttled(&self, job: &Job, why: &str, at_ms: Millis) -> Result<Settle, QueueError> {
        let t = Transition::Retry {
            at_ms,
            error: why.to_string(),
            payload: None,
            refund: true,
            throttled: true,
            trouble: job_tenant(job),
        };
        self.apply(job, &t).await
    }

    /// Moves the job to the dead letters now (a permanent failure, or the last attempt).
    pub async fn dead_letter(&self, job: &Job, error: &str) -> Result<Settle, QueueError> {
        let t = Transition::Dead {
            now_ms: self.clock.now_ms(),
            error: error.to_string(),
            payload: None,
            trouble: job_tenant(job),
        };
        self.apply(job, &t).await
    }

    /// Settles a batch ([`crate::batch`]) of which only some units completed, in one transaction
    /// conditional on our claim ([`BatchSettle`]): the units still to run go back to pending —
    /// after the backoff when some failed, at once when only the deadline stopped them (that
    /// claim then does not count as an attempt) — the first part in the item itself, any further
    /// part (a remainder regrouped past the batch size) as a new item `<id>#rest#…`; units dead
    /// for good become dead letters of their own, `<id>#dead#…`. Out of attempts with failures
    /// left, the first remaining part is dead-lettered in the item itself.
    pub async fn settle_batch(&self, job: &Job, s: &BatchSettle) -> Result<Settle, QueueError> {
        let now = self.clock.now_ms();
        let t = batch_transition(
            s.remaining.first().map(|p| (p.as_str(), trouble_of(p, job.tenant.as_deref()))),
            s.error.as_deref(),
            s.throttled.as_ref().map(|(why, at)| (why.as_str(), *at)),
            job.attempts >= self.cfg.max_attempts,
            now,
            now + self.cfg.backoff(job.attempts).as_millis() as i64,
            self.done_ttl_s(),
            // Dead parts carry the trouble on: an item whose other units ran is no unit recovered.
            shared(job) || !s.dead.is_empty(),
        );
        let outcome = t.outcome();
        // Units that did not run in this claim spent the claims before it.
        let unrun = job.attempts.saturating_sub(1);
        let rest = match &t {
            // Out of attempts: the further parts are as dead as the first.
            Transition::Dead { .. } => Left::Dead { why: s.error.clone().unwrap_or_default() },
            // The further parts of a retried remainder wait for its backoff as the item does, and
            // have spent what it has (the claim's attempt, unless refunded).
            Transition::Retry { at_ms, refund, .. } => Left::Pending {
                suspect: job.suspect,
                due_ms: Some(*at_ms),
                trouble: s.error.is_some() || s.throttled.is_some(),
                attempts: if *refund { unrun } else { job.attempts },
                error: s.error.clone(),
            },
            Transition::Done { .. } => {
                Left::Pending { suspect: job.suspect, due_ms: None, trouble: false, attempts: unrun, error: None }
            }
        };
        let mut left: Vec<(&str, &str, Left)> = Vec::new();
        for p in s.remaining.iter().skip(1) {
            left.push((REST, p, rest.clone()));
        }
        for p in &s.fresh {
            // Units a throttle stopped wait for it as the item does (and went wrong: the trouble
            // index names them while they wait).
            let due_ms = s.throttled.as_ref().map(|t| t.1);
            let trouble = s.throttled.is_some();
            let part = Left::Pending { suspect: job.suspect, due_ms, trouble, attempts: unrun, error: None };
            left.push((REST, p, part));
        }
        for p in &s.dead {
            left.push((DEAD_PART, p, Left::Dead { why: s.dead_why.clone() }));
        }
        self.settle_with(job, &t, &left, outcome).await
    }

    /// Splits a claimed item whose last worker died ([`Job::died`]) into `parts` (batch payloads),
    /// each a new pending item `<id>#part#…` marked [`SUSPECT`], and finishes the item, in one
    /// transaction conditional on our claim. Parts are run alone, so the one that kills its worker
    /// again is found, split again, and at one unit dead-lettered after its attempts.
    pub async fn split(&self, job: &Job, parts: &[String]) -> Result<Settle, QueueError> {
        // The parts carry the trouble on: the item is no unit handled.
        let t = Transition::Done { ttl_s: self.done_ttl_s(), now_ms: self.clock.now_ms(), forget: true };
        let left: Vec<(&str, &str, Left)> = parts
            .iter()
            .map(|p| {
                (
                    PART,
                    p.as_str(),
                    Left::Pending { suspect: true, due_ms: None, trouble: true, attempts: 0, error: None },
                )
            })
            .collect();
        self.settle_with(job, &t, &left, Settle::Split { parts: parts.len() as u32 }).await
    }

    /// The item's transition and the items it leaves behind, in one transaction (one conditional
    /// UpdateItem when it leaves nothing).
    async fn settle_with(
        &self,
        job: &Job,
        t: &Transition,
        left: &[(&str, &str, Left)],
        outcome: Settle,
    ) -> Result<Settle, QueueError> {
        if left.is_empty() {
            return self.apply(job, t).await.map(|s| if s == Settle::NotOwner { s } else { outcome });
        }
        let now = self.clock.now_ms();
        let (expr, names, values) = t.update();
        let mut items = vec![self.mine_update(job, &expr, &names, values)];
        for (i, (tag, payload, what)) in left.iter().enumerate() {
            // Unique to this claim (the owner id is new each invocation; the attempt is refunded
            // only when the deadline alone stopped a batch, and then nothing is left behind but a
            // remainder), and inserted only if new: a settle retried after its answer was lost
            // writes the same ids, which the claim's condition then refuses as a whole.
            let id = derived_id(&job.id, tag, job.attempts, &claim_name(job), i);
            let trouble = match what {
                Left::Pending { trouble, .. } => *trouble,
                Left::Dead { .. } => true,
            };
            let mut item = match what {
                Left::Pending { suspect, due_ms, attempts, error, .. } => {
                    let new = NewItem {
                        id,
                        kind: job.kind.clone(),
                        payload: payload.to_string(),
                        tenant: job.tenant.clone(),
                        due_ms: due_ms.unwrap_or(now),
                    };
                    new.validate()?;
                    let mut item = new.item(self.cfg.shards, now);
                    if *suspect {
                        item.insert(SUSPECT.to_string(), AttributeValue::Bool(true));
                    }
                    item.insert(ATTEMPTS.to_string(), av_n(*attempts));
                    if let Some(why) = error {
                        item.insert(
                            LAST_ERROR.to_string(),
                            av_s(why.chars().take(MAX_ERROR_CHARS).collect::<String>()),
                        );
                    }
                    item
                }
                Left::Dead { why } => {
                    let mut item = Item::from([
                        (PK.to_string(), av_s(&id)),
                        (KIND.to_string(), av_s(&job.kind)),
                        (PAYLOAD.to_string(), av_s(*payload)),
                        (ATTEMPTS.to_string(), av_n(job.attempts)),
                        (STATE.to_string(), av_s(DEAD)),
                        (DLQ.to_string(), av_s(DLQ_PARTITION)),
                        (FAILED_AT.to_string(), av_n(now)),
                        (LAST_ERROR.to_string(), av_s(why.chars().take(MAX_ERROR_CHARS).collect::<String>())),
                        (CREATED_AT.to_string(), av_n(now)),
                    ]);
                    if let Some(t) = &job.tenant {
                        item.insert(TENANT.to_string(), av_s(t));
                    }
                    item
                }
            };
            // A dead letter of several tenants' units stays out of the shared partition, which
            // holds live items only (dead letters have no expiry; `tickctl dead-letters` lists
            // whose units they hold).
            let who = trouble_of(payload, job.tenant.as_deref())
                .filter(|t| trouble && !(t == SEVERAL && matches!(what, Left::Dead { .. })));
            if let Some(t) = who {
                item.insert(TROUBLE.to_string(), av_s(t));
            }
            items.push(crate::schema::put_new_item(&self.table, item));
        }
        match self.db.transact_write(items).await {
            Ok(_) => Ok(outcome),
            Err(DbError::TransactionCanceled { reasons }) if reasons.first().is_some_and(|r| r.condition_failed()) => {
                Ok(Settle::NotOwner)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// An update of our claimed item for a transaction, conditional as [`Queue::mine`] is.
    fn mine_update(
        &self,
        job: &Job,
        expr: &str,
        names: &[(&str, &str)],
        values: Vec<(&str, AttributeValue)>,
    ) -> TransactWriteItem {
        let (cond, mine_names, mine_values) = mine_condition(job);
        let mut u = aws_sdk_dynamodb::types::Update::builder()
            .table_name(&self.table)
            .key(PK, av_s(&job.id))
            .update_expression(expr)
            .condition_expression(cond);
        for (k, v) in mine_names {
            u = u.expression_attribute_names(k, v);
        }
        for (k, v) in mine_values {
            u = u.expression_attribute_values(k, v);
        }
        for (k, v) in names {
            u = u.expression_attribute_names(*k, *v);
        }
        for (k, v) in values {
            u = u.expression_attribute_values(k, v);
        }
        TransactWriteItem::builder().update(u.build().expect("update has table, key and expression")).build()
    }
}

/// What the trouble index names a job's units under ([`trouble_of`]).
fn job_tenant(job: &Job) -> Option<String> {
    trouble_of(&job.payload, job.tenant.as_deref())
}

/// The job stands in the shared partition of the trouble index, which holds live items only:
/// done, it leaves it.
fn shared(job: &Job) -> bool {
    job.trouble.as_deref() == Some(SEVERAL)
}

fn settle(
    r: Result<aws_sdk_dynamodb::operation::update_item::UpdateItemOutput, DbError>,
    ok: Settle,
) -> Result<Settle, QueueError> {
    Ok(if condition_held(r)? { ok } else { Settle::NotOwner })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn derived_ids_are_unique_per_claim_and_fit_the_key_limit() {
        assert_eq!(derived_id("pulse#UTC@2026-11-29#ab", REST, 2, "w1", 0), "pulse#UTC@2026-11-29#ab#rest#2#w1#0");
        assert_ne!(derived_id("x", PART, 2, "w1", 0), derived_id("x", PART, 2, "w2", 0));
        assert_ne!(derived_id("x", PART, 2, "w1", 0), derived_id("x", PART, 3, "w1", 0));
        let long = "t".repeat(MAX_ID_BYTES);
        let d = derived_id(&long, DEAD_PART, 1, "queue-worker-0123456789abcdef", 7);
        assert!(d.len() <= MAX_ID_BYTES && d.ends_with("#dead#1#queue-worker-0123456789abcdef#7"), "{d}");
        assert_ne!(d, derived_id(&"u".repeat(MAX_ID_BYTES), DEAD_PART, 1, "queue-worker-0123456789abcdef", 7));
    }

    pub(in crate::queue) fn job() -> Job {
        Job {
            id: "j".into(),
            kind: "k".into(),
            payload: "{}".into(),
            tenant: None,
            attempts: 2,
            owner: "o".into(),
            claim_until_ms: 0,
            died: false,
            suspect: false,
            throttles: 0,
            trouble: None,
        }
    }

    #[test]
    fn the_claim_condition_names_and_values_what_it_uses() {
        let (cond, names, values) = mine_condition(&job());
        for (k, _) in &names {
            assert!(cond.contains(k), "{k} named, not used");
        }
        for (k, _) in &values {
            assert!(cond.contains(k), "{k} given, not used");
        }
        assert_eq!((names.len(), values.len()), (4, 3));
        let throttled = Job { throttles: 2, ..job() };
        let (cond, names, values) = mine_condition(&throttled);
        for (k, _) in names.iter().chain(values.iter().map(|(k, _)| k).map(|k| (*k, "")).collect::<Vec<_>>().iter()) {
            assert!(cond.contains(k), "{k} given, not used");
        }
        assert!(cond.ends_with("#thr = :thr") && values.len() == 4, "{cond}");
        assert_ne!(claim_name(&throttled), claim_name(&job()), "a claim after a throttle leaves other ids");
    }
}
