//! `tenant-fanout` Lambda: thin shell over [`tenant_fanout::handle`].
use lambda_runtime::{service_fn, LambdaEvent};
use serde_json::Value;
use tickwork::config::Env;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    tickwork_lambda::init_tracing();
    tickwork_lambda::announce("tenant-fanout");
    let deps = tenant_fanout::Deps::from_env(&Env::process()).await?;
    lambda_runtime::run(service_fn(|ev: LambdaEvent<Value>| {
        let deadline = tickwork_lambda::deadline_ms(ev.context.deadline);
        let deps = &deps;
        async move { tenant_fanout::handle(deps, ev.payload, deadline).await }
    }))
    .await
}
