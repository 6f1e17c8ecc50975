//! Operations a second through the control function, beside the control plane's model
//! ([`tickwork_cost::control`]).
//!
//! The release binary runs behind the Runtime and Invoke stand-ins, `PROCESSES` of them (Lambda's
//! concurrent execution environments), and the AWS SDK's Lambda client sends `tenants.add` of one
//! tenant and `timers.at` with a payload, one at a time and `PROCESSES` at once, to the local
//! DynamoDB server. The model's time for an operation is its requests times a request's time plus
//! the function's fixed part; the local server serves one request at a time, so its own time a
//! request (measured first, at the same concurrency) is the request time compared, and the ratio
//! measured over modelled is printed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use aws_config::SdkConfig;
use lambda_standin::invoke::{Handler, InvokeApi};
use lambda_standin::runtime::Function;
use tickwork::schema;
use tickwork_cost::control::OPS;

const PROCESSES: usize = 4;
const OPS_EACH: usize = 120;

pub async fn run(sdk: &SdkConfig) -> Result<()> {
    println!("== The control function: operations a second through Invoke, the model beside ==");
    let dir = std::env::var("TICKWORK_BENCH_BIN_DIR").unwrap_or_else(|_| "target/release".into());
    let bin = std::path::Path::new(&dir).join("control");
    ensure!(bin.exists(), "{}: build it with `cargo build --release -p control` (make bench does)", bin.display());
    let prefix = format!("ctlb{}-{:x}", std::process::id(), fastrand::u32(..));
    let admin = crate::scale::db(sdk, Duration::ZERO);
    for def in tickctl::all_tables() {
        schema::create_table(admin.client(), &def, &format!("{prefix}-{}", def.logical)).await?;
    }
    let endpoint = std::env::var("AWS_ENDPOINT_URL_DYNAMODB")?;
    let env = [
        ("AWS_ENDPOINT_URL_DYNAMODB", endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
        ("TICKWORK_TABLE_PREFIX", prefix.as_str()),
        ("TICKWORK_CAPACITY_SOURCE", "estimate"),
        ("RUST_LOG", "warn"),
    ];
    let mut functions = Vec::new();
    for _ in 0..PROCESSES {
        functions.push(Arc::new(Function::start(&bin, &[], ".", &env, Duration::from_secs(30)).await?));
    }
    let next = Arc::new(AtomicUsize::new(0));
    let fs = functions.clone();
    let handler: Handler = Arc::new(move |req| {
        let f = fs[next.fetch_add(1, Ordering::Relaxed) % fs.len()].clone();
        Box::pin(async move { f.invoke(req.payload).await })
    });
    let api = InvokeApi::start(handler).await?;
    let lambda = aws_sdk_lambda::Client::from_conf(
        aws_sdk_lambda::config::Builder::from(sdk).endpoint_url(api.endpoint()).build(),
    );
    let zones = ["Europe/Berlin", "America/New_York", "Asia/Tokyo", "UTC"];
    // Each tenant's zone registered first: the model prices the steady state.
    for (i, z) in zones.iter().enumerate() {
        call(&lambda, serde_json::json!({"op": "tenants.add", "tenants": [{"id": format!("seed{i}"), "zone": z}]}))
            .await?;
    }
    println!(
        "{:<14} {:>9} {:>12} {:>14} {:>16} {:>9}",
        "operation", "at once", "ops a second", "ms an op", "model ms an op", "measured/model"
    );
    for at_once in [1, PROCESSES] {
        let request_ms = crate::burst::serial_ms(sdk, at_once).await?;
        for name in ["tenants.add", "timers.at"] {
            let op = OPS.iter().find(|o| o.name == name).context("the model prices it")?;
            let start = Instant::now();
            let sent = Arc::new(AtomicUsize::new(0));
            let mut tasks = Vec::new();
            for w in 0..at_once {
                let (lambda, sent) = (lambda.clone(), sent.clone());
                tasks.push(tokio::spawn(async move {
                    loop {
                        let i = sent.fetch_add(1, Ordering::Relaxed);
                        if i >= OPS_EACH {
                            return Ok::<_, anyhow::Error>(());
                        }
                        let id = format!("b{at_once}-{w}-{i}");
                        let zone = ["Europe/Berlin", "America/New_York", "Asia/Tokyo", "UTC"][i % 4];
                        let req = match name {
                            "tenants.add" => serde_json::json!({"op": "tenants.add", "tenants": [{"id": id, "zone": zone}]}),
                            _ => serde_json::json!({"op": "timers.at", "tenant": format!("seed{}", i % 4), "name": format!("t{at_once}-{i}"), "at": "2027-01-15T09:00", "payload": {"i": i}}),
                        };
                        call(&lambda, req).await?;
                    }
                }));
            }
            for t in tasks {
                t.await??;
            }
            let secs = start.elapsed().as_secs_f64();
            let rate = OPS_EACH as f64 / secs;
            let measured_ms = 1_000.0 * at_once as f64 / rate;
            // The local server serves one request at a time: at_once operations share it.
            let model_ms = op.requests * request_ms * at_once as f64 + tickwork_cost::bill::stack::BASE_MS;
            println!(
                "{name:<14} {at_once:>9} {rate:>12.1} {measured_ms:>14.1} {model_ms:>16.1} {:>9.2}",
                measured_ms / model_ms
            );
        }
    }
    println!(
        "(modelled: the operation's requests at this run's request time with as many at once, plus the function's fixed {} ms; on AWS a request is a round trip of a few ms and the processes share no server)\n",
        tickwork_cost::bill::stack::BASE_MS
    );
    drop(functions);
    Ok(())
}

async fn call(lambda: &aws_sdk_lambda::Client, req: serde_json::Value) -> Result<()> {
    let out = lambda
        .invoke()
        .function_name("tickwork-control")
        .payload(aws_sdk_lambda::primitives::Blob::new(req.to_string()))
        .send()
        .await?;
    let body: serde_json::Value = serde_json::from_slice(out.payload().map(|b| b.as_ref()).unwrap_or_default())?;
    ensure!(out.function_error().is_none() && body["ok"] == true, "{req}: {body}");
    Ok(())
}
