//! `tickctl`: parses arguments, calls into the library, prints a table (or JSON with `--json`).
//! Exit code 0 on success, 1 on an operational failure (one line naming it), 2 on bad usage
//! (clap), 3 when `audit` flags a finding.
use std::io::IsTerminal;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use indicatif::{ProgressBar, ProgressStyle};
use tickctl::cost::{self, CostInput};
use tickwork::calendar::{CatchUp, Policy};
use tickwork::config::Env;
use tickwork::queue::{Queue, QueueConfig};
use tickwork_lambda::Base;

#[derive(Parser)]
#[command(
    name = "tickctl",
    version,
    about = "Operate tickwork: provision, status, plan, pause/resume, dead letters, audit, cost, invoke",
    long_about = "Operate tickwork. Endpoints and table names come from the same environment the Lambdas read \
                  (AWS_ENDPOINT_URL_DYNAMODB, TICKWORK_TABLE_PREFIX, ...). Exit codes: 0 ok, 1 failed, 2 bad usage, \
                  3 audit found something."
)]
struct Cli {
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Create every table (and the archive bucket when TICKWORK_ARCHIVE_BUCKET is set).
    Provision,
    /// Add sample tenants (tenant-00000, ...) round-robin over sample zones, for a local try.
    Seed {
        /// How many.
        #[arg(long, default_value_t = 24)]
        tenants: usize,
        /// Over the first N sample zones (1..=8).
        #[arg(long, default_value_t = 8)]
        zones: usize,
    },
    /// Leases, watermarks, pause switches, queue depth, dead letters, archiver positions.
    Status,
    /// The pulse sweep's next boundaries per zone group, tenants touched, requests; writes nothing.
    Plan {
        /// Job (the pulse sweep's job name).
        #[arg(default_value = "pulse-sweep")]
        job: String,
        /// Plan as of this instant (RFC 3339, e.g. 2026-03-29T22:00:00Z); default now.
        #[arg(long)]
        at: Option<String>,
    },
    /// Stop a function at its next tick (read by the one read its idle tick already makes).
    Pause {
        /// The function.
        job: tickctl::Function,
        /// Why (shown by status).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Let a paused function run again.
    Resume {
        /// The function.
        job: tickctl::Function,
    },
    /// Dead-lettered queue items.
    DeadLetters {
        #[command(subcommand)]
        action: Dead,
    },
    /// Capacity per job / table / operation from the jobs' EMF log lines; flags the `000_*` tells.
    Audit {
        /// A log file, or `-` for standard input.
        #[arg(default_value = "-")]
        log: String,
    },
    /// Requests and capacity units each job will cost, and the `000_*` design's under the same load.
    Cost {
        /// Active tenants.
        #[arg(long, default_value_t = 1000)]
        tenants: usize,
        /// Sweep tick interval (60s, 1m, 15m, ...); the template's schedule is every quarter hour.
        #[arg(long, default_value = "15m")]
        tick: String,
        /// Sweep workers (schedules or overlapping invocations) on phase-shifted ticks.
        #[arg(long, default_value_t = 1)]
        workers: u32,
        /// Days to price.
        #[arg(long, default_value_t = 30)]
        days: u32,
        /// Or a number of ticks (a window shorter than a day).
        #[arg(long)]
        ticks: Option<u64>,
        /// Spread tenants over the first N sample zones (1..=8).
        #[arg(long)]
        zones: Option<usize>,
        /// Or name the zones (repeat).
        #[arg(long = "zone")]
        zone: Vec<String>,
        /// Start (RFC 3339); default 2026-03-29T00:00:00Z (Berlin DST, month and quarter end).
        #[arg(long)]
        start: Option<String>,
        /// Queue worker drains (the template's: on every enqueue, and a safety poll hourly).
        #[arg(long, default_value = "1h")]
        worker_every: String,
        /// Override a price: name=value in US dollars (repeat; names in `tickctl cost --json`).
        #[arg(long = "price", value_parser = price_arg)]
        price: Vec<String>,
        /// Price the optional dashboard too (`CreateDashboard=true`).
        #[arg(long)]
        dashboard: bool,
    },
    /// Run a handler in-process on an event file against the configured endpoints.
    Invoke {
        /// pulse-sweep, tenant-fanout, queue-worker or archiver.
        function: String,
        /// A scheduled-event JSON file (see events/).
        #[arg(long)]
        event: std::path::PathBuf,
    },
}

#[derive(Subcommand)]
enum Dead {
    /// List every dead letter.
    List,
    /// Put one back in the queue with its attempts reset.
    Retry { id: String },
    /// Delete one for good.
    Purge { id: String },
}

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(header.to_vec());
    t
}

fn json<T: serde::Serialize>(v: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

fn time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map(|t| t.to_string()).unwrap_or_else(|_| ms.to_string())
}

fn bar(len: u64, what: &str) -> ProgressBar {
    // Drawn only on a terminal; scripts and pipes see nothing.
    let pb = if std::io::stderr().is_terminal() { ProgressBar::new(len) } else { ProgressBar::hidden() };
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed}").expect("template").progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

fn bytes_bar(len: Option<u64>, what: &str) -> ProgressBar {
    let pb = match (len, std::io::stderr().is_terminal()) {
        (Some(n), true) => ProgressBar::new(n),
        (None, true) => ProgressBar::new_spinner(),
        _ => ProgressBar::hidden(),
    };
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {elapsed}")
            .expect("template")
            .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

#[tokio::main]
async fn main() {
    // `tickctl ... | head` should end quietly, as other command-line tools do, not panic on a
    // closed pipe: restore the default SIGPIPE action that Rust's runtime replaces.
    #[cfg(unix)]
    // SAFETY: called before any other thread could be writing; SIG_DFL is a valid action.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("tickctl: {e:#}");
            std::process::exit(1);
        }
    }
}

async fn run(cli: Cli) -> Result<i32> {
    let env = Env::process();
    // Commands that need no endpoint first: they work without any AWS configuration.
    match &cli.cmd {
        Cmd::Audit { log } => return audit(&env, cli.json, log),
        Cmd::Cost { tenants, tick, workers, days, ticks, zones, zone, start, worker_every, price, dashboard } => {
            let tick_ms = cost::parse_interval(tick)?;
            let every = cost::parse_interval(worker_every)?;
            let start_ms = match start {
                Some(s) => s.parse::<jiff::Timestamp>().with_context(|| format!("--start `{s}`"))?.as_millisecond(),
                None => 1_774_742_400_000,
            };
            // Refuses a bad queue setting as every other command would.
            QueueConfig::from_env(&env)?;
            let input = CostInput {
                tenants: *tenants,
                zones: cost::zones(zone, *zones)?,
                tick_ms,
                workers: *workers,
                ticks: ticks.unwrap_or(u64::from(*days) * 86_400_000 / tick_ms as u64),
                start_ms,
                drain_every: (every / tick_ms).max(1) as u32,
                tenant_shards: env.parse_or("TICKWORK_TENANT_SHARDS", 8u32)?,
                // The template's default (one shard: pages of pulses are few items).
                queue_shards: env.parse_or("TICKWORK_QUEUE_SHARDS", 1u32)?,
                // The deployed defaults (`docs/configuration.md`).
                page_size: env.parse_or("TICKWORK_PULSE_PAGE_SIZE", 1000usize)?,
                fanout_page_size: env.parse_or("TICKWORK_FANOUT_PAGE_SIZE", 1000usize)?,
                worker_batch: env.parse_or("TICKWORK_WORKER_BATCH", 10usize)?,
                policy: Policy {
                    catch_up: env.parse_or("TICKWORK_PULSE_CATCH_UP", CatchUp::All)?,
                    max_lateness_ms: 40 * 86_400_000,
                    interval_ms: tick_ms,
                },
            };
            let mut prices = tickctl::bill::Prices::default();
            for p in price {
                prices.set(p)?;
            }
            let stack = tickctl::bill::Stack { dashboard: *dashboard, ..Default::default() };
            let (r, priced) = tickctl::bill::price(&input, &stack, &prices)?;
            return print_cost(cli.json, &input, &r, &priced);
        }
        _ => {}
    }
    let base = Base::from_env(&env, "tickctl").await?;
    match cli.cmd {
        Cmd::Audit { .. } | Cmd::Cost { .. } => unreachable!("handled above"),
        Cmd::Provision => {
            let made = tickctl::provision(&base, &env).await?;
            if cli.json {
                json(&made)?;
            } else {
                for m in made {
                    println!("ready: {m}");
                }
            }
        }
        Cmd::Seed { tenants, zones } => {
            let names = cost::zones(&[], Some(zones))?;
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let deps = pulse_sweep::Deps::from_env(&env).await?;
            let list: Vec<_> = (0..tenants).map(|i| tickwork::tenants::sample_tenant(i, &names, None)).collect();
            pulse_sweep::add_tenants(&deps, &list).await?;
            println!("seeded {tenants} tenants over {} zones", names.len());
        }
        Cmd::Status => {
            let s = tickctl::status(&base, &env).await?;
            if cli.json {
                json(&s)?;
            } else {
                print_status(&s);
            }
        }
        Cmd::Plan { job, at } => {
            let at_ms = match at {
                Some(s) => s.parse::<jiff::Timestamp>().with_context(|| format!("--at `{s}`"))?.as_millisecond(),
                None => jiff::Timestamp::now().as_millisecond(),
            };
            let deps = pulse_sweep::Deps::from_env(&env).await.context("pulse-sweep configuration")?;
            let pb = bar(0, "counting tenants");
            let p = tickctl::plan(&deps, &job, at_ms, |done, total| {
                pb.set_length(total);
                pb.set_position(done);
            })
            .await?;
            pb.finish_and_clear();
            if cli.json {
                json(&p)?;
            } else {
                print_plan(&p);
            }
        }
        Cmd::Pause { job, reason } => {
            let name = tickctl::set_paused(&base, &env, job, true, reason.as_deref()).await?;
            println!("{name}: paused");
        }
        Cmd::Resume { job } => {
            let name = tickctl::set_paused(&base, &env, job, false, None).await?;
            println!("{name}: resumed");
        }
        Cmd::DeadLetters { action } => {
            let q =
                Queue::new(base.db.clone(), base.core.table("queue"), QueueConfig::from_env(&env)?, base.clock.clone());
            match action {
                Dead::List => {
                    let list = q.dead_letters().await?;
                    if cli.json {
                        json(&list)?;
                    } else {
                        let mut t = table(&["id", "kind", "tenant", "attempts", "failed at", "last error"]);
                        for d in &list {
                            t.add_row(vec![
                                d.id.clone(),
                                d.kind.clone(),
                                d.tenant.clone().unwrap_or_default(),
                                d.attempts.to_string(),
                                time(d.failed_at_ms),
                                d.last_error.clone(),
                            ]);
                        }
                        println!("{t}\n{} dead letter(s)", list.len());
                    }
                }
                Dead::Retry { id } => {
                    anyhow::ensure!(q.retry_dead(&id).await?, "`{id}` is not a dead letter");
                    println!("{id}: back in the queue");
                }
                Dead::Purge { id } => {
                    anyhow::ensure!(q.purge_dead(&id).await?, "`{id}` is not a dead letter");
                    println!("{id}: purged");
                }
            }
        }
        Cmd::Invoke { function, event } => {
            let text =
                std::fs::read_to_string(&event).map_err(|e| anyhow::anyhow!("reading {}: {e}", event.display()))?;
            let ev: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{} is not JSON: {e}", event.display()))?;
            json(&tickctl::invoke(&env, &function, ev).await?)?;
        }
    }
    Ok(0)
}

fn print_status(s: &tickctl::Status) {
    let mut t = table(&["job", "lease holder", "token", "lease expires", "paused", "watermarks"]);
    for j in &s.jobs {
        let (holder, token, exp) = match &j.lease {
            Some(l) => (l.owner.clone(), l.token.to_string(), time(l.expires_at_ms)),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let paused = match (j.watermark.paused, &j.watermark.paused_reason) {
            (true, Some(r)) => format!("yes: {r}"),
            (true, None) => "yes".into(),
            _ => "no".into(),
        };
        let mut marks: Vec<String> = j.watermark.marks.iter().map(|(g, m)| format!("{g} {m}")).collect();
        let unmarked: Vec<&String> =
            j.watermark.groups.iter().filter(|g| !j.watermark.marks.contains_key(*g)).collect();
        if !unmarked.is_empty() {
            marks.push(format!(
                "never completed: {}",
                unmarked.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
        t.add_row(vec![j.job.clone(), holder, token, exp, paused, marks.join("\n")]);
    }
    println!("{t}");
    // One capped poll per shard: at the cap, say so rather than print a number that looks exact.
    let ready: Vec<String> = s
        .ready_by_shard
        .iter()
        .map(|(k, n)| if *n >= tickctl::READY_CAP { format!("{k}:≥{n}") } else { format!("{k}:{n}") })
        .collect();
    println!(
        "queue ready per shard: {}   dead letters: {}   worker: {}",
        ready.join(" "),
        s.dead_letters,
        if s.worker_paused { "paused" } else { "running" }
    );
    if !s.failures.is_empty() {
        let mut t = table(&["job", "run", "unit isolated", "when", "error"]);
        for (job, list) in &s.failures {
            for f in list {
                t.add_row(vec![job.clone(), f.run.clone(), f.unit.clone(), time(f.at_ms), f.error.clone()]);
            }
        }
        println!("units isolated as failed (visited again at their next run; kept 14 days):\n{t}");
    }
    if s.archiver_checkpoints.is_empty() {
        println!("archiver: no sweep in progress");
    } else {
        let pos: Vec<String> = s.archiver_checkpoints.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        println!("archiver positions: {}", pos.join(" "));
    }
}

fn print_plan(p: &tickctl::Plan) {
    println!(
        "{} at {}{}; an idle tick is {} read, {} writes",
        p.job,
        p.at,
        if p.paused { " (PAUSED: every tick does nothing)" } else { "" },
        p.idle_tick.0,
        p.idle_tick.1
    );
    let mut t = table(&[
        "zone",
        "local date",
        "watermark",
        "next boundary (UTC)",
        "grains",
        "tenants",
        "pages",
        "reads",
        "writes",
    ]);
    for g in &p.groups {
        t.add_row(vec![
            g.zone.clone(),
            g.local_date.clone(),
            g.watermark.clone().unwrap_or_else(|| "-".into()),
            if g.due_now { format!("{} (due now)", g.next_boundary) } else { g.next_boundary.clone() },
            g.grains.join(","),
            g.tenants.to_string(),
            g.pages.to_string(),
            g.reads.to_string(),
            g.writes.to_string(),
        ]);
    }
    println!("{t}");
    let mut t = table(&["tick at or after (UTC)", "groups", "reads", "writes"]);
    for k in &p.ticks {
        t.add_row(vec![k.at.clone(), k.groups.join(", "), k.reads.to_string(), k.writes.to_string()]);
    }
    println!("{t}\n(plan itself made {} requests and wrote nothing)", p.plan_requests);
}

/// A `--price` refused at parsing: a usage error (exit 2) naming the known prices.
fn price_arg(spec: &str) -> std::result::Result<String, String> {
    tickctl::bill::Prices::default().set(spec).map(|_| spec.to_string()).map_err(|e| e.to_string())
}

fn print_cost(as_json: bool, input: &CostInput, r: &cost::CostReport, priced: &tickctl::bill::Priced) -> Result<i32> {
    if as_json {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            #[serde(flatten)]
            model: &'a cost::CostReport,
            usd_per_month: &'a tickctl::bill::Priced,
        }
        json(&Out { model: r, usd_per_month: priced })?;
        return Ok(0);
    }
    let month = 30.0 / r.days;
    println!(
        "{} tenants in {} zones, {} sweep worker(s) every {} s, queue worker every {} s, {:.1} days from {}",
        input.tenants,
        input.zones.len(),
        input.workers,
        input.tick_ms / 1000,
        input.tick_ms * i64::from(input.drain_every) / 1000,
        r.days,
        time(input.start_ms)
    );
    let mut t = table(&[
        "job",
        "invocations",
        "read req",
        "write req",
        "RCU",
        "WCU",
        "req / 30 days",
        "RCU / 30 days",
        "WCU / 30 days",
    ]);
    let total = r.total();
    for j in r.jobs.iter().chain([&total, &r.before]) {
        let name = if j.job == "before" { "000_* before (sweep)".to_string() } else { j.job.clone() };
        t.add_row(vec![
            name,
            j.invocations.to_string(),
            j.reads.to_string(),
            j.writes.to_string(),
            format!("{:.0}", j.rcu),
            format!("{:.0}", j.wcu),
            format!("{:.0}", j.requests() as f64 * month),
            format!("{:.0}", j.rcu * month),
            format!("{:.0}", j.wcu * month),
        ]);
    }
    println!("{t}");
    let sweep = r.job("pulse-sweep").map(|j| j.requests()).unwrap_or(0).max(1);
    println!(
        "pulses: {}\nbefore / tickwork sweep: {:.1}x requests\nper operation: {}",
        r.pulses.iter().map(|(g, n)| format!("{g} {n}")).collect::<Vec<_>>().join(", "),
        r.before.requests() as f64 / sweep as f64,
        r.jobs
            .iter()
            .map(|j| format!(
                "{} {}",
                j.job,
                j.ops.iter().map(|(o, n)| format!("{o}={n}")).collect::<Vec<_>>().join(" ")
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let mut t = table(&["service", "item", "quantity", "unit", "USD / month"]);
    for l in &priced.bill.lines {
        t.add_row(vec![
            l.service.to_string(),
            l.item.clone(),
            format!("{:.2}", l.quantity),
            l.unit.to_string(),
            format!("{:.2}", l.usd),
        ]);
    }
    println!("\nthe bill, a month (prices: `--json` lists them with their names; `--price name=value` overrides)\n{t}");
    println!(
        "tickwork, whole stack: ${:.2} a month (DynamoDB ${:.2}, Lambda ${:.2}, CloudWatch ${:.2}, of which monitoring ${:.2})",
        priced.bill.total(),
        priced.bill.service("DynamoDB"),
        priced.bill.service("Lambda"),
        priced.bill.service("CloudWatch"),
        priced.bill.monitoring()
    );
    println!(
        "000_* before design, its DynamoDB alone (its sweep every minute, as it ran): ${:.2} a month",
        priced.before_dynamodb_usd
    );
    println!(
        "one EventBridge Scheduler schedule per tenant, firing a Lambda a local day: ${:.2} a month",
        priced.scheduler_per_tenant.total()
    );
    Ok(0)
}

fn audit(env: &Env, as_json: bool, log: &str) -> Result<i32> {
    // An idle queue worker or archiver reads one Query per shard: the shard counts configured.
    let mut rules = tickctl::audit::Rules::default();
    rules.idle_reads.insert("queue-worker".into(), u64::from(env.parse_or("TICKWORK_QUEUE_SHARDS", 8u32)?));
    rules.idle_reads.insert("archiver".into(), u64::from(env.parse_or("TICKWORK_CHANGE_SHARDS", 8u32)?));
    let a = if log == "-" {
        let pb = bytes_bar(None, "reading stdin");
        let a = tickctl::audit::audit(std::io::stdin().lock(), &rules, |b| pb.set_position(b))?;
        pb.finish_and_clear();
        a
    } else {
        let f = std::fs::File::open(log).with_context(|| format!("opening {log}"))?;
        let pb = bytes_bar(f.metadata().ok().map(|m| m.len()), log);
        let a = tickctl::audit::audit(std::io::BufReader::new(f), &rules, |b| pb.set_position(b))?;
        pb.finish_and_clear();
        a
    };
    if as_json {
        json(&a)?;
    } else {
        let mut t = table(&["job", "table[/index] operation", "requests", "items read", "items written", "RCU", "WCU"]);
        for (job, lines) in &a.capacity {
            for (k, l) in lines {
                t.add_row(vec![
                    job.clone(),
                    k.clone(),
                    format!("{:.0}", l.requests),
                    format!("{:.0}", l.items_read),
                    format!("{:.0}", l.items_written),
                    format!("{:.1}", l.rcu),
                    format!("{:.1}", l.wcu),
                ]);
            }
        }
        println!("{t}");
        let mut t = table(&["job", "invocations", "idle", "max reads when idle", "expected"]);
        for (job, i) in &a.invocations {
            t.add_row(vec![
                job.clone(),
                i.count.to_string(),
                i.idle.to_string(),
                i.idle_reads_max.to_string(),
                i.idle_expected.to_string(),
            ]);
        }
        println!("{t}");
        for (job, c) in &a.counts {
            let v: Vec<String> = c.iter().map(|(k, n)| format!("{k}={n}")).collect();
            println!("{job}: {}", v.join(" "));
        }
        println!("{} lines read, {} unreadable", a.lines, a.unreadable);
        if a.findings.is_empty() {
            println!("no findings");
        }
        for f in &a.findings {
            println!("FINDING {}: {}", f.job, f.message);
        }
    }
    Ok(if a.findings.is_empty() { 0 } else { 3 })
}
