//! The worker Lambda of an application with a job of its own: the shipped worker, as a library,
//! with the example's handlers registered. Deploy it in place of `queue-worker` (same events, same
//! settings; add `MONTHLY_REPORT_TABLE` or create `<prefix>-reports`).
use lambda_runtime::{service_fn, LambdaEvent};
use serde_json::Value;
use tickwork::config::Env;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    tickwork_lambda::init_tracing();
    let env = Env::process();
    let deps = queue_worker::Deps::from_env_with(&env, |cx| {
        let summaries = cx.core.table_from(cx.env, tickwork::env::SUMMARIES_TABLE, "summaries");
        let reports =
            cx.env.get(tickwork_example_monthly_report::REPORTS_TABLE_VAR).unwrap_or_else(|| cx.core.table("reports"));
        let fanout = cx.env.get(tickwork::env::FANOUT_JOB).unwrap_or_else(|| queue_worker::summary::UTC_DAILY.into());
        Ok(tickwork_example_monthly_report::registry(cx.db.clone(), &summaries, &reports, cx.clock.clone(), &fanout))
    })
    .await?;
    lambda_runtime::run(service_fn(|ev: LambdaEvent<Value>| {
        let deadline = tickwork_lambda::deadline_ms(ev.context.deadline);
        let deps = &deps;
        async move { queue_worker::handle(deps, ev.payload, deadline).await }
    }))
    .await
}
