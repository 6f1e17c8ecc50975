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
    Ok(())
}
