//! What the control function answers: `{"ok": true, "result": …}` or `{"ok": false, "error":
//! {"type", "message", "field", "index"}}`.
//!
//! Why a refusal is an answer and not a function error: a refused request wrote nothing and will
//! be refused again, so an asynchronous invocation must not be retried by Lambda (it retries a
//! function error), and a caller's code can tell "fix the request" from "send it again". Only a failure of the stack
//! itself (DynamoDB unreachable, a table missing) is a function error. `Throttled` and `Raced`
//! are refusals a caller may send again as they are (the `retryable` flag says so).

use schemars::JsonSchema;
use serde::Serialize;

use crate::views::{NextFires, ScheduleList, TenantPage, TenantView};

/// Why a request, or one entry of a batch, was refused. Nothing was written for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub enum RefusalType {
    /// Not a JSON object, no `op`, or `op` not a string.
    Malformed,
    /// `op` names no operation.
    UnknownOperation,
    /// A field missing, unknown, of the wrong type or out of range.
    InvalidField,
    /// A schedule's spec, name, spread or DST policy that cannot be right.
    InvalidSpec,
    /// A zone that is not in the bundled IANA database.
    UnknownZone,
    /// No tenant with that id.
    NoSuchTenant,
    /// The tenant has no schedule or timer of that name.
    NoSuchSchedule,
    /// The request contradicts what is stored (a tenant added again in another zone: a move).
    Conflict,
    /// An id, a batch or a page past its limit.
    TooLarge,
    /// DynamoDB throttled the request after retries: send it again later. In a batch, entries
    /// before the throttled one may be written; the repeat finds them `unchanged`.
    Throttled,
    /// Something else changed the same item meanwhile: send it again (the repeat reads it anew).
    Raced,
}

impl RefusalType {
    /// Whether the same request may succeed if sent again unchanged.
    pub fn retryable(self) -> bool {
        matches!(self, RefusalType::Throttled | RefusalType::Raced)
    }
}

/// A refusal: its type, what is wrong, the field (a path such as `tenants[3].zone`) and, in a
/// batch, the entry's index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Refusal {
    /// Why.
    pub r#type: RefusalType,
    /// What is wrong, for a person.
    pub message: String,
    /// The field at fault, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The entry of a batch at fault.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    /// Whether sending the same request again may succeed.
    pub retryable: bool,
}

impl Refusal {
    /// A refusal of `type` saying `message`.
    pub fn new(t: RefusalType, message: impl Into<String>) -> Self {
        Refusal { r#type: t, message: message.into(), field: None, index: None, retryable: t.retryable() }
    }

    /// The field at fault.
    pub fn field(mut self, f: &str) -> Self {
        self.field = Some(f.to_string());
        self
    }

    /// The batch entry at fault; a bare field becomes that entry's (`zone` → `tenants[3].zone`).
    pub fn index(mut self, i: usize) -> Self {
        self.index = Some(i);
        self
    }

    /// This refusal as entry `i` of `batch`'s: its field prefixed with the entry's path.
    pub fn in_batch(mut self, batch: &str, i: usize) -> Self {
        self.field = Some(match self.field.take() {
            Some(f) => format!("{batch}[{i}].{f}"),
            None => format!("{batch}[{i}]"),
        });
        self.index = Some(i);
        self
    }
}

/// The whole answer.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Answer {
    /// `true`: `result` holds the operation's result; `false`: `error` says why nothing was done.
    pub ok: bool,
    /// The result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Outcome>,
    /// The refusal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Refusal>,
}

impl Answer {
    /// A result.
    pub fn ok(o: Outcome) -> Self {
        Answer { ok: true, result: Some(o), error: None }
    }

    /// A refusal.
    pub fn refused(r: Refusal) -> Self {
        Answer { ok: false, result: None, error: Some(r) }
    }
}

/// Each operation's result (the schema lists them; `op` decides which one comes back).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Outcome {
    /// `tenants.add`, `schedules.put`.
    Batch(BatchResult),
    /// `tenants.get`.
    Tenant(TenantView),
    /// `tenants.list`.
    Page(TenantPage),
    /// `tenants.explain`.
    Explain(Box<crate::explanation::Explanation>),
    /// `schedules.list`.
    Schedules(ScheduleList),
    /// `schedules.next`.
    Next(NextFires),
    /// `tenants.suspend`, `.resume`, `.move`, `.remove`, `schedules.pause`, `.resume`,
    /// `.remove`, `timers.at`, `timers.cancel`.
    Done(Done),
}

/// What a batch did, entry by entry: every entry is either in `entries` or in `refused`, by its
/// index. The entries not refused were written; sending the whole batch again is harmless (they
/// come back `unchanged`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct BatchResult {
    /// The entries done, in request order.
    pub entries: Vec<Entry>,
    /// The entries refused, each with its index and field.
    pub refused: Vec<Refusal>,
}

/// One entry of a batch that was done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Entry {
    /// Its index in the request.
    pub index: usize,
    /// The tenant's id.
    pub id: String,
    /// The schedule's name (`schedules.put`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What was done.
    pub outcome: Change,
}

/// What an operation changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Created.
    Added,
    /// Changed (a schedule changed is owed from now).
    Changed,
    /// Already so: nothing written.
    Unchanged,
    /// Removed.
    Removed,
}

/// A single operation's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Done {
    /// The tenant's id.
    pub id: String,
    /// The schedule's or timer's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What was done.
    pub outcome: Change,
    /// The tenant's zone, after a move.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The instant a timer fires (RFC 3339), after `timers.at`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fires_at: Option<String>,
}
