//! `tickctl tenants …`: the tenant lifecycle on the command line, through the library's
//! [`tickwork::tenants::Tenants`], so every path registers the zone with the sweep first.

use anyhow::{Context, Result};
use tickwork::config::Env;
use tickwork_lambda::Base;

use crate::cli::TenantCmd;
use crate::render::{self, bar, done, json};

/// The tenants table as the sweep's configuration names it, with the sweep's zone registry. Only
/// reads the shard registry (the sweep's start-up records its own counts; an operator's tool
/// with another environment must not add to them).
async fn tenants_table(env: &Env) -> Result<tickwork::tenants::Tenants> {
    use tickwork::env as vars;
    let base = Base::from_env(env, "tickctl").await?;
    let job = pulse_sweep::config::job(env)?;
    let shards = tickwork::config::tenant_shards(env)?;
    let read = tickwork::shard::ShardRegistry::new(base.db.clone(), &base.core.control_table)
        .effective("tenants", shards)
        .await?;
    let marks = tickwork::watermark::Watermarks::new(base.db.clone(), &base.core.control_table, base.clock.clone());
    Ok(tickwork::tenants::Tenants::new(
        base.db.clone(),
        base.core.table_from(env, vars::TENANTS_TABLE, "tenants"),
        shards,
    )
    .with_read_shards(read)
    .with_registry(marks, job))
}

/// The sweep's catch-up policy: whether, and how far back, `--owed-from` can be kept.
fn policy(env: &Env) -> Result<tickwork::calendar::Policy> {
    Ok(pulse_sweep::config::policy(env, std::time::Duration::from_secs(900))?)
}

pub async fn run(env: &Env, as_json: bool, action: TenantCmd) -> Result<i32> {
    let table = tenants_table(env).await?;
    let t = &table;
    let now = || jiff::Timestamp::now().as_millisecond();
    let one = |id: &str, what: &str| -> Result<i32> {
        done(as_json, what, id)?;
        Ok(0)
    };
    match action {
        TenantCmd::Add { id, zone, owed_from } => {
            // As an import reads a row: trimmed, the zone under its canonical name.
            let new = tickctl::tenants::canonical(tickwork::tenants::Tenant::new(id.trim(), zone.trim()))?;
            let new = tickctl::tenants::owed_from(new, owed_from, now(), &policy(env)?)?;
            let (id, zone) = (new.id.clone(), new.zone.clone());
            let r = t.add(&[new], now()).await?;
            if r.added == 1 {
                return one(&id, "added");
            }
            match tickctl::tenants::existing(&id, &zone, t.get(&id).await?.as_ref()) {
                Ok(()) => {
                    if let Some(d) = owed_from {
                        eprintln!("tickctl: `{id}` exists: --owed-from {d} changes nothing an existing tenant is owed");
                    }
                    one(&id, "exists (unchanged)")
                }
                Err(why) => anyhow::bail!("tenant `{id}`: {why}"),
            }
        }
        TenantCmd::Import { file, format, owed_from } => {
            let format = match format {
                Some(f) => f,
                None if file == "-" => anyhow::bail!("reading standard input: say --format csv or --format ndjson"),
                None => tickctl::tenants::Format::of_path(&file)?,
            };
            let rows = if file == "-" {
                tickctl::tenants::parse(std::io::stdin().lock(), format)?
            } else {
                let f = std::fs::File::open(&file).with_context(|| format!("opening {file}"))?;
                tickctl::tenants::parse(std::io::BufReader::new(f), format).with_context(|| file.clone())?
            };
            let rows = tickctl::tenants::rows_owed_from(rows, owed_from, now(), &policy(env)?);
            let pb = bar(rows.tenants.len() as u64, "adding tenants");
            let report = tickctl::tenants::import(t, rows, now(), |done, _| pb.set_position(done)).await?;
            pb.finish_and_clear();
            if as_json {
                json(&report)?;
            } else {
                render::print_import(&report);
            }
            if let (Some(d), true) = (owed_from, report.unchanged > 0) {
                eprintln!(
                    "tickctl: {} rows named tenants that exist: --owed-from {d} changes nothing they are owed",
                    report.unchanged
                );
            }
            if !report.refused.is_empty() {
                eprintln!(
                    "tickctl: {} of {} rows refused (each listed with its reason)",
                    report.refused.len(),
                    report.rows
                );
                return Ok(1);
            }
            Ok(0)
        }
        TenantCmd::List { zone } => {
            let mut shown = 0u64;
            let mut print = |page: Vec<Result<tickwork::tenants::Tenant, tickwork::tenants::InvalidTenant>>| {
                for x in page {
                    let l = tickctl::tenants::Listed::of(x);
                    shown += 1;
                    if as_json {
                        println!("{}", serde_json::to_string(&l).expect("a listed tenant serialises"));
                    } else {
                        println!("{:<40} {:<24} {:<10} {}", l.id, l.zone, l.status, l.position);
                    }
                }
            };
            match zone {
                None => {
                    let mut cursor = None;
                    loop {
                        let (page, next) = t.list_page(cursor.as_ref(), 1000).await?;
                        print(page);
                        match next {
                            Some(c) => cursor = Some(c),
                            None => break,
                        }
                    }
                }
                Some(zone) => {
                    let zone =
                        tickctl::tenants::canonical_zone(&zone).map_err(|e| anyhow::anyhow!("--zone: {}", e.0))?;
                    for k in 0..t.shards() {
                        t.for_each_zone_page(&zone, k, None, 1000, &tickwork::budget::Unlimited, |page, _| {
                            print(page);
                            std::future::ready(Ok::<(), tickwork::DbError>(()))
                        })
                        .await
                        .map_err(tickwork::DbError::from)?;
                    }
                }
            }
            if !as_json {
                eprintln!("{shown} tenant(s)");
            }
            Ok(0)
        }
        TenantCmd::Suspend { id } => {
            anyhow::ensure!(t.suspend(&id).await?, "no tenant `{id}`");
            one(&id, "suspended")
        }
        // A suspended tenant's schedules fire nothing (the sweep reads the tenant); resumed or
        // moved, they are owed from now (in its zone now); removed, they go with it.
        TenantCmd::Resume { id } => {
            anyhow::ensure!(t.resume(&id).await?, "no tenant `{id}`");
            let zone = t.get(&id).await?.map(|x| x.zone).unwrap_or_default();
            crate::cmd::schedules::store(env).await?.0.retarget(&id, &zone).await?;
            one(&id, "resumed")
        }
        TenantCmd::Move { id, zone } => {
            let zone = tickctl::tenants::canonical(tickwork::tenants::Tenant::new(id.as_str(), zone.trim()))?.zone;
            anyhow::ensure!(t.move_zone(&id, &zone).await?, "no tenant `{id}`");
            crate::cmd::schedules::store(env).await?.0.retarget(&id, &zone).await?;
            one(&id, &format!("in {zone}"))
        }
        TenantCmd::Explain { id } => explain(env, as_json, &id).await,
        TenantCmd::Remove { id } => {
            // Its schedules first: a remove stopped between the two is run again and finds the
            // tenant still there (the other order would leave definitions no command reaches,
            // which a tenant added again under the id would find `Unchanged` and never fire).
            crate::cmd::schedules::store(env).await?.0.remove_all(&id).await?;
            anyhow::ensure!(t.remove(&id).await?, "no tenant `{id}`");
            one(&id, "removed")
        }
    }
}

/// `tenants explain`: the control function's own operation, run here against the stack's tables.
async fn explain(env: &Env, as_json: bool, id: &str) -> Result<i32> {
    use tickwork::env as vars;
    let base = Base::from_env(env, "tickctl").await?;
    let tables = pulse_sweep::Tables {
        control: base.core.control_table.clone(),
        tenants: base.core.table_from(env, vars::TENANTS_TABLE, "tenants"),
        queue: base.core.table_from(env, vars::QUEUE_TABLE, "queue"),
    };
    let deps = control::Deps::new(
        base.db,
        base.clock,
        &tables,
        tickwork::config::tenant_shards(env)?,
        pulse_sweep::config::job(env)?,
        policy(env)?,
    )
    .with_queue_shards(tickwork::queue::queue_shards(env)?);
    let e = match control::explain::run(&deps, id).await? {
        Ok(control::Outcome::Explain(e)) => e,
        Ok(_) => anyhow::bail!("tenants.explain answered something else"),
        Err(r) => anyhow::bail!("{:?}: {}", r.r#type, r.message),
    };
    if as_json {
        json(&e)?;
    } else {
        print!("{}", render::explanation(&e));
    }
    Ok(0)
}
