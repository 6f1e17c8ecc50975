//! The fleet as one drain sees it: where it stands in the fleet, the drains it starts when a poll
//! shows a backlog (fleet step 1), and the successor it starts **the moment its budget ends**.
//!
//! Why then, and not after its last settle: what runs when the budget ends has the handler's
//! timeout to end and a settle to be written, and the hand-on after them (a release, an acquire,
//! an Invoke) had only the deadline margin left. Lambda ends an invocation at its deadline
//! whatever it is doing ("Configuring Lambda function timeout", Lambda Developer Guide), so a
//! table slow for a moment (a throttle's retries, a loaded server) cut the hand-on off, and the
//! backlog and the retries the drain could not stay for waited for the hourly safety poll. Now a
//! drain stopped by its budget with work left, or with retries it cannot stay for, starts its
//! successor at once, beside its last units and settles ([`crate::handon::in_hand_retries`]). The link
//! names when the items still in hand come back if a unit fails, so the successor polls again
//! then; a drain that ends with more than its early link carried hands the rest to a free slot
//! ([`crate::handon::beyond`]).

use std::sync::Mutex;

use futures::future::BoxFuture;
use tickwork::clock::Millis;

use crate::fleet::{wanted, DrainEvent, Fleet};
use crate::handon::{handed_retries, next_link, Link};

/// Asks for more drains when a poll shows a backlog, and hands on when the budget ends.
pub trait Grow: Send + Sync {
    /// A poll came back full with `seen` keys.
    fn grow<'a>(&'a self, seen: usize) -> BoxFuture<'a, ()>;
    /// The drain's place in the fleet, `(slot, drains)`, when it has one: where in a page of keys
    /// it begins, so that drains start at different keys instead of racing for the first.
    fn place(&self) -> Option<(u32, u32)> {
        None
    }
    /// The budget ended at `now` with work left or not, and `retries` for the successor to
    /// poll again at: start it now. Nothing happens outside a fleet.
    fn hand_on_at_stop<'a>(&'a self, work_left: bool, retries: Vec<Millis>, now: Millis) -> BoxFuture<'a, ()> {
        let _ = (work_left, retries, now);
        Box::pin(async {})
    }
}

/// A drain on its own (tests, the cost model's replay, tools).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoFleet;

impl Grow for NoFleet {
    fn grow<'a>(&'a self, _: usize) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// What became of a hand-on at the budget's end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Early {
    /// The drain's slot was given up (its successor runs in it, or it is free).
    pub slot_ended: bool,
    /// The link a successor was started with; `None` when none started.
    pub handed: Option<Link>,
}

/// The fleet as seen by one drain: its own slot, if it was started in one; a drain started by the
/// stream or the safety poll takes a free slot of its own when it sees a backlog, so that it is
/// one of the fleet's `drains` (and hands on like the others), and starts the rest. A slot drain
/// grows nothing: the drain that saw the backlog first started the fleet.
#[derive(Debug)]
pub struct Growing<'a> {
    /// The fleet.
    pub fleet: &'a Fleet,
    /// The drain's own slot, when it was started in one.
    pub slot: Option<u32>,
    own: Option<DrainEvent>,
    /// An invocation's budget, the most a successor can stay for ([`handed_retries`]).
    full_budget: Millis,
    adopted: Mutex<Option<DrainEvent>>,
    early: Mutex<Option<Early>>,
}

impl<'a> Growing<'a> {
    /// The fleet for a drain started by `own` (or by a signal: `None`) in an invocation whose
    /// budget is `full_budget` ms.
    pub fn new(fleet: &'a Fleet, own: Option<DrainEvent>, full_budget: Millis) -> Self {
        let slot = own.as_ref().map(|e| e.slot);
        Self { fleet, slot, own, full_budget, adopted: Default::default(), early: Default::default() }
    }

    /// The slot a signalled drain took for itself, to be handed on as any slot is.
    pub fn adopted(&self) -> Option<DrainEvent> {
        self.adopted.lock().expect("adopted slot").clone()
    }

    /// The drain's slot: the one it was started in, or the one it took.
    pub fn own(&self) -> Option<DrainEvent> {
        self.own.clone().or_else(|| self.adopted())
    }

    /// The hand-on at the budget's end, when there was one.
    pub fn early(&self) -> Option<Early> {
        self.early.lock().expect("early hand-on").clone()
    }
}

impl Grow for Growing<'_> {
    fn place(&self) -> Option<(u32, u32)> {
        self.slot.or_else(|| self.adopted().map(|e| e.slot)).map(|k| (k, self.fleet.cap))
    }

    fn grow<'a>(&'a self, seen: usize) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if self.slot.is_some() || self.adopted().is_some() {
                return;
            }
            let own = self.fleet.adopt().await;
            let want = wanted(seen, self.fleet.cap);
            let started = self.fleet.ensure(want, own.as_ref().map(|e| e.slot)).await;
            tracing::info!(seen, want, started, own = ?own.as_ref().map(|e| e.slot), "backlog: fleet grown");
            *self.adopted.lock().expect("adopted slot") = own;
        })
    }

    fn hand_on_at_stop<'a>(&'a self, work_left: bool, retries: Vec<Millis>, now: Millis) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some(link) = next_link(false, work_left, &handed_retries(&retries, now, self.full_budget), 0, now)
            else {
                return;
            };
            let (slot_ended, started) = match self.own() {
                Some(ev) => (true, self.fleet.end_slot_with(&ev, Some(&link)).await),
                None => (false, self.fleet.hand_on_any(&link).await),
            };
            tracing::info!(
                started,
                retries = link.retry_at_ms.len(),
                "budget ended: successor started beside the last units"
            );
            *self.early.lock().expect("early hand-on") = Some(Early { slot_ended, handed: started.then_some(link) });
        })
    }
}
