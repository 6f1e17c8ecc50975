//! `control` Lambda: thin shell over [`control::handle`].
use lambda_runtime::{service_fn, LambdaEvent};
use serde_json::Value;
use tickwork::config::Env;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    tickwork_lambda::init_tracing();
    tickwork_lambda::announce("control");
    let deps = control::Deps::from_env(&Env::process()).await?;
    lambda_runtime::run(service_fn(|ev: LambdaEvent<Value>| {
        let deps = &deps;
        async move { control::handle(deps, ev.payload).await }
    }))
    .await
}
