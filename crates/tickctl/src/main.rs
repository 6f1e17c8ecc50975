//! `tickctl`: parses arguments ([`cli`]), calls into the library, prints ([`render`]).
//! Exit code 0 on success, 1 on an operational failure (one line naming it), 2 on bad usage
//! (clap), 3 when `audit` flags a finding.
mod cli;
mod render;

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser};
use cli::{Cli, Cmd, CostArgs, Dead, TenantCmd};
use render::{bar, bytes_bar, json, table, time};
use tickctl::cost::{self, CostInput};
use tickwork::config::Env;
use tickwork::queue::{Queue, QueueConfig};
use tickwork_lambda::Base;

fn main() {
    // `tickctl ... | head` should end quietly, as other command-line tools do, not panic on a
    // closed pipe: restore the default SIGPIPE action that Rust's runtime replaces.
    #[cfg(unix)]
    // SAFETY: called before any other thread exists; SIG_DFL is a valid action.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    // The environment file is applied before the runtime starts: no other thread exists yet to
    // read the environment while it changes, and the SDK's own variables (endpoints, region,
    // credentials profile) come from the same file as ours.
    if let Err(e) = load_env_file(&cli) {
        eprintln!("tickctl: {e:#}");
        std::process::exit(1);
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    match rt.block_on(run(cli)) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("tickctl: {e:#}");
            std::process::exit(1);
        }
    }
}

/// Where `--stack NAME` looks: the file `make stack-env STACK=NAME` writes.
fn stack_file(name: &str) -> std::path::PathBuf {
    std::path::Path::new(".local/stacks").join(format!("{name}.env"))
}

fn load_env_file(cli: &Cli) -> Result<()> {
    let path = match (&cli.env_file, &cli.stack) {
        (Some(p), _) => p.clone(),
        (None, Some(name)) => {
            // CloudFormation's rule for stack names; also keeps the path inside .local/stacks.
            anyhow::ensure!(
                name.starts_with(|c: char| c.is_ascii_alphabetic())
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
                "`{name}` is not a stack name (a letter, then letters, digits and hyphens)"
            );
            let p = stack_file(name);
            anyhow::ensure!(
                p.exists(),
                "no environment for stack `{name}` at {}: run `make stack-env STACK={name}` (it reads the stack's outputs)",
                p.display()
            );
            p
        }
        (None, None) => return Ok(()),
    };
    if cli.stack.is_some() {
        // A deployed stack is reached with the file's settings alone: an endpoint or a tickwork
        // setting left in the shell from a local session would otherwise send `--stack prod`'s
        // writes to the local server, or to another table, and report success.
        let file: Vec<String> = dotenvy::from_path_iter(&path)
            .with_context(|| format!("reading {}", path.display()))?
            .filter_map(|kv| kv.ok().map(|(k, _)| k))
            .collect();
        for k in shell_settings_to_drop(std::env::vars().map(|(k, _)| k), &file) {
            // Before the runtime starts: no other thread reads the environment yet.
            std::env::remove_var(&k);
        }
    }
    // The file wins over the shell: naming a file or a stack is the more explicit choice.
    dotenvy::from_path_override(&path).with_context(|| format!("reading {}", path.display()))
}

async fn run(cli: Cli) -> Result<i32> {
    let env = Env::process();
    // Commands that need no endpoint first: they work without any AWS configuration.
    match &cli.cmd {
        Cmd::Audit { log } => return audit(&env, cli.json, log),
        Cmd::Cost(args) => return cost(&env, cli.json, args),
        Cmd::Completions { shell } => {
            clap_complete::generate(*shell, &mut Cli::command(), "tickctl", &mut std::io::stdout());
            return Ok(0);
        }
        _ => {}
    }
    let base = Base::from_env(&env, "tickctl").await?;
    let done = |what: &str, id: &str| -> Result<()> {
        if cli.json {
            json(&serde_json::json!({ "id": id, "done": what }))
        } else {
            println!("{id}: {what}");
            Ok(())
        }
    };
    match cli.cmd {
        Cmd::Audit { .. } | Cmd::Cost(_) | Cmd::Completions { .. } => unreachable!("handled above"),
        Cmd::Tenants { action } => return tenants(&env, cli.json, action).await,
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
            let names = cost::zones(&[], Some(usize::from(zones)))?;
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let deps = pulse_sweep::Deps::from_env(&env).await?;
            let list: Vec<_> =
                (0..tenants as usize).map(|i| tickwork::tenants::sample_tenant(i, &names, None)).collect();
            pulse_sweep::add_tenants(&deps, &list).await?;
            if cli.json {
                json(&serde_json::json!({ "seeded": tenants, "zones": names }))?;
            } else {
                println!("seeded {tenants} tenants over {} zones", names.len());
            }
        }
        Cmd::Status => {
            let s = tickctl::status(&base, &env).await?;
            if cli.json {
                json(&s)?;
            } else {
                render::print_status(&s);
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
                render::print_plan(&p);
            }
        }
        Cmd::Pause { job, reason } => {
            let name = tickctl::set_paused(&base, &env, job, true, reason.as_deref()).await?;
            done("paused", &name)?;
        }
        Cmd::Resume { job } => {
            let name = tickctl::set_paused(&base, &env, job, false, None).await?;
            done("resumed", &name)?;
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
                    done("back in the queue", &id)?;
                }
                Dead::Purge { id } => {
                    anyhow::ensure!(q.purge_dead(&id).await?, "`{id}` is not a dead letter");
                    done("purged", &id)?;
                }
            }
        }
        Cmd::Invoke { function, event } => {
            let text =
                std::fs::read_to_string(&event).map_err(|e| anyhow::anyhow!("reading {}: {e}", event.display()))?;
            let ev: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{} is not JSON: {e}", event.display()))?;
            // A report is JSON whichever way it is asked for: it is the handler's own output.
            json(&tickctl::invoke(&env, function.name(), ev).await?)?;
        }
    }
    Ok(0)
}

/// The tenants table as the sweep's configuration names it, with the sweep's zone registry. Only
/// reads the shard registry (the sweep's start-up records its own counts; an operator's tool
/// with another environment must not add to them).
async fn tenants_table(env: &Env) -> Result<tickwork::tenants::Tenants> {
    use tickwork::env as vars;
    let base = Base::from_env(env, "tickctl").await?;
    let job = env.get(vars::PULSE_JOB).unwrap_or_else(|| "pulse-sweep".into());
    let shards = env.int_in(vars::TENANT_SHARDS, 8u32, 1..=1000)?;
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

async fn tenants(env: &Env, as_json: bool, action: TenantCmd) -> Result<i32> {
    let table = tenants_table(env).await?;
    let t = &table;
    let now = || jiff::Timestamp::now().as_millisecond();
    let one = |id: &str, what: &str| -> Result<i32> {
        if as_json {
            json(&serde_json::json!({ "id": id, "done": what }))?;
        } else {
            println!("{id}: {what}");
        }
        Ok(0)
    };
    match action {
        TenantCmd::Add { id, zone } => {
            // As an import reads a row: trimmed, the zone under its canonical name.
            let new = tickctl::tenants::canonical(tickwork::tenants::Tenant::new(id.trim(), zone.trim()))?;
            let (id, zone) = (new.id.clone(), new.zone.clone());
            let r = t.add(&[new], now()).await?;
            if r.added == 1 {
                return one(&id, "added");
            }
            match tickctl::tenants::existing(&id, &zone, t.get(&id).await?.as_ref()) {
                Ok(()) => one(&id, "exists (unchanged)"),
                Err(why) => anyhow::bail!("tenant `{id}`: {why}"),
            }
        }
        TenantCmd::Import { file, format } => {
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
            let pb = bar(rows.tenants.len() as u64, "adding tenants");
            let report = tickctl::tenants::import(t, rows, now(), |done, _| pb.set_position(done)).await?;
            pb.finish_and_clear();
            if as_json {
                json(&report)?;
            } else {
                render::print_import(&report);
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
                    let tz = tickwork::calendar::zone(&zone).map_err(|e| anyhow::anyhow!("--zone: {}", e.0))?;
                    let zone = tz.iana_name().map(str::to_string).unwrap_or(zone);
                    for k in 0..t.shards() {
                        let mut cursor = None;
                        loop {
                            let (page, next) = t.zone_page(&zone, k, cursor.as_ref(), 1000).await?;
                            print(page);
                            match next {
                                Some(c) => cursor = Some(c),
                                None => break,
                            }
                        }
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
        TenantCmd::Resume { id } => {
            anyhow::ensure!(t.resume(&id).await?, "no tenant `{id}`");
            one(&id, "resumed")
        }
        TenantCmd::Move { id, zone } => {
            let zone = tickctl::tenants::canonical(tickwork::tenants::Tenant::new(id.as_str(), zone.trim()))?.zone;
            anyhow::ensure!(t.move_zone(&id, &zone).await?, "no tenant `{id}`");
            one(&id, &format!("in {zone}"))
        }
        TenantCmd::Remove { id } => {
            anyhow::ensure!(t.remove(&id).await?, "no tenant `{id}`");
            one(&id, "removed")
        }
    }
}

fn cost(env: &Env, as_json: bool, a: &CostArgs) -> Result<i32> {
    let tick_ms = cost::parse_interval(&a.tick).context("--tick")?;
    let drain_ms = cost::parse_interval(&a.worker_every).context("--worker-every")?;
    anyhow::ensure!(tick_ms > 0, "--tick must be above 0");
    let start_ms = match &a.start {
        Some(s) => s.parse::<jiff::Timestamp>().with_context(|| format!("--start `{s}`"))?.as_millisecond(),
        None => cost::DEFAULT_START_MS,
    };
    // Refuses a bad queue setting as every other command would.
    QueueConfig::from_env(env)?;
    let tenants = usize::try_from(a.tenants)?;
    let input = CostInput {
        zones: cost::zones(&a.zone, a.zones.map(usize::from))?,
        tick_ms,
        workers: a.workers,
        ticks: a.ticks.unwrap_or(u64::from(a.days) * 86_400_000 / tick_ms as u64),
        start_ms,
        drain_every: u32::try_from(drain_ms / tick_ms).unwrap_or(u32::MAX),
        ..CostInput::deployed(tenants)
    }
    .with_env(env)?;
    let mut prices = tickctl::bill::Prices::default();
    for p in &a.price {
        prices.set(p)?;
    }
    let stack = tickctl::bill::Stack { dashboard: a.dashboard, ..Default::default() };
    let boundary = boundary(env, a, &input, &prices)?;
    if input.tenants > cost::FULL_MODEL_MAX {
        // Replaying every tenant's every tick would take minutes at this scale: the model runs in
        // full at two sizes and each service is a straight line through them (as `make bench`).
        let sizes = (1_000, cost::FULL_MODEL_MAX);
        let base = CostInput { tenants: sizes.0, ..input.clone() };
        let rows = tickctl::bill::at_scales(&base, sizes, &[input.tenants as u64], &stack, &prices)?;
        return render::print_scaled(as_json, &input, sizes, &rows[0], &boundary);
    }
    let (r, priced) = tickctl::bill::price(&input, &stack, &prices)?;
    render::print_cost(as_json, &input, &r, &priced)?;
    render::print_boundary(as_json, &boundary);
    Ok(0)
}

/// The boundary of the load's largest zone group (or `--group-tenants`), shared by
/// `--shard-workers`, with the assumptions named on the command line.
fn boundary(env: &Env, a: &CostArgs, input: &CostInput, prices: &tickctl::bill::Prices) -> Result<render::Boundary> {
    use tickctl::boundary::{page_units, predict, workers_needed, BoundaryInput};
    let latency_ms = cost::parse_interval(&a.latency).context("--latency")? as f64;
    let invoke_ms = cost::parse_interval(&a.invoke_latency).context("--invoke-latency")? as f64;
    let target_ms = cost::parse_interval(&a.target).context("--target")? as f64;
    anyhow::ensure!(latency_ms > 0.0, "--latency must be above 0");
    let workers = match a.shard_workers {
        Some(w) => w,
        None => env.int_in(tickwork::env::PULSE_SHARD_WORKERS, 1u32, 1..=64)?,
    };
    let tenants = a.group_tenants.unwrap_or((input.tenants as u64).div_ceil(input.zones.len().max(1) as u64));
    let timeout = env.secs_or(tickwork::env::FUNCTION_TIMEOUT_SECS, std::time::Duration::from_secs(300))?;
    let margin = env.secs_or(tickwork::env::DEADLINE_MARGIN_SECS, std::time::Duration::from_secs(5))?;
    let (wcu_per_page, rcu_per_page) = page_units(input.page_size as u32, input.queue_shards)?;
    let b = BoundaryInput {
        tenants,
        shards: input.tenant_shards,
        page_size: input.page_size as u32,
        workers,
        latency_ms,
        invoke_ms,
        wcu_per_page,
        rcu_per_page,
        queue_shards: input.queue_shards,
        invocation_ms: timeout.saturating_sub(margin).as_millis() as f64,
        interval_ms: input.tick_ms as f64,
        shard_tenants: vec![],
    };
    let t = predict(&b);
    let burst_usd = tickctl::boundary::burst_usd(&b, &t, tickctl::bill::Stack::default().memory_mb, prices);
    Ok(render::Boundary {
        needed: workers_needed(&b, target_ms).filter(|w| *w <= 64),
        target_ms,
        shared_ok: workers == 1 || input.tenant_shards <= pulse_sweep::MAX_SHARED_SHARDS,
        input: b,
        time: t,
        burst_usd,
    })
}

fn audit(env: &Env, as_json: bool, log: &str) -> Result<i32> {
    // An idle queue worker or archiver reads one Query per shard: the shard counts configured.
    let mut rules = tickctl::audit::Rules::default();
    rules.idle_reads.insert("queue-worker".into(), u64::from(env.int_in(tickwork::env::QUEUE_SHARDS, 8u32, 1..=1000)?));
    rules.idle_reads.insert("archiver".into(), u64::from(env.int_in(tickwork::env::CHANGE_SHARDS, 8u32, 1..=1000)?));
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
        render::print_audit(&a);
    }
    Ok(if a.findings.is_empty() { 0 } else { 3 })
}

/// The shell's variables a stack's file does not set and that would point `tickctl` elsewhere:
/// endpoints (`AWS_ENDPOINT_URL*`) and tickwork settings. Pure.
fn shell_settings_to_drop(shell: impl Iterator<Item = String>, file: &[String]) -> Vec<String> {
    shell.filter(|k| (k.starts_with("AWS_ENDPOINT_URL") || k.starts_with("TICKWORK_")) && !file.contains(k)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_file_keeps_only_its_own_endpoints_and_settings() {
        let shell = ["AWS_ENDPOINT_URL_DYNAMODB", "TICKWORK_TABLE_PREFIX", "TICKWORK_PULSE_JOB", "AWS_PROFILE", "HOME"]
            .map(String::from);
        let file = ["TICKWORK_TABLE_PREFIX".to_string()];
        assert_eq!(
            shell_settings_to_drop(shell.into_iter(), &file),
            ["AWS_ENDPOINT_URL_DYNAMODB", "TICKWORK_PULSE_JOB"],
            "credentials and the rest of the shell stay"
        );
    }
}
