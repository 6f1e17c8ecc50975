//! `make dev`: a team's first hour with no AWS account and no Docker.
//!
//! The stack's functions — the control function, the pulse sweep, the fan-out and the queue
//! worker — run in this process behind the local Lambda Invoke API (`lambda_standin::invoke`),
//! over the local DynamoDB server; the team's own handler runs in its real runtime (Python under
//! `awslambdaric`, Node.js under `aws-lambda-ric`) behind the Runtime API stand-in, as the worker's
//! function target. The clients reach the control function with the printed environment
//! (`AWS_ENDPOINT_URL_LAMBDA`, the function's name), exactly as they would a deployed stack's.
//!
//! Time is real: the sweep and the worker tick every few seconds by the wall clock, and invoking
//! `<prefix>-pulse-sweep` or `<prefix>-queue-worker` through the same Invoke API (or `tickctl
//! invoke …` with the printed environment) runs a tick at once. A timer set a minute ahead fires
//! at the first tick after its instant, never before (a unit is not visible before it is due).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use lambda_standin::invoke::{Answer, Handler, InvokeApi};
use lambda_standin::runtime::Function;
use tickwork::config::Env;

/// A sweep tick's time in the loop (its deadline), in seconds.
pub const SWEEP_DEADLINE_SECS: i64 = 5;

/// The other functions' time (the worker's must exceed its handler timeout, 30 s).
pub const DEADLINE_SECS: i64 = 60;

/// What the loop is started with.
#[derive(Debug, Clone)]
pub struct Options {
    /// The team's handler: a directory holding `handler.py` (Python) or `index.mjs`/`index.js`
    /// (Node.js).
    pub handler: PathBuf,
    /// The repository (where `.tools/` and the examples are).
    pub repo: PathBuf,
    /// Table prefix (`<prefix>-control`, …) and function names (`<prefix>-control`, …).
    pub prefix: String,
    /// Seconds between the loop's ticks.
    pub tick_secs: u64,
    /// The loop's Invoke API port.
    pub port: u16,
}

/// Where an invocation goes, by the function name in its path. Pure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The control function.
    Control,
    /// A tick of the sweep, now.
    Sweep,
    /// A drain of the worker, now.
    Worker,
    /// A run of the fan-out, now.
    Fanout,
    /// The team's handler (the worker's function target, or a direct test).
    Handler,
}

/// The route of function `name` (a bare name or an ARN) of stack `prefix`. Pure.
pub fn route(prefix: &str, name: &str) -> Route {
    let bare = name.rsplit(':').next().unwrap_or(name);
    match bare.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')) {
        Some("control") => Route::Control,
        Some("pulse-sweep") => Route::Sweep,
        Some("queue-worker") => Route::Worker,
        Some("tenant-fanout") => Route::Fanout,
        _ => Route::Handler,
    }
}

/// The environment a client, `tickctl` and the in-process functions use: the local servers, the
/// loop's Invoke API, the stack's prefix, and the worker's function target. Pure.
pub fn environment(prefix: &str, dynamodb: &str, port: u16) -> Vec<(String, String)> {
    let p = |k: &str, v: String| (k.to_string(), v);
    vec![
        p("AWS_ENDPOINT_URL_DYNAMODB", dynamodb.to_string()),
        // The control table's stream, read by the sweep's mapping stand-in (the same server).
        p("AWS_ENDPOINT_URL_DYNAMODB_STREAMS", dynamodb.to_string()),
        p("AWS_ENDPOINT_URL_LAMBDA", format!("http://127.0.0.1:{port}")),
        p("AWS_ACCESS_KEY_ID", "test".into()),
        p("AWS_SECRET_ACCESS_KEY", "test".into()),
        p("AWS_REGION", "us-east-1".into()),
        p("AWS_DEFAULT_REGION", "us-east-1".into()),
        p("TICKWORK_TABLE_PREFIX", prefix.into()),
        p("TICKWORK_CAPACITY_SOURCE", "estimate".into()),
        p("TICKWORK_CONTROL_FUNCTION", format!("{prefix}-control")),
        p(
            tickwork::env::TARGETS,
            format!("pulse,sched=arn:aws:lambda:us-east-1:000000000000:function:{prefix}-handler"),
        ),
        p("EFFECTS_TABLE", format!("{prefix}-effects")),
    ]
}

/// The sweep's own settings in the loop: a tick every few seconds, not a minute. Its lease is
/// just above its deadline (the sweep keeps its lease to its end after a tick, so that two ticks
/// of one interval never both run; here an interval is a few seconds). Pure.
pub fn sweep_settings() -> Vec<(String, String)> {
    vec![
        (tickwork::env::FUNCTION_TIMEOUT_SECS.to_string(), SWEEP_DEADLINE_SECS.to_string()),
        (tickwork::env::PULSE_LEASE_SECS.to_string(), (SWEEP_DEADLINE_SECS + 1).to_string()),
        (tickwork::env::DEADLINE_MARGIN_SECS.to_string(), "1".into()),
    ]
}

/// The team's handler under its runtime interface client.
fn handler_command(o: &Options) -> Result<(PathBuf, Vec<String>)> {
    if o.handler.join("handler.py").exists() {
        let python = o.repo.join(".tools/python-handler/bin/python");
        if !python.exists() {
            bail!("{}: run `make deps` (it installs awslambdaric)", python.display());
        }
        return Ok((python, vec!["-m".into(), "awslambdaric".into(), "handler.handle".into()]));
    }
    // Absolute: the runtime runs in the handler's directory.
    let ric = o.repo.join(&o.handler).join("node_modules/aws-lambda-ric/bin/index.mjs");
    if o.handler.join("index.mjs").exists() || o.handler.join("index.js").exists() {
        if !ric.exists() {
            bail!("{}: run `npm install` in {} (make deps does for the example)", ric.display(), o.handler.display());
        }
        return Ok((PathBuf::from("node"), vec![ric.display().to_string(), "index.handler".into()]));
    }
    bail!("{}: no handler.py (Python) or index.mjs (Node.js) there", o.handler.display())
}

/// The effects table the example handlers write (a string `pk`), if it is not there.
async fn effects_table(db: &tickwork::Db, name: &str) -> Result<()> {
    use aws_sdk_dynamodb::types::*;
    if db.client().describe_table().table_name(name).send().await.is_ok() {
        return Ok(());
    }
    db.client()
        .create_table()
        .table_name(name)
        .attribute_definitions(
            AttributeDefinition::builder().attribute_name("pk").attribute_type(ScalarAttributeType::S).build()?,
        )
        .key_schema(KeySchemaElement::builder().attribute_name("pk").key_type(KeyType::Hash).build()?)
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
        .with_context(|| format!("creating {name}"))?;
    Ok(())
}

/// The stack's tables, each unless it is there already (a second loop against the same servers
/// keeps the first's tenants).
async fn provision(env: &Env) -> Result<tickwork_lambda::Base> {
    let base = tickwork_lambda_base(env).await?;
    for def in tickctl::all_tables() {
        let name = base.core.table(def.logical);
        if base.db.client().describe_table().table_name(&name).send().await.is_err() {
            tickwork::schema::create_table(base.db.client(), &def, &name)
                .await
                .with_context(|| format!("creating {name}"))?;
        }
    }
    Ok(base)
}

async fn tickwork_lambda_base(env: &Env) -> Result<tickwork_lambda::Base> {
    Ok(tickwork_lambda::Base::from_env(env, "dev").await?)
}

/// The stack, running: the Invoke API and the processes behind it.
pub struct Dev {
    /// The Invoke API every function is reached through.
    pub api: InvokeApi,
    /// The team's handler process.
    pub handler: Arc<Function>,
    /// The environment to reach it with.
    pub env: Vec<(String, String)>,
    sweep: Arc<pulse_sweep::Deps>,
    /// The sweep's `ScheduleWrites` event source mapping (the control table's stream).
    writes: Arc<lambda_standin::streams::StreamMapping>,
    fanout: Arc<tenant_fanout::Deps>,
    worker: Arc<queue_worker::Deps>,
}

/// What the Invoke API reaches.
struct Stack {
    prefix: String,
    control: Arc<control::Deps>,
    sweep: Arc<pulse_sweep::Deps>,
    fanout: Arc<tenant_fanout::Deps>,
    worker: Arc<queue_worker::Deps>,
    handler: Arc<Function>,
}

async fn dispatch(s: Arc<Stack>, req: lambda_standin::invoke::Request) -> Answer {
    let now = jiff::Timestamp::now().as_millisecond();
    match route(&s.prefix, &req.function) {
        Route::Control => answer(run_control(&s.control, &req.payload).await),
        Route::Sweep => answer(
            pulse_sweep::handle(&s.sweep, tick_event(now), now + SWEEP_DEADLINE_SECS * 1_000)
                .await
                .map_err(anyhow::Error::from)
                .and_then(|r| Ok(serde_json::to_value(r)?)),
        ),
        Route::Worker => answer(
            queue_worker::handle(&s.worker, tick_event(now), now + DEADLINE_SECS * 1_000)
                .await
                .map_err(anyhow::Error::from)
                .and_then(|r| Ok(serde_json::to_value(r)?)),
        ),
        Route::Fanout => answer(
            tenant_fanout::handle(&s.fanout, tick_event(now), now + DEADLINE_SECS * 1_000)
                .await
                .map_err(anyhow::Error::from)
                .and_then(|r| Ok(serde_json::to_value(r)?)),
        ),
        Route::Handler => s.handler.invoke(req.payload).await,
    }
}

async fn run_control(deps: &control::Deps, payload: &[u8]) -> Result<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_slice(payload)?;
    Ok(serde_json::to_value(control::handle(deps, v).await?)?)
}

/// A scheduled tick at `now_ms`, as EventBridge sends it (the library's own envelope).
fn tick_event(now_ms: i64) -> serde_json::Value {
    tickwork_lambda::Tick::envelope(now_ms, false)
}

fn answer(v: Result<serde_json::Value>) -> Answer {
    match v {
        Ok(v) => Answer { body: v.to_string().into_bytes(), function_error: None },
        Err(e) => Answer {
            body: serde_json::json!({"errorType": "Dev", "errorMessage": format!("{e:#}")}).to_string().into_bytes(),
            function_error: Some("Unhandled".into()),
        },
    }
}

impl Dev {
    /// Provisions the tables and starts everything. The process environment must already hold
    /// [`environment`] (the SDK reads its endpoints from it).
    pub async fn start(o: &Options) -> Result<Dev> {
        let dynamodb = std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
            .context("AWS_ENDPOINT_URL_DYNAMODB is not set: run through `make dev`, which starts the local servers")?;
        let env_pairs = environment(&o.prefix, &dynamodb, o.port);
        let env = Env::from_pairs(env_pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let base = provision(&env).await?;
        let db = base.db.clone();
        effects_table(&db, &format!("{}-effects", o.prefix)).await?;
        let (program, args) = handler_command(o)?;
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let handler_env: Vec<(&str, &str)> = env_pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let handler = Arc::new(
            Function::start(&program, &args, &o.handler, &handler_env, Duration::from_secs(60))
                .await
                .with_context(|| format!("starting {}", program.display()))?,
        );
        let control = Arc::new(control::Deps::from_env(&env).await?);
        let sweep_pairs: Vec<(String, String)> = env_pairs.iter().cloned().chain(sweep_settings()).collect();
        let sweep_env = Env::from_pairs(sweep_pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let sweep = Arc::new(pulse_sweep::Deps::from_env(&sweep_env).await?);
        let fanout = Arc::new(tenant_fanout::Deps::from_env(&env).await?);
        let worker = Arc::new(queue_worker::Deps::from_env(&env).await?);
        let stack = Arc::new(Stack {
            prefix: o.prefix.clone(),
            control,
            sweep: sweep.clone(),
            fanout: fanout.clone(),
            worker: worker.clone(),
            handler: handler.clone(),
        });
        // The operations' futures are not all provably `Send` (the library's batch closures), so
        // each invocation runs on a blocking thread of its own, driven there to its end.
        let rt = tokio::runtime::Handle::current();
        let route_to: Handler = Arc::new(move |req| {
            let (stack, rt) = (stack.clone(), rt.clone());
            Box::pin(async move {
                let run = tokio::task::spawn_blocking(move || rt.block_on(dispatch(stack, req)));
                run.await.unwrap_or_else(|e| answer(Err(anyhow::anyhow!("the invocation panicked: {e}"))))
            })
        });
        let api = InvokeApi::start_on(&format!("127.0.0.1:{}", o.port), route_to).await?;
        let writes = Arc::new(lambda_standin::streams::StreamMapping::new(
            &base.sdk,
            &sweep.tables.control,
            &[pulse_sweep::lowering::FILTER],
            1000,
        )?);
        Ok(Dev { api, handler, env: env_pairs, sweep, writes, fanout, worker })
    }

    /// One tick of the sweep, the fan-out and the worker at the wall clock; a failure is printed
    /// and the next tick tries again (as the schedule's next tick would).
    pub async fn tick(&self) {
        let now = jiff::Timestamp::now().as_millisecond();
        // The schedules written since the last tick lower `sched_next` (the mapping's batches).
        let sweep = &self.sweep;
        let handed = self
            .writes
            .pump(
                |event| async move { pulse_sweep::handle(sweep, event, now + DEADLINE_SECS * 1_000).await.map(|_| ()) },
            )
            .await;
        if let Err(e) = handed {
            eprintln!("dev: the control table's stream: {e:#}");
        }
        if let Err(e) = pulse_sweep::handle(&self.sweep, tick_event(now), now + SWEEP_DEADLINE_SECS * 1_000).await {
            eprintln!("dev: sweep tick: {e}");
        }
        if let Err(e) = tenant_fanout::handle(&self.fanout, tick_event(now), now + DEADLINE_SECS * 1_000).await {
            eprintln!("dev: fan-out tick: {e}");
        }
        if let Err(e) = queue_worker::handle(&self.worker, tick_event(now), now + DEADLINE_SECS * 1_000).await {
            eprintln!("dev: worker drain: {e}");
        }
    }

    /// The environment as `export` lines.
    pub fn exports(&self) -> String {
        self.env.iter().map(|(k, v)| format!("export {k}={v}\n")).collect()
    }
}

/// Runs `script` (a program and its arguments) with the loop's environment while the loop ticks
/// every `tick_secs`; its exit code.
pub async fn run_script(dev: &Dev, tick_secs: u64, script: &[String], dir: &Path) -> Result<i32> {
    let mut cmd = tokio::process::Command::new(&script[0]);
    cmd.args(&script[1..]).current_dir(dir).envs(dev.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let mut child = cmd.spawn().with_context(|| format!("running {}", script[0]))?;
    loop {
        tokio::select! {
            status = child.wait() => return Ok(status?.code().unwrap_or(1)),
            _ = tokio::time::sleep(Duration::from_secs(tick_secs)) => dev.tick().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_route_to_the_stacks_functions_and_everything_else_to_the_handler() {
        assert_eq!(route("dev", "dev-control"), Route::Control);
        assert_eq!(route("dev", "arn:aws:lambda:us-east-1:000000000000:function:dev-pulse-sweep"), Route::Sweep);
        assert_eq!(route("dev", "dev-queue-worker"), Route::Worker);
        assert_eq!(route("dev", "dev-tenant-fanout"), Route::Fanout);
        assert_eq!(route("dev", "arn:aws:lambda:us-east-1:000000000000:function:dev-handler"), Route::Handler);
        assert_eq!(route("dev", "other-control"), Route::Handler, "another stack's name is no function of this one");
    }

    #[test]
    fn the_environment_names_the_loop_and_routes_fires_to_the_handler() {
        let env = environment("dev", "http://127.0.0.1:5000", 9100);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("AWS_ENDPOINT_URL_LAMBDA"), Some("http://127.0.0.1:9100"));
        assert_eq!(get("TICKWORK_CONTROL_FUNCTION"), Some("dev-control"));
        let (kinds, arn) = get(tickwork::env::TARGETS).unwrap().split_once('=').unwrap();
        assert_eq!((kinds, route("dev", arn)), ("pulse,sched", Route::Handler));
    }
}
