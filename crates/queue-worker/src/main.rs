//! `queue-worker` Lambda: thin shell over [`queue_worker::handle`].
use lambda_runtime::{service_fn, LambdaEvent};
use serde_json::Value;
use tickwork::config::Env;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    tickwork_lambda::init_tracing();
    tickwork_lambda::announce("queue-worker");
    let deps = queue_worker::Deps::from_env(&Env::process()).await?;
    lambda_runtime::run(service_fn(|ev: LambdaEvent<Value>| {
        let deadline = tickwork_lambda::deadline_ms(ev.context.deadline);
        let deps = &deps;
        async move { queue_worker::handle(deps, ev.payload, deadline).await }
    }))
    .await
}
