//! What `status`, `plan`, `audit` and `tenants import` print.

use super::style::{table, time};

pub fn print_status(s: &tickctl::Status) {
    println!(
        "stack release {} (tickctl {}), time zone database {}, optional parts: {}",
        s.stack_version.as_deref().unwrap_or("unknown: no Version output read (--stack NAME)"),
        s.tickctl_version,
        s.tzdb,
        s.parts.text()
    );
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
        // The sweep's schedules: when the earliest due record is, and the wake set for it.
        if let Some(n) = j.watermark.sched_next {
            let wake = j.watermark.sched_wake.map(time).unwrap_or_else(|| "-".into());
            marks.push(format!("schedules: next due {}, wake set for {wake}", time(n)));
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
    if !s.schedules_set_aside.is_empty() {
        println!(
            "schedule groups set aside, firing nothing until repaired (tickctl schedules doctor --repair-all): {}",
            s.schedules_set_aside.iter().map(|(g, p)| format!("{g} ({p})")).collect::<Vec<_>>().join(", ")
        );
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
        "added now: first owed",
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
            g.new_tenants_owed.join(", "),
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
