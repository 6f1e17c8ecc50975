//! The fleet: how many drains run at once, and how a drain stopped by its deadline hands on.
//!
//! Lambda's own concurrency is the engine, as for the sweep's shard workers: a drain is an
//! invocation of this very function, started asynchronously (`InvocationType: Event`, "Invoke",
//! AWS Lambda API reference) with a [`DrainEvent`] naming its **slot** (0 to `drains − 1`).
//! Slots keep the fleet at most `drains` wide: each has a lease in the control table
//! (`lease#queue-worker#drain#<k>`, [`tickwork::lease`]), taken by whoever starts a drain in it
//! and handed to the drain through its event.
//!
//! 1. **Grow**: a drain started by a signal (the stream, the safety poll) whose poll comes back
//!    full has seen a backlog. It takes a free slot for itself, then every free slot among the
//!    first [`wanted`] and starts a drain in each (one conditional write per slot tried, one
//!    Invoke per drain started), once per invocation. A poll reads at least two keys a slot, so a
//!    full page can want the whole fleet.
//! 2. **Hand on**: a slot drain that stops at its deadline with work left releases its slot and
//!    starts its successor in it at once (the release, an acquire, an Invoke); one that finds
//!    the queue empty releases its slot and ends. A drain started by the stream or the safety
//!    poll that stops with work left starts slot drains the same way. Nothing waits for the
//!    hourly safety poll, which is left for faults: a drain that died, an Invoke that failed.
//! 3. An idle queue starts nothing: a stream signal or a safety poll that finds nothing writes
//!    nothing here.
//!
//! Starting drains is best effort: a failed Invoke releases its slot and is logged; an invocation
//! throttled by the function's reserved concurrency waits in Lambda's asynchronous queue; two
//! drains that end up in one slot only race for claims, which are conditional. The slots bound
//! the fleet's width, not its correctness.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use tickwork::config::ConfigError;
use tickwork::lease::{Acquire, Lease, LeaseConfig, LeaseStore};
use tickwork_lambda::BadEvent;

pub use crate::handon::HANDED_RETRIES;
use crate::handon::{Link, MAX_FAILED_LINKS};

/// The key of a drain event.
pub const DRAIN_EVENT: &str = "tickwork-drain";

/// Items a poll must show per drain wanted: a backlog of `n` ready items wants `n / 2` drains.
pub const ITEMS_PER_DRAIN: usize = 2;

/// What a slot drain is started with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainEvent {
    /// Its slot.
    pub slot: u32,
    /// The slot's lease, taken on its behalf.
    pub owner: String,
    /// The lease's fencing token.
    pub token: u64,
    /// What its predecessor handed on: retries to wait for ([`crate::drain`], step 6), and after
    /// a failed drain the count and the backoff ([`crate::handon`]).
    pub link: Link,
}

impl DrainEvent {
    /// The invocation's payload.
    pub fn envelope(&self) -> Value {
        let mut d = serde_json::json!({ "slot": self.slot, "owner": self.owner, "token": self.token });
        if !self.link.retry_at_ms.is_empty() {
            d["retry_at_ms"] = self.link.retry_at_ms.clone().into();
        }
        if self.link.failures > 0 {
            d["failures"] = self.link.failures.into();
        }
        if let Some(at) = self.link.not_before_ms {
            d["not_before_ms"] = at.into();
        }
        serde_json::json!({ DRAIN_EVENT: d })
    }

    /// `None` when `event` is not a drain event; an error naming the field when it says it is one
    /// and is not.
    pub fn parse(event: &Value) -> Option<Result<Self, BadEvent>> {
        let d = event.as_object()?.get(DRAIN_EVENT)?;
        let bad = |m: &str| Some(Err(BadEvent(format!("`{DRAIN_EVENT}.{m}"))));
        let Some(d) = d.as_object() else { return bad("` must be an object") };
        let Some(slot) = d.get("slot").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok()) else {
            return bad("slot` must be a small whole number");
        };
        let Some(owner) = d.get("owner").and_then(Value::as_str).filter(|o| !o.is_empty() && o.len() <= 200) else {
            return bad("owner` must be a string of 1 to 200 characters");
        };
        let Some(token) = d.get("token").and_then(Value::as_u64) else {
            return bad("token` must be a whole number");
        };
        let retry_at_ms = match d.get("retry_at_ms") {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => {
                let list: Option<Vec<i64>> = v.as_array().and_then(|a| {
                    (a.len() <= HANDED_RETRIES)
                        .then(|| a.iter().map(|n| n.as_i64().filter(|n| *n > 0)).collect())
                        .flatten()
                });
                match list {
                    Some(l) => l,
                    None => {
                        return bad(&format!(
                            "retry_at_ms` must be a list of at most {} positive whole numbers of milliseconds",
                            HANDED_RETRIES
                        ))
                    }
                }
            }
        };
        let failures = match d.get("failures") {
            None | Some(Value::Null) => 0,
            Some(v) => match v.as_u64().filter(|n| *n <= u64::from(MAX_FAILED_LINKS)) {
                Some(n) => n as u32,
                None => return bad(&format!("failures` must be a whole number from 0 to {MAX_FAILED_LINKS}")),
            },
        };
        let not_before_ms = match d.get("not_before_ms") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_i64().filter(|n| *n > 0) {
                Some(n) => Some(n),
                None => return bad("not_before_ms` must be a positive whole number of milliseconds"),
            },
        };
        let link = Link { retry_at_ms, failures, not_before_ms };
        Some(Ok(Self { slot, owner: owner.to_string(), token, link }))
    }

    /// The slot's lease, as held for this drain.
    fn lease(&self) -> Lease {
        Lease {
            job: slot_job(self.slot),
            owner: self.owner.clone(),
            token: self.token,
            expires_at_ms: 0,
            held_until_ms: None,
        }
    }
}

/// The lease job of slot `k`.
pub fn slot_job(k: u32) -> String {
    format!("{}#drain#{k}", crate::config::JOB)
}

/// Drains a poll of `seen` keys (a full page) asks for, at most `cap`. Pure.
pub fn wanted(seen: usize, cap: u32) -> u32 {
    (seen / ITEMS_PER_DRAIN).clamp(1, cap.max(1) as usize) as u32
}

/// Starts drain invocations.
pub trait Invoker: Send + Sync + Debug {
    /// Starts one invocation of the worker with `event`, asynchronously.
    fn invoke<'a>(&'a self, event: &'a Value) -> BoxFuture<'a, Result<(), String>>;
}

/// The deployed engine: asynchronous invocations of this very function.
#[derive(Debug, Clone)]
pub struct LambdaInvoker {
    client: aws_sdk_lambda::Client,
    function: String,
}

impl LambdaInvoker {
    /// Invokes `function` with `client`.
    pub fn new(client: aws_sdk_lambda::Client, function: impl Into<String>) -> Self {
        Self { client, function: function.into() }
    }

    /// The engine for the function this process runs as (`AWS_LAMBDA_FUNCTION_NAME`, set by
    /// Lambda); `None` outside Lambda: a drain then hands on to nobody.
    pub fn from_sdk(sdk: &aws_config::SdkConfig) -> Option<Self> {
        let function = std::env::var("AWS_LAMBDA_FUNCTION_NAME").ok().filter(|f| !f.is_empty())?;
        Some(Self::new(tickwork_lambda::lambda_client(sdk), function))
    }
}

impl Invoker for LambdaInvoker {
    fn invoke<'a>(&'a self, event: &'a Value) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            self.client
                .invoke()
                .function_name(&self.function)
                .invocation_type(aws_sdk_lambda::types::InvocationType::Event)
                .payload(aws_sdk_lambda::primitives::Blob::new(event.to_string()))
                .send()
                .await
                .map(|_| ())
                .map_err(|e| tickwork_lambda::error_chain(&e))
        })
    }
}

/// The fleet's settings and engine.
#[derive(Debug, Clone)]
pub struct Fleet {
    leases: LeaseStore,
    invoker: Option<Arc<dyn Invoker>>,
    /// Drains at once at most (`TICKWORK_WORKER_DRAINS`).
    pub cap: u32,
    slot_cfg: Vec<LeaseConfig>,
}

impl Fleet {
    /// Takes the first free slot for the calling drain itself.
    pub(crate) async fn adopt(&self) -> Option<DrainEvent> {
        tickwork::iam::acting_as(crate::config::ROLE, async {
            for k in 0..self.cap {
                let owner = tickwork_lambda::owner_id("drain");
                if let Ok(Acquire::Acquired(l)) = self.leases.acquire(&self.slot_cfg[k as usize], &owner).await {
                    return Some(DrainEvent { slot: k, owner: l.owner, token: l.token, link: Link::default() });
                }
            }
            None
        })
        .await
    }

    /// A fleet of at most `cap` drains, each slot held for `hold` (the function's timeout plus the
    /// clock-skew bound: a slot outlives the drain in it).
    pub fn new(
        leases: LeaseStore,
        invoker: Option<Arc<dyn Invoker>>,
        cap: u32,
        hold: Duration,
        skew: Duration,
    ) -> Result<Self, ConfigError> {
        let slot_cfg = (0..cap.max(1))
            .map(|k| LeaseConfig::new(slot_job(k), hold, Duration::from_secs(7 * 86_400), skew))
            .collect::<Result<_, _>>()?;
        Ok(Self { leases, invoker, cap: cap.max(1), slot_cfg })
    }

    /// Starts drains in free slots among the first `want` (not `except`, the caller's own); answers
    /// how many started.
    pub async fn ensure(&self, want: u32, except: Option<u32>) -> u32 {
        let Some(invoker) = &self.invoker else { return 0 };
        tickwork::iam::acting_as(crate::config::ROLE, async {
            let mut started = 0;
            for k in (0..want.min(self.cap)).filter(|k| Some(*k) != except) {
                started += u32::from(self.start(invoker.as_ref(), k, &Link::default()).await);
            }
            started
        })
        .await
    }

    /// Starts one drain with `link` in the first free slot, trying every slot (a drain outside a
    /// slot hands on so: slot 0 busy is no reason to leave its work to the safety poll). Answers
    /// whether one started.
    pub async fn hand_on_any(&self, link: &Link) -> bool {
        let Some(invoker) = &self.invoker else { return false };
        tickwork::iam::acting_as(crate::config::ROLE, async {
            for k in 0..self.cap {
                if self.start(invoker.as_ref(), k, link).await {
                    return true;
                }
            }
            false
        })
        .await
    }

    /// Takes slot `k` for a new drain and starts it; `false` when the slot is busy or the start
    /// failed (the slot is then given back).
    async fn start(&self, invoker: &dyn Invoker, k: u32, link: &Link) -> bool {
        // A slot past the cap (a successor named by a fleet larger before a deploy) is not started.
        let Some(cfg) = self.slot_cfg.get(k as usize) else { return false };
        let owner = tickwork_lambda::owner_id("drain");
        let lease = match self.leases.acquire(cfg, &owner).await {
            Ok(Acquire::Acquired(l)) => l,
            Ok(Acquire::Held { .. }) => return false,
            Err(e) => {
                tracing::warn!(slot = k, error = %e, "drain slot unreadable; not started");
                return false;
            }
        };
        let event = DrainEvent { slot: k, owner: lease.owner.clone(), token: lease.token, link: link.clone() };
        match invoker.invoke(&event.envelope()).await {
            Ok(()) => {
                tracing::info!(slot = k, "drain started");
                true
            }
            Err(e) => {
                tracing::warn!(slot = k, error = %e, "a drain did not start; the slot is given back");
                let _ = self.leases.release(&lease).await;
                false
            }
        }
    }

    /// A slot drain's end: with work left its successor starts in the same slot at once;
    /// without, the slot is given back.
    pub async fn end_slot(&self, ev: &DrainEvent, work_left: bool) -> bool {
        self.end_slot_with(ev, work_left.then(Link::default).as_ref()).await
    }

    /// [`Fleet::end_slot`], its successor (when `next` is one, [`crate::handon::next_link`])
    /// started with that link. When the slot cannot be released (the control table failing as
    /// the drain did), the successor is handed the slot's lease as it is, still this drain's
    /// until it expires: a release that fails would otherwise leave the slot taken and the work
    /// to the safety poll.
    pub async fn end_slot_with(&self, ev: &DrainEvent, next: Option<&Link>) -> bool {
        tickwork::iam::acting_as(crate::config::ROLE, async {
            let released = match self.leases.release(&ev.lease()).await {
                Ok(_) => true,
                Err(e) => {
                    tracing::warn!(slot = ev.slot, error = %e, "drain slot not released; it frees itself at expiry");
                    false
                }
            };
            let (Some(link), Some(invoker)) = (next, &self.invoker) else { return false };
            if released {
                return self.start(invoker.as_ref(), ev.slot, link).await;
            }
            let same = DrainEvent { link: link.clone(), ..ev.clone() };
            match invoker.invoke(&same.envelope()).await {
                Ok(()) => {
                    tracing::info!(slot = ev.slot, "drain started in the slot it was handed");
                    true
                }
                Err(e) => {
                    tracing::warn!(slot = ev.slot, error = %e, "a drain did not start");
                    false
                }
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drain_event_round_trips_and_a_bad_one_is_named() {
        let e = DrainEvent { slot: 3, owner: "drain-1".into(), token: 7, link: Link::default() };
        assert_eq!(DrainEvent::parse(&e.envelope()), Some(Ok(e.clone())));
        assert_eq!(e.envelope()[DRAIN_EVENT].as_object().unwrap().len(), 3, "an empty link adds nothing");
        let link = Link {
            retry_at_ms: vec![1_795_910_400_000, 1_795_910_401_000],
            failures: 2,
            not_before_ms: Some(1_795_910_420_000),
        };
        let later = DrainEvent { link, ..e };
        assert_eq!(DrainEvent::parse(&later.envelope()), Some(Ok(later)));
        for (field, value) in [("failures", serde_json::json!(4)), ("not_before_ms", serde_json::json!(-1))] {
            let mut ev = serde_json::json!({DRAIN_EVENT: {"slot": 1, "owner": "o", "token": 1}});
            ev[DRAIN_EVENT][field] = value;
            assert!(DrainEvent::parse(&ev).unwrap().unwrap_err().to_string().contains(field), "{field}");
        }
        let bad = DrainEvent::parse(
            &serde_json::json!({DRAIN_EVENT: {"slot": 1, "owner": "o", "token": 1, "retry_at_ms": "soon"}}),
        );
        assert!(bad.unwrap().unwrap_err().to_string().contains("retry_at_ms"));
        assert_eq!(DrainEvent::parse(&serde_json::json!({"Records": []})), None);
        let bad = DrainEvent::parse(&serde_json::json!({DRAIN_EVENT: {"slot": -1, "owner": "o", "token": 1}}));
        assert!(bad.unwrap().unwrap_err().to_string().contains("slot"));
        let bad = DrainEvent::parse(&serde_json::json!({DRAIN_EVENT: {"slot": 1, "owner": "", "token": 1}}));
        assert!(bad.unwrap().unwrap_err().to_string().contains("owner"));
    }

    #[test]
    fn a_backlog_wants_a_drain_per_two_items_up_to_the_cap() {
        assert_eq!(wanted(10, 16), 5);
        assert_eq!(wanted(100, 16), 16);
        assert_eq!(wanted(1, 16), 1);
        assert_eq!(wanted(10, 0), 1);
    }
}
