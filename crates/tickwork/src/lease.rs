//! Leader lease per job, with a fencing token.
//!
//! Why: workers on phase-shifted timers must not run the same scheduled tick together (`000_*`,
//! job one). But a lease is coordination, not idempotency: it only makes collisions rare. The
//! fencing token makes a collision harmless for progress writes, and per-unit idempotency keys
//! make it harmless for effects.
//!
//! ## Item (control table)
//! `pk = lease#<job>`, `sk = lease`; `owner` (S), `token` (N), `expires_at` (N, ms), `acquired_at`,
//! `released_at` (the last release). The item is never deleted, so `token` increases across every
//! acquisition for the job's life.
//!
//! ## Protocol
//! 1. **Acquire**: one UpdateItem, `SET owner, expires_at = now + ttl ADD token 1`, conditional on
//!    `attribute_not_exists(pk) OR expires_at < :now`. Strict `<`: a lease is still held at its
//!    expiry millisecond. On failure the current item comes back (`ReturnValuesOnConditionCheckFailure`)
//!    and the outcome is [`Acquire::Held`], not an error. An expired lease is taken over at once.
//!    A failed condition on a lease held by *this* owner is our own acquisition whose answer was
//!    lost and which the SDK retried: it is recognised as acquired, not as held by someone else.
//! 2. **Work**: the holder starts no step after [`Lease::safe_until_ms`] = `expires_at - clock_skew`,
//!    so that even with clocks apart by the declared skew it stops before another node could take
//!    over. A Lambda is frozen between invocations, so no background heartbeat is trusted: size the
//!    TTL to cover the invocation (see [`LeaseConfig`]) or [`LeaseStore::renew`] between steps.
//! 3. **Progress writes** carry the fence ([`Lease::fence`]): a ConditionCheck `owner = me AND
//!    token = mine` in the same transaction. A stale leader's write fails as [`Fenced::Stale`].
//! 4. **Release**: on failure only, by default (`release_on_success` opts in for one-shot work):
//!    `SET expires_at = 0, released_at = now` conditional on owner and token. A non-owner's
//!    release changes nothing.
//! 5. **The holder before**: an acquisition reads the item as it was (`ALL_OLD`), so the new holder
//!    knows until when the one before it could have written ([`Lease::held_until_ms`]): its release,
//!    else its expiry. A job that planned from a read taken before then plans again
//!    ([`Lease::held_since`]): a duplicate delivery, or a tick that took a lease another let go.
//!
//! ## Clock assumptions
//! Nodes' clocks differ by at most `clock_skew`. The TTL must be below the schedule interval (a
//! lease as long as the interval lets a worker waking on the expiry instant lose its own next
//! run), and above twice the skew; [`LeaseConfig::new`] refuses anything else.

use std::time::Duration;

use aws_sdk_dynamodb::types::{ConditionCheck, ReturnValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem};

use crate::clock::{Millis, SharedClock};
use crate::config::ConfigError;
use crate::db::Db;
use crate::error::{condition_held, DbError};
use crate::item::Item;
use crate::schema::{av_n, av_s, get_i64, get_s, get_u64, key, PK, TTL};

/// Attribute: the holder's owner id.
pub const OWNER: &str = "owner";
/// Attribute: the fencing token.
pub const TOKEN: &str = "token";
/// Attribute: expiry, ms since epoch.
pub const EXPIRES_AT: &str = "expires_at";
/// Attribute: when the current holder acquired it.
pub const ACQUIRED_AT: &str = "acquired_at";
/// Attribute: when the lease was last released.
pub const RELEASED_AT: &str = "released_at";

/// Acquire: absent or strictly expired.
const ACQUIRE_COND: &str = "attribute_not_exists(#pk) OR #exp < :now";
/// Release / renew / fence: still mine.
const MINE_COND: &str = "#owner = :owner AND #token = :token";

/// The lease item's key.
pub fn lease_key(job: &str) -> Item {
    key(format!("lease#{job}"), "lease")
}

/// Validated lease settings for one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// Job name (`pulse-sweep`).
    pub job: String,
    /// How long an acquisition holds.
    pub ttl: Duration,
    /// The schedule interval the TTL must stay below.
    pub interval: Duration,
    /// Declared bound on clock differences between nodes.
    pub clock_skew: Duration,
    /// Release after success too (one-shot work). Default: keep until expiry.
    pub release_on_success: bool,
    /// Delete the item by TTL this long after its last acquisition ([`LeaseConfig::expire_after`]).
    /// `None` (a job's lease, one item for ever): kept.
    pub retention: Option<Duration>,
}

impl LeaseConfig {
    /// Refuses settings that cannot be correct: TTL ≥ interval, or TTL ≤ 2 × skew.
    pub fn new(
        job: impl Into<String>,
        ttl: Duration,
        interval: Duration,
        clock_skew: Duration,
    ) -> Result<Self, ConfigError> {
        let job = job.into();
        if job.is_empty() {
            return Err(ConfigError::invalid("job", "job name is empty"));
        }
        if ttl >= interval {
            return Err(ConfigError::invalid(
                "lease ttl",
                format!(
                    "lease TTL {ttl:?} must be below the schedule interval {interval:?} for job `{job}`: \
                     a lease that lasts until the next tick lets a worker waking at expiry lose its own run"
                ),
            ));
        }
        if ttl <= clock_skew * 2 {
            return Err(ConfigError::invalid(
                "lease ttl",
                format!("lease TTL {ttl:?} must exceed twice the clock-skew bound {clock_skew:?} for job `{job}`"),
            ));
        }
        Ok(Self { job, ttl, interval, clock_skew, release_on_success: false, retention: None })
    }

    /// A lease that names a run (a shard of one boundary's run: one item per run and shard) is
    /// dead weight once the run is over: its item expires by TTL `retention` after its last
    /// acquisition. Its fencing token restarts at 1 if the key is ever taken again, which is safe
    /// only because no holder outlives `retention` (a Lambda runs at most 15 minutes).
    pub fn expire_after(mut self, retention: Duration) -> Self {
        self.retention = Some(retention);
        self
    }

    /// Opts in to releasing after success (one-shot work only).
    pub fn release_on_success(mut self, yes: bool) -> Self {
        self.release_on_success = yes;
        self
    }
}

/// Until when the holder in a lease item `old` (as it was before an acquisition) could have
/// written: its release (`expires_at` 0), else its expiry (it starts no step past its safe end,
/// before the expiry, and a write of one started before, still in flight, is refused by the fence
/// once another holder has acquired); [`Millis::MAX`] for a release that did not say when (written before
/// `released_at` was). `None` for an item no one held. Pure.
pub fn held_until(old: &Item) -> Option<Millis> {
    get_s(old, OWNER)?;
    Some(match get_i64(old, EXPIRES_AT) {
        Some(0) => get_i64(old, RELEASED_AT).unwrap_or(Millis::MAX),
        Some(e) => e,
        None => Millis::MAX,
    })
}

/// A held lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Job.
    pub job: String,
    /// This holder's id.
    pub owner: String,
    /// Fencing token of this acquisition.
    pub token: u64,
    /// Expiry, ms.
    pub expires_at_ms: Millis,
    /// Until when the holder before this one could have written under the lease (its release,
    /// else its expiry); `None` when there was none, [`Millis::MAX`] when that is not known.
    pub held_until_ms: Option<Millis>,
}

impl Lease {
    /// Whether another holder could have written since `at_ms` (less the skew bound): a plan made
    /// from a read at `at_ms` may not show its work.
    pub fn held_since(&self, at_ms: Millis, skew: Duration) -> bool {
        self.held_until_ms.is_some_and(|u| u >= at_ms - skew.as_millis() as i64)
    }

    /// The last instant at which this holder may start a step, given the clock-skew bound.
    pub fn safe_until_ms(&self, skew: Duration) -> Millis {
        self.expires_at_ms - skew.as_millis() as i64
    }

    /// The fence that ties a write to this acquisition.
    pub fn fence(&self, control_table: &str) -> Fence {
        Fence { table: control_table.to_string(), job: self.job.clone(), owner: self.owner.clone(), token: self.token }
    }
}

/// Result of an acquire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    /// We hold it.
    Acquired(Lease),
    /// Someone else does, until `until_ms`.
    Held {
        /// Current holder.
        owner: String,
        /// Their token.
        token: u64,
        /// Their expiry.
        until_ms: Millis,
    },
}

/// Result of a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Released: the next acquirer need not wait for expiry.
    Released,
    /// Not ours any more (taken over): nothing changed.
    NotOwner,
}

/// Result of a renewal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renew {
    /// Extended.
    Renewed(Lease),
    /// Another holder took over: stop now.
    Lost,
}

/// What the lease item says, for operators.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LeaseState {
    /// Holder.
    pub owner: String,
    /// Token.
    pub token: u64,
    /// Expiry, ms.
    pub expires_at_ms: Millis,
}

/// Lease operations on one control table.
#[derive(Debug, Clone)]
pub struct LeaseStore {
    db: Db,
    table: String,
    clock: SharedClock,
}

impl LeaseStore {
    /// Leases in `table` (the control table), timed by `clock`.
    pub fn new(db: Db, table: impl Into<String>, clock: SharedClock) -> Self {
        Self { db, table: table.into(), clock }
    }

    /// The control table name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Tries to take the lease for `cfg.job` as `owner`.
    pub async fn acquire(&self, cfg: &LeaseConfig, owner: &str) -> Result<Acquire, DbError> {
        let now = self.clock.now_ms();
        let exp = now + cfg.ttl.as_millis() as i64;
        let req = self
            .db
            .client()
            .update_item()
            .table_name(&self.table)
            .set_key(Some(lease_key(&cfg.job)))
            .update_expression(match cfg.retention {
                None => "SET #owner = :owner, #exp = :exp, #acq = :now ADD #token :one",
                Some(_) => "SET #owner = :owner, #exp = :exp, #acq = :now, #ttl = :ttl ADD #token :one",
            })
            .condition_expression(ACQUIRE_COND)
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#owner", OWNER)
            .expression_attribute_names("#exp", EXPIRES_AT)
            .expression_attribute_names("#acq", ACQUIRED_AT)
            .expression_attribute_names("#token", TOKEN)
            .expression_attribute_values(":owner", av_s(owner))
            .expression_attribute_values(":exp", av_n(exp))
            .expression_attribute_values(":now", av_n(now))
            .expression_attribute_values(":one", av_n(1))
            .return_values(ReturnValue::AllOld)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        let req = match cfg.retention {
            None => req,
            Some(r) => req
                .expression_attribute_names("#ttl", TTL)
                .expression_attribute_values(":ttl", av_n(now / 1000 + r.as_secs() as i64)),
        };
        match self.db.update(req).await {
            Ok(out) => {
                // The item as it was: the token this acquisition added one to (none: a first
                // acquisition, or a run's lease its TTL removed), and the holder before.
                let old = out.attributes().filter(|a| !a.is_empty());
                Ok(Acquire::Acquired(Lease {
                    job: cfg.job.clone(),
                    owner: owner.to_string(),
                    token: old.and_then(|a| get_u64(a, TOKEN)).unwrap_or(0) + 1,
                    expires_at_ms: exp,
                    held_until_ms: old.and_then(held_until),
                }))
            }
            Err(DbError::ConditionFailed { item, .. }) => {
                let item = item.unwrap_or_default();
                // Our own acquisition, applied, whose answer was lost and which the SDK sent
                // again: the condition now fails on our own lease. Owner ids are unique per
                // invocation, so this is ours, with the token the first attempt added.
                if get_s(&item, OWNER) == Some(owner) && get_i64(&item, EXPIRES_AT).is_some_and(|e| e >= now) {
                    return Ok(Acquire::Acquired(Lease {
                        job: cfg.job.clone(),
                        owner: owner.to_string(),
                        token: get_u64(&item, TOKEN).unwrap_or(0),
                        expires_at_ms: get_i64(&item, EXPIRES_AT).unwrap_or(exp),
                        // The answer that said who held it before was lost.
                        held_until_ms: Some(Millis::MAX),
                    }));
                }
                Ok(Acquire::Held {
                    owner: get_s(&item, OWNER).unwrap_or("?").to_string(),
                    token: get_u64(&item, TOKEN).unwrap_or(0),
                    until_ms: get_i64(&item, EXPIRES_AT).unwrap_or(0),
                })
            }
            Err(e) => Err(e),
        }
    }

    fn mine<B>(b: B, lease: &Lease) -> B
    where
        B: MineBuilder,
    {
        b.names("#owner", OWNER)
            .names("#token", TOKEN)
            .values(":owner", av_s(&lease.owner))
            .values(":token", av_n(lease.token))
    }

    /// Gives the lease up (expiry set to 0) if it is still ours.
    pub async fn release(&self, lease: &Lease) -> Result<Release, DbError> {
        let req = self
            .db
            .client()
            .update_item()
            .table_name(&self.table)
            .set_key(Some(lease_key(&lease.job)))
            .update_expression("SET #exp = :zero, #rel = :now")
            .condition_expression(MINE_COND)
            .expression_attribute_names("#exp", EXPIRES_AT)
            .expression_attribute_names("#rel", RELEASED_AT)
            .expression_attribute_values(":zero", av_n(0))
            .expression_attribute_values(":now", av_n(self.clock.now_ms()));
        Ok(if condition_held(self.db.update(Self::mine(req, lease)).await)? {
            Release::Released
        } else {
            Release::NotOwner
        })
    }

    /// Extends the lease by `ttl` from now if it is still ours (heartbeat between steps).
    pub async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Renew, DbError> {
        let exp = self.clock.now_ms() + ttl.as_millis() as i64;
        let req = self
            .db
            .client()
            .update_item()
            .table_name(&self.table)
            .set_key(Some(lease_key(&lease.job)))
            .update_expression("SET #exp = :exp")
            .condition_expression(MINE_COND)
            .expression_attribute_names("#exp", EXPIRES_AT)
            .expression_attribute_values(":exp", av_n(exp));
        Ok(if condition_held(self.db.update(Self::mine(req, lease)).await)? {
            Renew::Renewed(Lease { expires_at_ms: exp, ..lease.clone() })
        } else {
            Renew::Lost
        })
    }

    /// The lease item as it is (strongly consistent), for status and tests.
    pub async fn read(&self, job: &str) -> Result<Option<LeaseState>, DbError> {
        Ok(self.db.get_strong(&self.table, lease_key(job)).await?.as_ref().map(|i| LeaseState {
            owner: get_s(i, OWNER).unwrap_or("").to_string(),
            token: get_u64(i, TOKEN).unwrap_or(0),
            expires_at_ms: get_i64(i, EXPIRES_AT).unwrap_or(0),
        }))
    }

    /// Runs `action` if the lease can be taken; releases on failure, and on success only when
    /// `cfg.release_on_success`. Returns `Ok(None)` when another holder has it.
    pub async fn run_if_leader<T, E, F, Fut>(
        &self,
        cfg: &LeaseConfig,
        owner: &str,
        action: F,
    ) -> Result<Option<T>, LeaderError<E>>
    where
        F: FnOnce(Lease) -> Fut,
        Fut: std::future::Future<Output = Result<T, E>>,
    {
        let lease = match self.acquire(cfg, owner).await.map_err(LeaderError::Db)? {
            Acquire::Acquired(l) => l,
            Acquire::Held { .. } => return Ok(None),
        };
        match action(lease.clone()).await {
            Ok(v) => {
                if cfg.release_on_success {
                    self.release(&lease).await.map_err(LeaderError::Db)?;
                }
                Ok(Some(v))
            }
            Err(e) => {
                // Let another worker retry this window; the work is idempotent per unit.
                if let Err(re) = self.release(&lease).await {
                    tracing::warn!(job = %cfg.job, error = %re, "lease release after failure failed; it will expire");
                }
                Err(LeaderError::Action(e))
            }
        }
    }
}

/// Either the lease bookkeeping or the action failed.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError<E> {
    /// Lease I/O.
    #[error("lease: {0}")]
    Db(#[source] DbError),
    /// The action.
    #[error("action: {0}")]
    Action(#[source] E),
}

/// Uniform `names`/`values` over the fluent builders that take conditions.
pub trait MineBuilder: Sized {
    /// Adds an expression attribute name.
    fn names(self, k: &str, v: &str) -> Self;
    /// Adds an expression attribute value.
    fn values(self, k: &str, v: aws_sdk_dynamodb::types::AttributeValue) -> Self;
}

impl MineBuilder for aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
    fn names(self, k: &str, v: &str) -> Self {
        self.expression_attribute_names(k, v)
    }
    fn values(self, k: &str, v: aws_sdk_dynamodb::types::AttributeValue) -> Self {
        self.expression_attribute_values(k, v)
    }
}

/// "The lease is still mine", attachable to any transactional write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// Control table.
    pub table: String,
    /// Job.
    pub job: String,
    /// Owner.
    pub owner: String,
    /// Token.
    pub token: u64,
}

impl Fence {
    /// A ConditionCheck on the lease item: owner and token unchanged.
    pub fn condition_check(&self) -> TransactWriteItem {
        let cc = ConditionCheck::builder()
            .table_name(&self.table)
            .set_key(Some(lease_key(&self.job)))
            .condition_expression(MINE_COND)
            .expression_attribute_names("#owner", OWNER)
            .expression_attribute_names("#token", TOKEN)
            .expression_attribute_values(":owner", av_s(&self.owner))
            .expression_attribute_values(":token", av_n(self.token))
            .build()
            .expect("condition check has table, key and condition");
        TransactWriteItem::builder().condition_check(cc).build()
    }
}

/// Outcome of a fenced write.
#[derive(Debug, Clone, PartialEq)]
pub enum Fenced {
    /// Written.
    Written,
    /// The lease moved on: this writer is a stale leader; nothing was written.
    Stale,
    /// The write's own condition failed (item `index` of `writes`, with the item when asked).
    ConditionFailed {
        /// Which write (0-based, in `writes`).
        index: usize,
        /// The item as it was.
        item: Option<Item>,
    },
}

/// Writes `writes` in one transaction together with the fence; all or nothing.
pub async fn fenced_write(db: &Db, fence: &Fence, writes: Vec<TransactWriteItem>) -> Result<Fenced, DbError> {
    let mut items = Vec::with_capacity(writes.len() + 1);
    items.push(fence.condition_check());
    items.extend(writes);
    match db.transact_write(items).await {
        Ok(_) => Ok(Fenced::Written),
        Err(DbError::TransactionCanceled { reasons }) => {
            if reasons.first().is_some_and(|r| r.condition_failed()) {
                return Ok(Fenced::Stale);
            }
            if let Some((i, r)) = reasons.iter().enumerate().skip(1).find(|(_, r)| r.condition_failed()) {
                return Ok(Fenced::ConditionFailed { index: i - 1, item: r.item.clone() });
            }
            Err(DbError::TransactionCanceled { reasons })
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_must_be_below_interval_and_above_skew() {
        let s = Duration::from_secs;
        assert!(LeaseConfig::new("j", s(60), s(60), s(1)).is_err(), "ttl == interval");
        assert!(LeaseConfig::new("j", s(61), s(60), s(1)).is_err(), "ttl > interval");
        assert!(LeaseConfig::new("j", s(2), s(60), s(1)).is_err(), "ttl <= 2 skew");
        let e = LeaseConfig::new("j", s(60), s(60), s(1)).unwrap_err().to_string();
        assert!(e.contains("below the schedule interval"), "{e}");
        let ok = LeaseConfig::new("j", s(55), s(60), s(2)).unwrap();
        assert!(!ok.release_on_success);
    }

    #[test]
    fn safe_until_subtracts_skew() {
        let l = Lease { job: "j".into(), owner: "o".into(), token: 1, expires_at_ms: 10_000, held_until_ms: None };
        assert_eq!(l.safe_until_ms(Duration::from_millis(1500)), 8_500);
    }

    /// The holder before: until its release, else its expiry; a release that did not say when is
    /// taken as just now; an item no one held, as no one.
    #[test]
    fn the_holder_before_could_write_until_its_release_else_its_expiry() {
        let item = |pairs: &[(&str, &str)]| -> Item {
            pairs
                .iter()
                .map(|(k, v)| {
                    let v =
                        if *k == OWNER { av_s(*v) } else { aws_sdk_dynamodb::types::AttributeValue::N(v.to_string()) };
                    (k.to_string(), v)
                })
                .collect()
        };
        assert_eq!(held_until(&item(&[(OWNER, "a"), (EXPIRES_AT, "9000"), (RELEASED_AT, "100")])), Some(9_000));
        assert_eq!(held_until(&item(&[(OWNER, "a"), (EXPIRES_AT, "0"), (RELEASED_AT, "4000")])), Some(4_000));
        assert_eq!(held_until(&item(&[(OWNER, "a"), (EXPIRES_AT, "0")])), Some(Millis::MAX));
        assert_eq!(held_until(&item(&[(TOKEN, "3")])), None);
        let lease =
            |held| Lease { job: "j".into(), owner: "o".into(), token: 2, expires_at_ms: 0, held_until_ms: held };
        let skew = Duration::from_millis(500);
        assert!(lease(Some(4_000)).held_since(4_200, skew), "within the skew of the read");
        assert!(!lease(Some(4_000)).held_since(4_600, skew), "released before the read");
        assert!(!lease(None).held_since(0, skew));
        assert!(lease(Some(Millis::MAX)).held_since(i64::MAX / 2, skew), "not known: taken as since");
    }
}
