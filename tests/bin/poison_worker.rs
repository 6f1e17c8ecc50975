//! The queue worker's own `main`, with one kind more: `poison`, whose unit for a tenant named
//! `poison…` aborts the process (as the out-of-memory killer or a native crash would end it), and
//! whose every other unit writes its tenant's UTC rollup, as `utc-daily` does. The tests run it
//! behind the Runtime API stand-in, as Lambda would run a worker an application built.
use std::sync::Arc;

use futures::future::BoxFuture;
use lambda_runtime::{service_fn, LambdaEvent};
use queue_worker::{Handler, HandlerError};
use serde_json::Value;
use tickwork::config::Env;
use tickwork::env as vars;
use tickwork::queue::Job;

struct Poison(Arc<dyn Handler>);

impl Handler for Poison {
    fn handle<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<(), HandlerError>> {
        if job.tenant.as_deref().is_some_and(|t| t.starts_with("poison")) {
            std::process::abort();
        }
        self.0.handle(job)
    }
}

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    tickwork_lambda::init_tracing();
    let deps = queue_worker::Deps::from_env_with(&Env::process(), |cx| {
        let summaries = cx.core.table_from(cx.env, vars::SUMMARIES_TABLE, "summaries");
        let reg = queue_worker::summary::registry(cx.db.clone(), &summaries, cx.clock.clone());
        let rollup = reg.get(queue_worker::summary::UTC_DAILY).cloned().expect("the rollup handler");
        Ok(reg.with("poison", Arc::new(Poison(rollup))))
    })
    .await?;
    lambda_runtime::run(service_fn(|ev: LambdaEvent<Value>| {
        let deadline = tickwork_lambda::deadline_ms(ev.context.deadline);
        let deps = &deps;
        async move { queue_worker::handle(deps, ev.payload, deadline).await }
    }))
    .await
}
