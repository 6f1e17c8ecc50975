//! `tickctl schedules …`: tenants' schedules on the command line, through the library's
//! [`tickwork::schedules::Schedules`] as the sweep's configuration names it (its job, its control
//! table, its lateness bound). The tenant is read first: it must exist, and its zone governs.

use anyhow::Result;
use tickwork::config::Env;
use tickwork::schedules::{upcoming, Changed, Dst, ScheduleDef, Schedules, Spec};
use tickwork_lambda::Base;

use crate::cli::SchedCmd;
use crate::render::{done, json};

/// The schedules the deployed sweep fires, and its tenants.
pub(crate) async fn store(env: &Env) -> Result<(Schedules, tickwork::tenants::Tenants)> {
    use tickwork::env as vars;
    let base = Base::from_env(env, "tickctl").await?;
    let job = pulse_sweep::config::job(env)?;
    let tenants = tickwork::tenants::Tenants::new(
        base.db.clone(),
        base.core.table_from(env, vars::TENANTS_TABLE, "tenants"),
        tickwork::config::tenant_shards(env)?,
    );
    Ok((Schedules::new(base.db.clone(), &base.core.control_table, job, base.clock.clone()), tenants))
}

/// The tenant's zone, or an error naming the missing tenant.
async fn zone_of(tenants: &tickwork::tenants::Tenants, id: &str) -> Result<String> {
    match tenants.get(id).await? {
        Some(t) => Ok(t.zone),
        None => anyhow::bail!("no tenant `{id}` (add it first: tickctl tenants add {id} --zone <ZONE>)"),
    }
}

/// One schedule as a listing shows it.
#[derive(serde::Serialize)]
struct Listed {
    tenant: String,
    name: String,
    spec: String,
    spread_min: u32,
    gap: String,
    fold: String,
    paused: bool,
}

/// One coming fire.
#[derive(serde::Serialize)]
struct Coming {
    name: String,
    occurrence: String,
    instant: String,
    due: String,
}

pub async fn run(env: &Env, as_json: bool, action: SchedCmd) -> Result<i32> {
    let (s, tenants) = store(env).await?;
    let policy = pulse_sweep::config::policy(env, std::time::Duration::from_secs(900))?;
    let lateness = &policy;
    let said = |c: Changed| match c {
        Changed::Added => "added",
        Changed::Changed => "changed (owed from now)",
        Changed::Unchanged => "unchanged",
    };
    match action {
        SchedCmd::Add { tenant, name, spec, spread, gap, fold } => {
            let spec: Spec = spec.parse()?;
            let mut dst = Dst::for_spec(&spec);
            dst.gap = gap.parse()?;
            if let Some(f) = fold {
                dst.fold = f.parse()?;
            }
            let def = ScheduleDef::new(&name, spec, spread, dst)?;
            let zone = zone_of(&tenants, &tenant).await?;
            let c = s.put(&tenant, &zone, def, lateness).await?;
            done(as_json, said(c), &format!("{tenant}/{name}"))?;
        }
        SchedCmd::Import { file, from_scheduler, tenant_field, target, from_crontab, zone, tenant }
            if from_scheduler || from_crontab =>
        {
            let text = if file == "-" {
                std::io::read_to_string(std::io::stdin().lock())?
            } else {
                std::fs::read_to_string(&file).map_err(|e| anyhow::anyhow!("reading {file}: {e}"))?
            };
            let (rows, mut refused) = if from_scheduler {
                let all = tickctl::migrate::scheduler_schedules(&text).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
                let now = jiff::Timestamp::now().as_millisecond();
                tickctl::migrate::from_scheduler(
                    &all,
                    &tickctl::migrate::SchedulerOptions { tenant_field, target },
                    now,
                )
            } else {
                tickctl::migrate::from_crontab(
                    &text,
                    zone.as_deref().unwrap_or("UTC"),
                    tenant.as_deref().unwrap_or_default(),
                )
            };
            let r = crate::cmd::migrate::write(&s, &tenants, rows, lateness, &mut refused).await?;
            if as_json {
                let refused: Vec<_> =
                    refused.iter().map(|r| serde_json::json!({"source": r.source, "reason": r.reason})).collect();
                json(&serde_json::json!({ "imported": r, "refused": refused }))?;
            } else {
                println!("added {}, changed {}, unchanged {}", r.added, r.changed, r.unchanged);
                for x in &refused {
                    println!("{}: {}", x.source, x.reason);
                }
            }
            if !refused.is_empty() {
                eprintln!("tickctl: {} schedule(s) refused (each listed with its reason)", refused.len());
                return Ok(1);
            }
        }
        SchedCmd::Import { file, .. } => {
            let text = if file == "-" {
                let mut v = Vec::new();
                std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut v)?;
                v
            } else {
                std::fs::read(&file).map_err(|e| anyhow::anyhow!("reading {file}: {e}"))?
            };
            let rows = tickctl::schedule_rows::parse(&text)?;
            let mut refused: Vec<(u64, String)> = Vec::new();
            let mut zones: std::collections::HashMap<String, Option<String>> = Default::default();
            let mut good = Vec::new();
            for (line, row) in rows {
                match row {
                    Err(e) => refused.push((line, e)),
                    Ok((tenant, def)) => {
                        if !zones.contains_key(&tenant) {
                            let z = tenants.get(&tenant).await?.map(|t| t.zone);
                            zones.insert(tenant.clone(), z);
                        }
                        match zones[&tenant].clone() {
                            Some(zone) => match s.check_row(&tenant, &zone, &def, lateness) {
                                Ok(()) => good.push((tenant, zone, def)),
                                Err(e) => refused.push((line, e.0)),
                            },
                            None => refused.push((line, format!("no tenant `{tenant}`"))),
                        }
                    }
                }
            }
            let r = s.put_many(good, lateness).await?;
            if as_json {
                json(&serde_json::json!({ "imported": r, "refused": refused }))?;
            } else {
                println!("added {}, changed {}, unchanged {}", r.added, r.changed, r.unchanged);
                for (line, e) in &refused {
                    println!("line {line}: {e}");
                }
            }
            if !refused.is_empty() {
                eprintln!("tickctl: {} row(s) refused (each listed with its reason)", refused.len());
                return Ok(1);
            }
        }
        SchedCmd::List { tenant } => {
            let all: Vec<Listed> = s
                .list(&tenant)
                .await?
                .into_iter()
                .map(|x| Listed {
                    tenant: x.tenant,
                    name: x.def.name,
                    spec: x.def.spec.to_string(),
                    spread_min: x.def.spread_min,
                    gap: x.def.dst.gap.to_string(),
                    fold: x.def.dst.fold.to_string(),
                    paused: x.paused,
                })
                .collect();
            if as_json {
                json(&all)?;
            } else {
                for l in &all {
                    let state = if l.paused { "paused" } else { "active" };
                    println!(
                        "{:<24} {:<32} spread {:>4} min  gap {:<5} fold {:<5} {state}",
                        l.name, l.spec, l.spread_min, l.gap, l.fold
                    );
                }
                eprintln!("{} schedule(s)", all.len());
            }
        }
        SchedCmd::Pause { tenant, name } => {
            let zone = zone_of(&tenants, &tenant).await?;
            let c = s.set_paused(&tenant, &name, true, &zone).await?;
            done(
                as_json,
                if c == Changed::Unchanged { "already paused" } else { "paused" },
                &format!("{tenant}/{name}"),
            )?;
        }
        SchedCmd::Resume { tenant, name } => {
            let zone = zone_of(&tenants, &tenant).await?;
            let c = s.set_paused(&tenant, &name, false, &zone).await?;
            done(as_json, if c == Changed::Unchanged { "not paused" } else { "resumed" }, &format!("{tenant}/{name}"))?;
        }
        SchedCmd::Remove { tenant, name } => {
            anyhow::ensure!(s.remove(&tenant, &name).await?, "tenant `{tenant}` has no schedule `{name}`");
            done(as_json, "removed", &format!("{tenant}/{name}"))?;
        }
        SchedCmd::Doctor { repair, repair_all } => return doctor(&s, as_json, repair, repair_all).await,
        SchedCmd::Next { tenant, name, count, from } => {
            let from_ms = match from {
                Some(t) => {
                    t.parse::<jiff::Timestamp>().map_err(|e| anyhow::anyhow!("--from `{t}`: {e}"))?.as_millisecond()
                }
                None => jiff::Timestamp::now().as_millisecond(),
            };
            let zone = zone_of(&tenants, &tenant).await?;
            // One schedule by its key (the name is the definition's sort key), or the tenant's all.
            let all = match &name {
                Some(n) => vec![s
                    .get(&tenant, n)
                    .await?
                    .ok_or_else(|| anyhow::anyhow!("tenant `{tenant}` has no schedule `{n}`"))?],
                None => s.list(&tenant).await?,
            };
            let mut coming = Vec::new();
            for x in &all {
                for (o, due) in upcoming(x, &zone, from_ms, count as usize)? {
                    let at = |ms: i64| jiff::Timestamp::from_millisecond(ms).map(|t| t.to_string()).unwrap_or_default();
                    coming.push(Coming {
                        name: x.def.name.clone(),
                        occurrence: o.key,
                        instant: at(o.at_ms),
                        due: at(due),
                    });
                }
            }
            coming.sort_by(|a, b| (&a.due, &a.name).cmp(&(&b.due, &b.name)));
            if as_json {
                json(&coming)?;
            } else {
                for c in &coming {
                    println!("{:<24} {}  due {}", c.name, c.occurrence, c.due);
                }
            }
        }
    }
    Ok(0)
}

/// A group set aside, as `schedules doctor` shows it.
#[derive(serde::Serialize)]
struct SetAside {
    group: String,
    /// The record's key as it was, `pk|sk`.
    from: String,
    problem: String,
    set_aside_at: String,
    /// What a repair did: `as_it_was`, `from_head`, or why it could not.
    repaired: Option<String>,
}

/// `schedules doctor`: the groups set aside, each repaired when asked; exit 1 while one is left.
async fn doctor(s: &Schedules, as_json: bool, repair: Option<String>, all: bool) -> Result<i32> {
    let at = |ms: i64| jiff::Timestamp::from_millisecond(ms).map(|t| t.to_string()).unwrap_or_default();
    let mut rows = Vec::new();
    for q in s.quarantined_all().await? {
        let row = match q {
            Ok(q) => SetAside {
                from: format!("{}|{}", q.from.0, q.from.1),
                problem: q.problem,
                set_aside_at: at(q.at_ms),
                group: q.group,
                repaired: None,
            },
            Err((group, problem)) => {
                SetAside { group, from: String::new(), problem, set_aside_at: String::new(), repaired: None }
            }
        };
        rows.push(row);
    }
    if let Some(g) = &repair {
        anyhow::ensure!(
            rows.iter().any(|r| &r.group == g),
            "no schedule group `{g}` is set aside (see tickctl schedules doctor)"
        );
    }
    let mut left = 0;
    for row in &mut rows {
        if !(all || repair.as_deref() == Some(row.group.as_str())) {
            left += 1;
            continue;
        }
        row.repaired = Some(match s.repair(&row.group).await {
            Ok((rec, how)) => {
                let how = if how == tickwork::schedules::Repair::AsItWas { "as it was" } else { "from its head" };
                format!("repaired {how}: due {}", at(rec.due_ms))
            }
            Err(e) => {
                left += 1;
                format!("not repaired: {e}")
            }
        });
    }
    if as_json {
        json(&rows)?;
    } else {
        for r in &rows {
            println!("{}  {}  set aside {}: {}", r.group, r.from, r.set_aside_at, r.problem);
            if let Some(how) = &r.repaired {
                println!("    {how}");
            }
        }
        eprintln!("{} group(s) set aside, {left} left", rows.len());
    }
    Ok(if left > 0 { 1 } else { 0 })
}
