//! The library's errors as the control function answers them: a refusal a caller can act on, or
//! a failure of the stack. Pure: each mapping is decided here, with its tests, not at the call.
//!
//! The line between them: a refusal is about the request (it will be refused again, so no SDK
//! retries it), or a transient condition the caller is told to wait out (`Throttled`, `Raced`:
//! nothing was written); a failure of the stack is about the deployment (a table missing,
//! DynamoDB unreachable) and is a function error, which the caller's SDK and Lambda's
//! asynchronous retries repeat.

use tickwork::schedules::{ScheduleError, SpecError};
use tickwork::tenants::{InvalidTenant, MAX_TENANT_ID_BYTES};
use tickwork::DbError;

use crate::answer::{Outcome, Refusal, RefusalType};

/// An operation's result or its refusal; `Err` for a failure of the stack.
pub type Ran = Result<Result<Outcome, Refusal>, StackError>;

/// A failure of the stack: the invocation fails (a function error), and is retried by its caller.
#[derive(Debug, thiserror::Error)]
pub enum StackError {
    /// DynamoDB failed in a way that is not the request's fault.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The library was set up without what it needs (a deployment's fault).
    #[error("{0}")]
    Setup(String),
    /// A refusal of a request that asked to fail on one (`"on_refusal": "fail"`: an event
    /// delivered asynchronously, whose refusal no caller reads), so Lambda sends it to the
    /// on-failure destination with the refusal as its error.
    #[error("{}", serde_json::to_string(.0).unwrap_or_default())]
    Refused(Box<Refusal>),
}

/// What Lambda reports for a failure of the stack: its kind as the error type (what a caller's
/// SDK shows), and the whole cause chain.
impl From<StackError> for lambda_runtime::Diagnostic {
    fn from(e: StackError) -> Self {
        let kind = match &e {
            StackError::Db(DbError::TableNotFound { .. }) => "TableNotFound",
            StackError::Db(DbError::Unreachable { .. }) => "DynamoDbUnreachable",
            StackError::Db(_) => "DynamoDb",
            StackError::Setup(_) => "Setup",
            StackError::Refused(_) => "Refused",
        };
        tickwork_lambda::diagnostic(kind, &e)
    }
}

/// A DynamoDB error: throttling (after the SDK's retries) is a refusal the caller may send again;
/// a request our own client refused before sending ([`tickwork::limits`]) is `TooLarge`;
/// everything else is the stack's.
pub fn db(e: DbError) -> Result<Refusal, StackError> {
    match e {
        DbError::Throttled { op, table, .. } => Ok(Refusal::new(
            RefusalType::Throttled,
            format!(
                "DynamoDB throttled {op} on `{table}` after retries; nothing was written for it: send it again later"
            ),
        )),
        DbError::Refused(l) => Ok(Refusal::new(RefusalType::TooLarge, l.to_string())),
        other => Err(StackError::Db(other)),
    }
}

/// A queue read's error (`tenants.explain`): as [`db`]; an invalid item cannot come of a read.
pub fn queue(e: tickwork::queue::QueueError) -> Result<Refusal, StackError> {
    match e {
        tickwork::queue::QueueError::Db(e) => db(e),
        tickwork::queue::QueueError::Invalid(i) => Err(StackError::Setup(i.to_string())),
    }
}

/// A tenant the library refused, classified by what the request gave: an unknown zone, an id
/// over its limit, or another problem with the id or `owed_from`.
pub fn tenant(e: &InvalidTenant, id: &str, zone: &str) -> Refusal {
    if tickwork::calendar::zone(zone).is_err() {
        return Refusal::new(RefusalType::UnknownZone, e.to_string()).field("zone");
    }
    if id.len() > MAX_TENANT_ID_BYTES {
        return Refusal::new(RefusalType::TooLarge, e.to_string()).field("id");
    }
    if e.problem.starts_with("owed from") {
        return Refusal::new(RefusalType::InvalidField, e.to_string()).field("owed_from");
    }
    Refusal::new(RefusalType::InvalidField, e.to_string()).field("id")
}

/// A zone given on its own (`tenants.move`): unknown to the bundled database.
pub fn zone(e: &tickwork::calendar::CalendarError) -> Refusal {
    Refusal::new(RefusalType::UnknownZone, e.0.clone()).field("zone")
}

/// A definition that cannot be right, at `field` (`spec`, `name`, `spread_min`, `gap`, `fold`).
pub fn spec(e: &SpecError, field: &str) -> Refusal {
    Refusal::new(RefusalType::InvalidSpec, e.0.clone()).field(field)
}

/// A schedule operation that did not happen; its definition's problems are at `field`.
pub fn schedule(e: ScheduleError, field: &str) -> Result<Refusal, StackError> {
    match e {
        ScheduleError::Spec(s) => Ok(spec(&s, field)),
        ScheduleError::NotFound { tenant, name } => {
            Ok(Refusal::new(RefusalType::NoSuchSchedule, format!("tenant `{tenant}` has no schedule `{name}`"))
                .field("name"))
        }
        ScheduleError::Raced { .. } => Ok(Refusal::new(RefusalType::Raced, e.to_string())),
        // Repairs are the operator's (tickctl), not the control function's.
        ScheduleError::NotQuarantined(_) | ScheduleError::Unrepairable { .. } => {
            Ok(Refusal::new(RefusalType::Conflict, e.to_string()))
        }
        ScheduleError::Db(d) => db(d),
    }
}

/// No tenant `id` (at `field`).
pub fn no_tenant(id: &str, field: &str) -> Refusal {
    Refusal::new(RefusalType::NoSuchTenant, format!("no tenant `{id}` (add it first: tenants.add)")).field(field)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(t: tickwork::tenants::Tenant) -> InvalidTenant {
        t.validate().expect_err("invalid")
    }

    #[test]
    fn a_refused_tenant_is_classified_by_its_field() {
        use tickwork::tenants::Tenant;
        let r = tenant(&invalid(Tenant::new("t1", "Mars/Olympus")), "t1", "Mars/Olympus");
        assert_eq!((r.r#type, r.field.as_deref()), (RefusalType::UnknownZone, Some("zone")));
        let long = "x".repeat(MAX_TENANT_ID_BYTES + 1);
        let r = tenant(&invalid(Tenant::new(long.as_str(), "UTC")), &long, "UTC");
        assert_eq!((r.r#type, r.field.as_deref()), (RefusalType::TooLarge, Some("id")));
        assert!(r.message.contains("limit"), "{}", r.message);
        let r = tenant(&invalid(Tenant::new("a#b", "UTC")), "a#b", "UTC");
        assert_eq!((r.r#type, r.field.as_deref()), (RefusalType::InvalidField, Some("id")));
        let r = tenant(&invalid(Tenant::new("", "UTC")), "", "UTC");
        assert_eq!((r.r#type, r.field.as_deref()), (RefusalType::InvalidField, Some("id")));
        let owed = InvalidTenant { id: "t".into(), problem: "owed from 2020-01-01, 2000 days back".into() };
        assert_eq!(tenant(&owed, "t", "UTC").field.as_deref(), Some("owed_from"));
    }

    #[test]
    fn throttling_and_races_are_refusals_to_retry_and_the_rest_fail_the_stack() {
        let throttled = DbError::Throttled { op: "PutItem", table: "t".into(), source: "slow down".into() };
        let r = db(throttled).expect("a refusal");
        assert_eq!(r.r#type, RefusalType::Throttled);
        assert!(r.retryable);
        let r = schedule(ScheduleError::Raced { tenant: "t".into(), name: "n".into() }, "spec").unwrap();
        assert!(r.retryable && r.r#type == RefusalType::Raced);
        assert!(matches!(db(DbError::TableNotFound { table: "x".into() }), Err(StackError::Db(_))));
        let r = schedule(ScheduleError::NotFound { tenant: "t".into(), name: "n".into() }, "spec").unwrap();
        assert_eq!((r.r#type, r.field.as_deref(), r.retryable), (RefusalType::NoSuchSchedule, Some("name"), false));
        let r = schedule(ScheduleError::Spec(SpecError("bad".into())), "at").unwrap();
        assert_eq!((r.r#type, r.field.as_deref()), (RefusalType::InvalidSpec, Some("at")));
    }
}
