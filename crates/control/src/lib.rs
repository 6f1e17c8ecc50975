//! The control function: a team's own code tells tickwork what to do, in its own language.
//!
//! A service adds a tenant at signup, moves it when it changes zone, suspends it when it stops
//! paying, sets "every weekday at 09:30 local" or "remind this tenant at T", through the AWS SDK's
//! `Invoke` of this function (IAM-authorised: the caller needs `lambda:InvokeFunction` on it and
//! nothing on the tables). One JSON request ([`request::Request`]), one JSON answer
//! ([`answer::Answer`]), both published as a JSON Schema generated from these types
//! (`docs/control/*.schema.json`, [`schema`]).
//!
//! ## One path
//! Every operation calls the library (`tickwork::tenants::Tenants`,
//! `tickwork::schedules::Schedules`) with the same validation, idempotency and semantics as
//! `tickctl`, which calls these same functions ([`tenants`], [`schedules`]): a tenant's zone is
//! registered with the sweep before the tenant is written; `put` of the same definition is
//! `unchanged`; a tenant resumed or moved has its schedules owed from now; a tenant removed
//! loses its schedules first. Nothing outside the library writes the control table.
//!
//! ## Answers
//! A refusal (a malformed request, an unknown zone, a missing tenant) is an answer with
//! `ok: false` and nothing written for it; in a batch each refused entry is listed by index and
//! the rest are written. Only a failure of the stack itself is a function error. The SDKs do
//! not retry one (Invoke answers it with HTTP 200 and `FunctionError` set): the caller sends the
//! request again, and Lambda retries an asynchronous invocation twice. Every operation is
//! idempotent, so a repeat is harmless.
//!
//! ## Layout
//! `request` what is asked and its parsing; `answer` what comes back; `refuse` library errors as
//! refusals (pure); `tenants` and `schedules` the operations; `explain` what a tenant's state
//! says (pure, over key-condition reads); `schema` the published JSON Schema.

pub mod answer;
pub mod deps;
pub mod explain;
pub mod explanation;
pub mod refuse;
pub mod request;
pub mod schedules;
pub mod schema;
pub mod tenants;
pub mod views;

pub use answer::{Answer, Outcome, Refusal, RefusalType};
pub use deps::Deps;
pub use refuse::{Ran, StackError};
pub use request::{parse, Request};

pub use deps::ROLE;

/// One invocation: the request read, run, and answered. `Err` only for a failure of the stack.
pub async fn handle(deps: &Deps, mut request: serde_json::Value) -> Result<Answer, StackError> {
    tickwork::iam::acting_as(ROLE, async move {
        let fail = match request::on_refusal(&mut request) {
            Ok(o) => o == request::OnRefusal::Fail,
            Err(r) => return Ok(Answer::refused(r)),
        };
        let refused = |r: Refusal| if fail { Err(StackError::Refused(Box::new(r))) } else { Ok(Answer::refused(r)) };
        let req = match parse(request) {
            Ok(r) => r,
            Err(r) => {
                tracing::info!(refused = ?r.r#type, field = r.field.as_deref(), "refused");
                return refused(r);
            }
        };
        let op = op_name(&req);
        // Boxed: the operations' futures together are deeper than the compiler's layout limit.
        let answer = match Box::pin(run(deps, req)).await? {
            Ok(o) => Answer::ok(o),
            Err(r) => Answer::refused(r),
        };
        match &answer.error {
            None => tracing::info!(op, "done"),
            Some(r) => tracing::info!(op, refused = ?r.r#type, field = r.field.as_deref(), "refused"),
        }
        // An event's batch entry refused fails it too (the others are written; a retry of the
        // whole event is harmless).
        let entry = match &answer.result {
            Some(Outcome::Batch(b)) => b.refused.first().cloned(),
            _ => None,
        };
        match answer.error.clone().or(entry) {
            Some(r) if fail => refused(r),
            _ => Ok(answer),
        }
    })
    .await
}

async fn run(deps: &Deps, req: Request) -> Ran {
    use Request as R;
    match req {
        R::TenantsAdd(r) => Ok(Ok(Outcome::Batch(tenants::add(deps, &r.tenants).await?))),
        R::TenantsGet(r) => tenants::get(deps, &r.id).await,
        R::TenantsSuspend(r) => tenants::suspend(deps, &r.id).await,
        R::TenantsResume(r) => tenants::resume(deps, &r.id).await,
        R::TenantsMove(r) => tenants::move_zone(deps, &r.id, &r.zone).await,
        R::TenantsRemove(r) => tenants::remove(deps, &r.id).await,
        R::TenantsList(r) => tenants::list(deps, r.cursor, r.limit).await,
        R::TenantsExplain(r) => explain::run(deps, &r.id).await,
        R::SchedulesPut(r) => Ok(Ok(Outcome::Batch(schedules::put(deps, &r.schedules).await?))),
        R::SchedulesPause(r) => schedules::set_paused(deps, &r.tenant, &r.name, true).await,
        R::SchedulesResume(r) => schedules::set_paused(deps, &r.tenant, &r.name, false).await,
        R::SchedulesRemove(r) => schedules::remove(deps, &r.tenant, &r.name).await,
        R::SchedulesList(r) => schedules::list(deps, &r.tenant).await,
        R::SchedulesNext(r) => schedules::next(deps, &r.tenant, r.name.as_deref(), r.count, r.from.as_deref()).await,
        R::TimersAt(r) => schedules::timer_at(deps, &r.tenant, &r.name, &r.at, r.payload.as_ref()).await,
        R::TimersCancel(r) => schedules::timer_cancel(deps, &r.tenant, &r.name).await,
    }
}

/// The operation's name, as `op` gives it.
pub fn op_name(req: &Request) -> &'static str {
    use Request as R;
    match req {
        R::TenantsAdd(_) => "tenants.add",
        R::TenantsGet(_) => "tenants.get",
        R::TenantsSuspend(_) => "tenants.suspend",
        R::TenantsResume(_) => "tenants.resume",
        R::TenantsMove(_) => "tenants.move",
        R::TenantsRemove(_) => "tenants.remove",
        R::TenantsList(_) => "tenants.list",
        R::TenantsExplain(_) => "tenants.explain",
        R::SchedulesPut(_) => "schedules.put",
        R::SchedulesPause(_) => "schedules.pause",
        R::SchedulesResume(_) => "schedules.resume",
        R::SchedulesRemove(_) => "schedules.remove",
        R::SchedulesList(_) => "schedules.list",
        R::SchedulesNext(_) => "schedules.next",
        R::TimersAt(_) => "timers.at",
        R::TimersCancel(_) => "timers.cancel",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn every_op_reads_back_to_its_own_name() {
        let minimal = |op: &str| match op {
            "tenants.add" => json!({"tenants": [{"id": "t", "zone": "UTC"}]}),
            "tenants.move" => json!({"id": "t", "zone": "UTC"}),
            "tenants.list" => json!({}),
            "schedules.put" => json!({"schedules": [{"tenant": "t", "name": "n", "spec": "daily 08:00"}]}),
            "schedules.list" | "schedules.next" => json!({"tenant": "t"}),
            "timers.at" => json!({"tenant": "t", "name": "n", "at": "2026-12-24T09:00"}),
            o if o.starts_with("tenants.") => json!({"id": "t"}),
            _ => json!({"tenant": "t", "name": "n"}),
        };
        for op in crate::request::OPS {
            let mut v = minimal(op);
            v["op"] = op.into();
            let req = crate::request::parse(v).unwrap_or_else(|r| panic!("{op}: {}", r.message));
            assert_eq!(super::op_name(&req), op);
        }
    }
}
