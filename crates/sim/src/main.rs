//! `make run`: the pulse sweep end to end on the local servers (see the crate docs).
//! `make demo` (`tickwork-sim demo`): a first taste in well under a minute: 100 tenants, one
//! simulated day, the idle and the boundary bill, pulses per zone.
use anyhow::{Context, Result};
use tickwork_sim::{simulate, SimConfig, SimReport};

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() -> Result<()> {
    let endpoint = std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
        .context("AWS_ENDPOINT_URL_DYNAMODB is not set: use `make run`, which starts the local servers")?;
    // Queue workers every 15 simulated minutes: pulses wait at most that long, and the local
    // server (which scans a whole table for every index Query) is not swamped by empty polls.
    let demo = std::env::args().nth(1).as_deref() == Some("demo");
    // The demo: one sweep worker on the template's quarter-hour schedule, one day, 100 tenants.
    let mut cfg = if demo {
        SimConfig { tenants: 100, days: 1, workers: 1, tick_ms: 900_000, drain_every: 1, ..SimConfig::default() }
    } else {
        SimConfig { drain_every: 15, progress: true, ..SimConfig::default() }
    };
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
    if !demo {
        println!(
            "pulse sweep, locally: {} tenants, {} days from 2026-03-29T00:00Z (Berlin DST, month and quarter end)\n",
            cfg.tenants, cfg.days
        );
    }
    let report = simulate(&sdk, &cfg).await?;
    if let Ok(dir) = std::env::var("SIM_CHARTS") {
        let dir = std::path::Path::new(&dir);
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let (a, b) = (dir.join("requests-per-hour.svg"), dir.join("pulses-per-hour.svg"));
        tickwork_sim::chart::requests_per_hour(&report, &cfg, &a)?;
        tickwork_sim::chart::pulses_per_hour(&report, &cfg, &b)?;
        eprintln!("charts: {} {}", a.display(), b.display());
    }
    if demo {
        return print_demo(&cfg, &report);
    }
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

/// The demo's page: what one idle tick and one boundary tick cost, in requests and dollars, the
/// pulses each zone's tenants got, and where to go next.
fn print_demo(cfg: &SimConfig, r: &SimReport) -> Result<()> {
    let p = tickctl::bill::Prices::default();
    let usd = |t: &tickwork::meter::Tally| p.units_usd(t.rcu, t.wcu);
    let per = |t: &tickwork::meter::Tally, n: u64| t.requests as f64 / n.max(1) as f64;
    println!(
        "{} tenants in {} zones, {} simulated day(s) of sweeps every {} min, on the local servers ({:.1} s)\n",
        r.tenants,
        tickwork_sim::ZONES.len().min(r.tenants),
        cfg.days,
        cfg.tick_ms / 60_000,
        r.wall.as_secs_f64()
    );
    println!(
        "{:<16} {:>6} {:>14} {:>10} {:>10} {:>14}",
        "sweep ticks", "count", "requests/tick", "RCU", "WCU", "USD (on-demand)"
    );
    println!(
        "{:<16} {:>6} {:>14.2} {:>10.1} {:>10.1} {:>14.6}",
        "idle",
        r.idle_ticks,
        per(&r.idle, r.idle_ticks),
        r.idle.rcu,
        r.idle.wcu,
        usd(&r.idle)
    );
    println!(
        "{:<16} {:>6} {:>14.2} {:>10.1} {:>10.1} {:>14.6}",
        "boundary",
        r.boundary_ticks,
        per(&r.boundary, r.boundary_ticks),
        r.boundary.rcu,
        r.boundary.wcu,
        usd(&r.boundary)
    );
    println!(
        "{:<16} {:>6} {:>14} {:>10.1} {:>10.1} {:>14.6}\n",
        "queue worker",
        "",
        format!("{} in all", r.worker.requests),
        r.worker.rcu,
        r.worker.wcu,
        usd(&r.worker)
    );
    println!("pulses delivered per zone (each tenant once per period; a zone's day ends at its own midnight):");
    let grains = ["day", "week", "month", "quarter", "year"];
    println!("  {:<22} {}", "zone", grains.map(|g| format!("{g:>8}")).join(""));
    for (zone, by) in &r.pulses_by_zone {
        println!("  {:<22} {}", zone, grains.map(|g| format!("{:>8}", by.get(g).copied().unwrap_or(0))).join(""));
    }
    let twice: Vec<&String> = r.deliveries.iter().filter(|(_, n)| **n > 1).map(|(k, _)| k).collect();
    println!(
        "\nunits delivered twice: {} (a unit runs again only after a crash; its effect is written once)",
        twice.len()
    );
    println!(
        "the whole stack's month for {} tenants, priced: `tickctl cost --tenants {}`; the full run: `make run`",
        cfg.tenants, cfg.tenants
    );
    Ok(())
}
