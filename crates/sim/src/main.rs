//! `make run`: the pulse sweep end to end on the local servers (see the crate docs).
use anyhow::{Context, Result};
use tickwork_sim::{simulate, SimConfig};

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() -> Result<()> {
    let endpoint = std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
        .context("AWS_ENDPOINT_URL_DYNAMODB is not set: use `make run`, which starts the local servers")?;
    // Queue workers every 15 simulated minutes: pulses wait at most that long, and the local
    // server (which scans a whole table for every index Query) is not swamped by empty polls.
    let mut cfg = SimConfig { drain_every: 15, progress: true, ..SimConfig::default() };
    if let Ok(n) = std::env::var("SIM_TENANTS") {
        cfg.tenants = n.parse().context("SIM_TENANTS must be a number")?;
    }
    if let Ok(n) = std::env::var("SIM_WORKERS") {
        cfg.workers = n.parse().context("SIM_WORKERS must be a number")?;
    }
    if let Ok(n) = std::env::var("SIM_DRAIN_EVERY") {
        cfg.drain_every = n.parse().context("SIM_DRAIN_EVERY must be a number of ticks")?;
    }
    if let Ok(n) = std::env::var("SIM_DAYS") {
        cfg.days = n.parse().context("SIM_DAYS must be a number")?;
    }
    let sdk = tickwork_sim::local_sdk(&endpoint).await;
    println!(
        "pulse sweep, locally: {} tenants, {} days from 2026-03-29T00:00Z (Berlin DST, month and quarter end)\n",
        cfg.tenants, cfg.days
    );
    let report = simulate(&sdk, &cfg).await?;
    print!("{}", report.render(&cfg));
    println!("\n`tickctl cost` for the same load (model) beside this run (live):");
    println!(
        "{:<14} {:>12} {:>12} {:>10} {:>10} {:>10} {:>10}",
        "job", "model req", "live req", "model RCU", "live RCU", "model WCU", "live WCU"
    );
    for m in tickwork_sim::model_vs_live(&cfg, &report)? {
        println!(
            "{:<14} {:>12} {:>12} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
            m.job, m.requests.0, m.requests.1, m.rcu.0, m.rcu.1, m.wcu.0, m.wcu.1
        );
    }
    Ok(())
}
