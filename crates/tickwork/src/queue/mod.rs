//! A work queue in DynamoDB (`003_*`, done so that an empty poll is nearly free, a dead worker's
//! item comes back, and a poison item stops being retried).
//!
//! ## Table (`<prefix>-queue`)
//! Key `pk` = the item id, which is the producer's idempotency key (`daily-summary#2026-11-29#t42`).
//! Attributes: `kind`, `payload` (JSON text), `tenant`, `attempts`, `owner`, `state`
//! (`pending`|`claimed`|`done`|`dead`), `visible_at` (ms: due time while pending, claim expiry while
//! claimed), `created_at`, `last_error`, `ttl`, and off the happy path `trouble` and
//! `finished_at` (below).
//!
//! - GSI `ready`: key `shard` (`queue#<k>`, k = FNV-1a(id) mod shards) + `visible_at`, keys only.
//!   `shard` exists only while the item is live (pending or claimed), so finished and dead items
//!   leave the index (sparse). Finding work is a Query with the **key condition**
//!   `shard = :s AND visible_at <= :now`: a pending item and one whose claim expired come back
//!   the same way, and a claimed, unexpired item is never read (it is not in the key range).
//! - GSI `dead`: key `dlq` + `failed_at`, present only on dead letters, so they are listable.
//! - GSI `trouble`: key `trouble` + `created_at`, present only on an item that went wrong (a
//!   failure, a throttle, a death): its one tenant, kept on its dead letter and its done tombstone
//!   (with `finished_at`), or [`SEVERAL`] while an item of several tenants' units is live, so
//!   `tenants.explain` finds a tenant's troubles by key ([`Queue::troubles`]).
//!
//! ## Protocol
//! 1. **Enqueue**: PutItem `attribute_not_exists(pk)`; an existing id changes nothing
//!    ([`Enqueue::Exists`]). [`enqueue_item`] gives the same put for a caller's transaction.
//! 2. **Poll**: the Query above on one shard, oldest first (keys only: cheap).
//! 3. **Claim**: UpdateItem on the base table, conditional on `visible_at <= :now`, the item being
//!    live (the index lags the table), `state = pending` and `attempts < max_attempts`, setting
//!    `owner`, `state = claimed`, `visible_at = now + visibility` and `attempts + 1`. Losing the
//!    race is [`Claim::Taken`]. `attempts` after the claim is the claim's generation: later writes
//!    are conditional on `owner` *and* `attempts`, so a worker whose claim expired and was re-taken
//!    cannot touch it. An item whose claim expired unsettled (its worker died: a unit that aborts
//!    the process, runs out of memory, hangs past the deadline) is still `claimed`: the first
//!    write fails on it, and a second takes it over, conditional on that very claim, and answers
//!    it [`Job::died`] — the worker then isolates it (step 6). An item whose every claim so far
//!    died reaches `max_attempts` without ever failing cleanly: the next claim finds it
//!    exhausted and dead-letters it ([`Claim::DeadLettered`]) instead of re-running it forever. A
//!    failed condition on an item this owner already claimed is our own claim whose answer was
//!    lost and which the SDK sent again: it is recognised as claimed.
//! 4. **Finish**: the item becomes a `done` tombstone (out of the ready index, deleted by TTL after
//!    the retention), conditional on owner and generation. The design's "conditional delete"
//!    would forget the id, so a repeated enqueue of a finished id would run it again; the tombstone
//!    keeps the id as its own idempotency key for the retention, and TTL deletion is free.
//! 5. **Fail**: back to pending with `visible_at = now + backoff(attempts)` (exponential), or, when
//!    `attempts` reached the maximum, a dead letter (out of the ready index, into `dead`).
//! 6. **Extend**: pushes `visible_at` out while still owner (heartbeat for long items).
//!    **Split** ([`Queue::split`]): an item whose worker died is finished and its units put back
//!    as parts marked [`SUSPECT`], each run alone, in one transaction conditional on the claim.
//!    A settle leaves items behind only under ids derived from the claim ([`derived_id`]:
//!    `<id>#part#…`, `#rest#…` for a batch's remainder past the batch size or split by tenant
//!    (the failed units of a few tenants, an item a tenant), `#dead#…` for a unit's dead letter),
//!    which the worker's role may put and no other.
//! 7. **Pause**: a marker item in each ready shard (`pause#queue#<k>`, `visible_at = 0`) sorts
//!    before every real item, so the poll that looks for work finds it first: pausing the worker
//!    costs no read of its own ([`Queue::set_paused`]).
//!
//! ## Clock assumptions
//! Claim expiry uses the claimer's clock; a visibility timeout well above the clock-skew bound and
//! above the handler's run time keeps two owners from running one item at the same time. Even then
//! the conditional finish means at most one of them completes it.
//!
//! ## Layout
//! `schema` attributes and indexes; `config` settings; `item` what is enqueued; `store` the queue
//! on its table: enqueue, poll, pause and reading an item (steps 1, 2 and 7); `claim` step 3;
//! `settle` steps 4 to 6 (`transition` where each moves an item, pure); `dead` the dead letters; `trouble` a tenant's units that went wrong; `error` why a call failed. Every public item
//! is re-exported here: `tickwork::queue::X` is the one path to it.

mod claim;
mod config;
mod dead;
mod error;
mod item;
mod schema;
mod settle;
mod store;
mod transition;
mod trouble;

pub use claim::{Claim, Job};
pub use config::{queue_shards, QueueConfig};
pub use dead::DeadLetter;
pub use error::QueueError;
pub use item::{enqueue_item, Enqueue, EnqueueCounts, InvalidItem, NewItem};
pub use schema::{
    fnv1a, pause_marker, queue_table, shard_key, shard_of, ATTEMPTS, CREATED_AT, DEAD_INDEX, DLQ, FAILED_AT,
    FINISHED_AT, KIND, LAST_ERROR, MAX_ID_BYTES, MAX_PAYLOAD_BYTES, OWNER, PAUSE_PREFIX, PAYLOAD, READY_INDEX, SEVERAL,
    SHARD, STATE, SUSPECT, TENANT, TROUBLE, TROUBLE_INDEX, VISIBLE_AT,
};
pub use settle::{derived_id, BatchSettle, DEAD_PART, PART, REST};
pub use store::{Candidate, Queue};
pub use transition::Settle;
pub use trouble::{trouble_of, TroubleUnit, Troubles, TROUBLES_READ};
