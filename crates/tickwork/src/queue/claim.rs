//! Claiming an item (step 3 of the protocol in [`crate::queue`]): one conditional UpdateItem that
//! takes a ready, live item for an owner and counts the attempt, so that every later write can be
//! conditional on this claim; an item whose claims are exhausted is buried instead.

use aws_sdk_dynamodb::types::ReturnValue;

use crate::clock::Millis;
use crate::error::DbError;
use crate::item::Item;
use crate::queue::error::QueueError;
use crate::queue::schema::*;
use crate::queue::store::Queue;
use crate::schema::{av_n, av_s, get_i64, get_s, get_u64, PK};

/// A claimed item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Id.
    pub id: String,
    /// Handler kind.
    pub kind: String,
    /// JSON payload (decoded by the handler).
    pub payload: String,
    /// Owning tenant.
    pub tenant: Option<String>,
    /// Claims so far, this one included; the claim's generation.
    pub attempts: u32,
    /// Our owner id.
    pub owner: String,
    /// Our claim's end (ms).
    pub claim_until_ms: Millis,
    /// The claim before ours expired unsettled: the worker that held it died (a unit that aborts
    /// its process, runs out of memory, or hangs past the function's deadline), perhaps because of
    /// this item. The worker isolates it ([`SUSPECT`]).
    pub died: bool,
    /// A part split from an item whose worker died: run alone, so that a death is its own.
    pub suspect: bool,
    /// Claims given back because the handler's target throttled ([`THROTTLES`]), refunded.
    pub throttles: u32,
    /// What the trouble index names it under ([`TROUBLE`]), as claimed: its tenant, or [`SEVERAL`].
    pub trouble: Option<String>,
}

impl crate::batch::Carrier for Job {
    fn id(&self) -> &str {
        &self.id
    }
    fn payload(&self) -> &str {
        &self.payload
    }
}

impl Job {
    /// A stored item as a job no one has claimed: how tooling reads an item's units (a dead
    /// letter's tenants, what a test finds queued).
    pub fn unclaimed(id: impl Into<String>, kind: impl Into<String>, payload: impl Into<String>) -> Self {
        Job {
            id: id.into(),
            kind: kind.into(),
            payload: payload.into(),
            tenant: None,
            attempts: 0,
            owner: String::new(),
            claim_until_ms: 0,
            died: false,
            suspect: false,
            throttles: 0,
            trouble: None,
        }
    }
}

/// Outcome of a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Ours.
    Claimed(Job),
    /// Another worker got it first, or it is no longer ready.
    Taken,
    /// Every attempt was claimed and none settled (its workers died): moved to the dead letters,
    /// as it now stands (its payload says how many units went with it).
    DeadLettered(Box<Job>),
}

impl Queue {
    /// Claims `id` for `owner` if it is still ready (see step 3 of the protocol). A pending item
    /// is claimed in one write; an item whose last claim expired unsettled is claimed by a second,
    /// conditional on that very claim, and comes back [`Job::died`] (a failed first write is the
    /// cost of knowing, paid only after a death).
    pub async fn claim(&self, id: &str, owner: &str) -> Result<Claim, QueueError> {
        let now = self.clock.now_ms();
        let until = now + self.cfg.visibility.as_millis() as i64;
        let req = self
            .db
            .client()
            .update_item()
            .table_name(&self.table)
            .key(PK, av_s(id))
            .update_expression("SET #owner = :owner, #state = :claimed, #vis = :until ADD #attempts :one")
            .condition_expression(
                "attribute_exists(#shard) AND #vis <= :now AND #state = :pending AND (attribute_not_exists(#attempts) OR #attempts < :max)",
            )
            .expression_attribute_names("#owner", OWNER)
            .expression_attribute_names("#state", STATE)
            .expression_attribute_names("#vis", VISIBLE_AT)
            .expression_attribute_names("#attempts", ATTEMPTS)
            .expression_attribute_names("#shard", SHARD)
            .expression_attribute_values(":owner", av_s(owner))
            .expression_attribute_values(":claimed", av_s(CLAIMED))
            .expression_attribute_values(":pending", av_s(PENDING))
            .expression_attribute_values(":until", av_n(until))
            .expression_attribute_values(":now", av_n(now))
            .expression_attribute_values(":one", av_n(1))
            .expression_attribute_values(":max", av_n(self.cfg.max_attempts))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld);
        match self.db.update(req).await {
            Ok(out) => {
                Ok(Claim::Claimed(job_of(id, owner, until, &out.attributes().cloned().unwrap_or_default(), false)))
            }
            Err(DbError::ConditionFailed { item, .. }) => {
                let item = item.map(|b| *b).unwrap_or_default();
                match refused_claim(&item, owner, now, self.cfg.max_attempts) {
                    Refused::Ours { until: at } => {
                        Ok(Claim::Claimed(job_of(id, owner, at.unwrap_or(until), &item, false)))
                    }
                    Refused::Exhausted { attempts } => self.bury(id, attempts, &item).await,
                    Refused::Expired { owner: prev, attempts } => self.reclaim(id, owner, &prev, attempts).await,
                    Refused::Taken => Ok(Claim::Taken),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Takes over a claim that expired unsettled (its worker died), conditional on that claim
    /// being the one read: the job comes back [`Job::died`].
    async fn reclaim(&self, id: &str, owner: &str, prev: &str, attempts: u32) -> Result<Claim, QueueError> {
        let now = self.clock.now_ms();
        let until = now + self.cfg.visibility.as_millis() as i64;
        let req = self
            .db
            .client()
            .update_item()
            .table_name(&self.table)
            .key(PK, av_s(id))
            .update_expression("SET #owner = :owner, #vis = :until ADD #attempts :one")
            .condition_expression(
                "attribute_exists(#shard) AND #vis <= :now AND #state = :claimed AND #owner = :prev AND #attempts = :gen",
            )
            .expression_attribute_names("#owner", OWNER)
            .expression_attribute_names("#state", STATE)
            .expression_attribute_names("#vis", VISIBLE_AT)
            .expression_attribute_names("#attempts", ATTEMPTS)
            .expression_attribute_names("#shard", SHARD)
            .expression_attribute_values(":owner", av_s(owner))
            .expression_attribute_values(":prev", av_s(prev))
            .expression_attribute_values(":claimed", av_s(CLAIMED))
            .expression_attribute_values(":gen", av_n(attempts))
            .expression_attribute_values(":until", av_n(until))
            .expression_attribute_values(":now", av_n(now))
            .expression_attribute_values(":one", av_n(1))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld);
        match self.db.update(req).await {
            Ok(out) => {
                Ok(Claim::Claimed(job_of(id, owner, until, &out.attributes().cloned().unwrap_or_default(), true)))
            }
            Err(DbError::ConditionFailed { item, .. }) => {
                let item = item.map(|b| *b).unwrap_or_default();
                match refused_claim(&item, owner, now, self.cfg.max_attempts) {
                    Refused::Ours { until: at } => {
                        Ok(Claim::Claimed(job_of(id, owner, at.unwrap_or(until), &item, true)))
                    }
                    Refused::Exhausted { attempts } => self.bury(id, attempts, &item).await,
                    Refused::Expired { .. } | Refused::Taken => Ok(Claim::Taken),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Dead-letters an item whose claims are exhausted, if it still is (another worker may have
    /// buried it first); `stood`, the item as the refused claim read it, names it in the trouble
    /// index.
    async fn bury(&self, id: &str, attempts: u32, stood: &Item) -> Result<Claim, QueueError> {
        let now = self.clock.now_ms();
        let msg = format!("claimed {attempts} times and never settled: its handler died with its worker each time (a panic, a timeout or out of memory)");
        // A dead letter of several tenants' units stays out of the shared partition (live items
        // only).
        let who = crate::queue::trouble_of(get_s(stood, PAYLOAD).unwrap_or_default(), get_s(stood, TENANT))
            .filter(|t| t != SEVERAL);
        let set_who = if who.is_some() { ", #trouble = :who" } else { "" };
        let mut req = self
            .db
            .client()
            .update_item()
            .table_name(&self.table)
            .key(PK, av_s(id))
            .update_expression(format!(
                "SET #state = :dead, #dlq = :dlq, #failed = :now, #err = :err{set_who} REMOVE #shard, #owner"
            ))
            .condition_expression("attribute_exists(#shard) AND #vis <= :now AND #attempts >= :max")
            .expression_attribute_names("#state", STATE)
            .expression_attribute_names("#dlq", DLQ)
            .expression_attribute_names("#failed", FAILED_AT)
            .expression_attribute_names("#err", LAST_ERROR)
            .expression_attribute_names("#shard", SHARD)
            .expression_attribute_names("#owner", OWNER)
            .expression_attribute_names("#vis", VISIBLE_AT)
            .expression_attribute_names("#attempts", ATTEMPTS)
            .expression_attribute_values(":dead", av_s(DEAD))
            .expression_attribute_values(":dlq", av_s(DLQ_PARTITION))
            .expression_attribute_values(":now", av_n(now))
            .expression_attribute_values(":err", av_s(msg))
            .expression_attribute_values(":max", av_n(self.cfg.max_attempts))
            .return_values(ReturnValue::AllNew);
        if let Some(w) = who {
            req = req.expression_attribute_names("#trouble", TROUBLE).expression_attribute_values(":who", av_s(w));
        }
        match self.db.update(req).await {
            Ok(out) => Ok(Claim::DeadLettered(Box::new(job_of(
                id,
                "",
                0,
                &out.attributes().cloned().unwrap_or_default(),
                false,
            )))),
            Err(DbError::ConditionFailed { .. }) => Ok(Claim::Taken),
            Err(e) => Err(e.into()),
        }
    }
}

/// What a refused claim means, read from the item as it stood (`ReturnValuesOnConditionCheckFailure`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Refused {
    /// Claimed by this very owner: the first attempt applied and its answer was lost; the claim
    /// runs until `until`.
    Ours { until: Option<Millis> },
    /// Ready, not a pause marker, and every attempt claimed with none settled: to be buried.
    Exhausted { attempts: u32 },
    /// Ready again because `owner`'s claim (generation `attempts`) expired unsettled: its worker
    /// died. To be taken over by that claim's condition.
    Expired { owner: String, attempts: u32 },
    /// Someone else's, not ready, or gone.
    Taken,
}

/// Pure: the reading of a refused claim of `item` by `owner` at `now`.
fn refused_claim(item: &Item, owner: &str, now: Millis, max_attempts: u32) -> Refused {
    if get_s(item, STATE) == Some(CLAIMED) && get_s(item, OWNER) == Some(owner) {
        return Refused::Ours { until: get_i64(item, VISIBLE_AT) };
    }
    let attempts = get_u64(item, ATTEMPTS).unwrap_or(0) as u32;
    let ready = item.contains_key(SHARD) && get_i64(item, VISIBLE_AT).is_some_and(|v| v <= now);
    if !ready || get_s(item, STATE) == Some(PAUSE) {
        return Refused::Taken;
    }
    if attempts >= max_attempts {
        return Refused::Exhausted { attempts };
    }
    match (get_s(item, STATE), get_s(item, OWNER)) {
        (Some(CLAIMED), Some(prev)) => Refused::Expired { owner: prev.to_string(), attempts },
        _ => Refused::Taken,
    }
}

fn job_of(id: &str, owner: &str, until: Millis, a: &Item, died: bool) -> Job {
    Job {
        id: id.to_string(),
        kind: get_s(a, KIND).unwrap_or_default().to_string(),
        payload: get_s(a, PAYLOAD).unwrap_or("null").to_string(),
        tenant: get_s(a, TENANT).map(str::to_string),
        attempts: get_u64(a, ATTEMPTS).unwrap_or(1) as u32,
        owner: owner.to_string(),
        claim_until_ms: until,
        died,
        suspect: crate::schema::get_bool(a, SUSPECT).unwrap_or(false),
        throttles: get_u64(a, THROTTLES).unwrap_or(0) as u32,
        trouble: get_s(a, TROUBLE).map(str::to_string),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{av_n, av_s};

    fn item(state: &str, owner: Option<&str>, attempts: u32, visible_at: Millis, live: bool) -> Item {
        let mut i = Item::from([
            (STATE.to_string(), av_s(state)),
            (ATTEMPTS.to_string(), av_n(attempts)),
            (VISIBLE_AT.to_string(), av_n(visible_at)),
        ]);
        if let Some(o) = owner {
            i.insert(OWNER.to_string(), av_s(o));
        }
        if live {
            i.insert(SHARD.to_string(), av_s(shard_key(0)));
        }
        i
    }

    #[test]
    fn a_refused_claim_is_ours_exhausted_or_taken() {
        let now = 1_000;
        let ours = item(CLAIMED, Some("w1"), 2, 5_000, true);
        assert_eq!(refused_claim(&ours, "w1", now, 5), Refused::Ours { until: Some(5_000) }, "our lost answer");
        assert_eq!(refused_claim(&ours, "w2", now, 5), Refused::Taken, "another worker's live claim");
        let spent = item(CLAIMED, Some("dead"), 5, 900, true);
        assert_eq!(refused_claim(&spent, "w2", now, 5), Refused::Exhausted { attempts: 5 }, "claims all died");
        assert_eq!(
            refused_claim(&spent, "w2", now, 6),
            Refused::Expired { owner: "dead".into(), attempts: 5 },
            "attempts left: its worker died, to be taken over"
        );
        assert_eq!(refused_claim(&item(PENDING, None, 1, 900, true), "w2", now, 5), Refused::Taken, "raced to pending");
        assert_eq!(refused_claim(&item(PENDING, None, 5, 2_000, true), "w2", now, 5), Refused::Taken, "not ready yet");
        assert_eq!(refused_claim(&item(DONE, None, 5, 900, false), "w2", now, 5), Refused::Taken, "finished");
        assert_eq!(refused_claim(&item(PAUSE, None, 9, 0, true), "w2", now, 5), Refused::Taken, "a pause marker");
        assert_eq!(refused_claim(&Item::new(), "w2", now, 5), Refused::Taken, "gone");
    }
}
