//! How `tickctl` prints: a table for people (comfy-table), JSON with `--json`, progress bars
//! only on a terminal (scripts and pipes see nothing).
use std::io::IsTerminal;

use anyhow::Result;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use indicatif::{ProgressBar, ProgressStyle};
use tickctl::cost::{self, CostInput};

pub fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(header.to_vec());
    t
}

pub fn json<T: serde::Serialize>(v: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

pub fn time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map(|t| t.to_string()).unwrap_or_else(|_| ms.to_string())
}

pub fn bar(len: u64, what: &str) -> ProgressBar {
    // Drawn only on a terminal; scripts and pipes see nothing.
    let pb = if std::io::stderr().is_terminal() { ProgressBar::new(len) } else { ProgressBar::hidden() };
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed}").expect("template").progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

pub fn bytes_bar(len: Option<u64>, what: &str) -> ProgressBar {
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

pub fn print_status(s: &tickctl::Status) {
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

pub fn print_plan(p: &tickctl::Plan) {
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

pub fn print_cost(
    as_json: bool,
    input: &CostInput,
    r: &cost::CostReport,
    priced: &tickctl::bill::Priced,
) -> Result<i32> {
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

/// The audit's tables and findings.
pub fn print_audit(a: &tickctl::audit::Audit) {
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

/// An import's counts and every refused row with its line and reason.
pub fn print_import(r: &tickctl::tenants::ImportReport) {
    if !r.refused.is_empty() {
        let mut t = table(&["line", "id", "refused because"]);
        for x in &r.refused {
            t.add_row(vec![x.line.to_string(), x.id.clone().unwrap_or_default(), x.reason.clone()]);
        }
        println!("{t}");
    }
    println!(
        "{} rows: {} added, {} unchanged, {} repeated in the file, {} refused",
        r.rows,
        r.added,
        r.unchanged,
        r.repeated,
        r.refused.len()
    );
}

/// The boundary of one zone group, as `cost` prints it.
#[derive(Debug, serde::Serialize)]
pub struct Boundary {
    /// What was asked, the assumptions included.
    pub input: tickctl::boundary::BoundaryInput,
    /// How it goes.
    pub time: tickctl::boundary::BoundaryTime,
    /// The target asked about, ms.
    pub target_ms: f64,
    /// The fewest workers that finish within the target (at most 64), if any.
    pub needed: Option<u32>,
    /// The tenant shard count allows a shared run (at most 96 shards).
    pub shared_ok: bool,
    /// The burst's own cost: its units and its invocations, USD.
    pub burst_usd: f64,
}

/// The boundary section (nothing with `--json`: it is in the JSON already).
pub fn print_boundary(as_json: bool, b: &Boundary) {
    if as_json {
        return;
    }
    let (i, t) = (&b.input, &b.time);
    println!(
        "\none zone group's boundary: {} tenants, {} shards, pages of {}, {} worker(s); assumed {} ms a request, {} ms an Invoke",
        i.tenants, i.shards, i.page_size, i.workers, i.latency_ms, i.invoke_ms
    );
    println!(
        "  done in {:.1} s{} ({} round(s) of shards, {:.1} s the longest shard, {} pages of it)",
        t.total_ms / 1000.0,
        if t.ticks > 1 {
            format!(", over {} ticks: work past an invocation waits for the next", t.ticks)
        } else {
            String::new()
        },
        t.rounds,
        t.shard_ms / 1000.0,
        t.pages_per_shard
    );
    println!(
        "  writes {:.0} units ({:.0} a second at the peak; the table's limit {:.0}), reads {:.0}; one ready-index key takes {:.0} a second, the checkpoint key {:.0} (a partition's limit {:.0}): {}",
        t.write_units,
        t.peak_wcu_per_sec,
        tickctl::boundary::TABLE_MAX_WCU_PER_SEC,
        t.read_units,
        t.peak_ready_wcu_per_sec,
        t.peak_checkpoint_wcu_per_sec,
        tickctl::boundary::PARTITION_MAX_WCU_PER_SEC,
        if t.within_limits { "within each" } else { "OVER A LIMIT: fewer workers, or more queue shards" }
    );
    match b.needed {
        Some(w) => println!(
            "  workers to finish within {:.0} s: {w} (TICKWORK_PULSE_SHARD_WORKERS / ShardWorkers)",
            b.target_ms / 1000.0
        ),
        None => {
            println!("  no count of workers up to 64 finishes within {:.0} s: more tenant shards", b.target_ms / 1000.0)
        }
    }
    if !b.shared_ok {
        println!(
            "  (shard workers need at most {} tenant shards; this configuration has {})",
            pulse_sweep::MAX_SHARED_SHARDS,
            i.shards
        );
    }
    println!("  the burst itself: ${:.4} (its write and read units, its invocations)", b.burst_usd);
}

/// The bill of a load above [`tickctl::cost::FULL_MODEL_MAX`] tenants: by service, from the model
/// at two sizes, and the boundary.
pub fn print_scaled(
    as_json: bool,
    input: &CostInput,
    sizes: (usize, usize),
    row: &tickctl::bill::AtScale,
    b: &Boundary,
) -> Result<i32> {
    if as_json {
        json(&serde_json::json!({
            "tenants": input.tenants,
            "modelled_at": [sizes.0, sizes.1],
            "usd_per_month": {
                "services": tickctl::bill::SERVICES,
                "tickwork": row.tickwork,
                "tickwork_total": row.tickwork.iter().sum::<f64>(),
                "before_dynamodb": row.before_dynamodb,
                "scheduler_per_tenant": row.scheduler,
            },
            "boundary": b,
        }))?;
        return Ok(0);
    }
    println!(
        "{} tenants in {} zones: the model runs in full at {} and {} tenants, each service a straight line through them",
        input.tenants,
        input.zones.len(),
        sizes.0,
        sizes.1
    );
    let mut t = table(&["design", "DynamoDB", "Lambda", "CloudWatch", "S3", "EventBridge", "USD / month"]);
    let mut line = |name: &str, v: &[f64]| {
        let mut cells = vec![name.to_string()];
        cells.extend(v.iter().map(|x| format!("{x:.2}")));
        cells.push(format!("{:.2}", v.iter().sum::<f64>()));
        t.add_row(cells);
    };
    line("tickwork, whole stack", &row.tickwork);
    line("one Scheduler schedule per tenant", &row.scheduler);
    println!("{t}");
    println!(
        "000_* before design, its DynamoDB alone: ${:.2} a month (it visits 100 tenants a tick and skips the rest)",
        row.before_dynamodb
    );
    print_boundary(false, b);
    Ok(0)
}
