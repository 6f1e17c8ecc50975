//! `tickctl`: parses arguments ([`cli`]), applies a stack's settings ([`stack`]), calls into the
//! library (one module of [`cmd`] per command that is more than a call), prints ([`render`]).
//! Exit code 0 on success, 1 on an operational failure (one line naming it), 2 on bad usage
//! (clap), 3 when `audit` flags a finding.

mod cli;
mod cmd;
mod render;
mod stack;

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser};
use cli::{Cli, Cmd};
use render::{bar, done, json};
use tickctl::cost;
use tickwork::config::Env;
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
    if let Err(e) = stack::load_env_file(&cli) {
        eprintln!("tickctl: {e:#}");
        std::process::exit(1);
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    // Every call runs as the operator's tool: the IAM suite log (`TICKWORK_IAM_LOG`, tests only)
    // keeps them apart from the functions', and a test reads what a command asked of AWS.
    match rt.block_on(tickwork::iam::acting_as(tickctl::ROLE, run(cli))) {
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
        Cmd::Audit { log } => return cmd::audit::run(&env, cli.json, log),
        Cmd::Cost(args) => return cmd::cost::run(&env, cli.json, args),
        Cmd::Completions { shell } => {
            clap_complete::generate(*shell, &mut Cli::command(), "tickctl", &mut std::io::stdout());
            return Ok(0);
        }
        _ => {}
    }
    let base = Base::from_env(&env, "tickctl").await?;
    match cli.cmd {
        Cmd::Audit { .. } | Cmd::Cost(_) | Cmd::Completions { .. } => unreachable!("handled above"),
        Cmd::Tenants { action } => return cmd::tenants::run(&env, cli.json, action).await,
        Cmd::Schedules { action } => return cmd::schedules::run(&env, cli.json, action).await,
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
            if tickctl::Parts::from_env(&env)?.fanout {
                tickctl::deployed::required(&env, tickwork::env::FANOUT_JOB, "FanoutJob", "status")?;
            }
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
            let deps = pulse_sweep::Deps::from_env_reading(&env).await.context("pulse-sweep configuration")?;
            let pb = bar(0, "counting tenants");
            let job = job.unwrap_or_else(|| deps.cfg.job.clone());
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
            tickctl::Parts::from_env(&env)?.require(job, &format!("pause {}", job.name()))?;
            if job == tickctl::Function::TenantFanout {
                tickctl::deployed::required(&env, tickwork::env::FANOUT_JOB, "FanoutJob", "pause tenant-fanout")?;
            }
            let name = tickctl::set_paused(&base, &env, job, true, reason.as_deref()).await?;
            done(cli.json, "paused", &name)?;
        }
        Cmd::Resume { job } => {
            tickctl::Parts::from_env(&env)?.require(job, &format!("resume {}", job.name()))?;
            if job == tickctl::Function::TenantFanout {
                tickctl::deployed::required(&env, tickwork::env::FANOUT_JOB, "FanoutJob", "resume tenant-fanout")?;
            }
            let name = tickctl::set_paused(&base, &env, job, false, None).await?;
            done(cli.json, "resumed", &name)?;
        }
        Cmd::ControlFailures { max } => cmd::control_failures::run(&base, &env, cli.json, max).await?,
        Cmd::DeadLetters { action } => cmd::dead_letters::run(&base, &env, cli.json, action).await?,
        Cmd::Invoke { function, event, now } => {
            let text =
                std::fs::read_to_string(&event).map_err(|e| anyhow::anyhow!("reading {}: {e}", event.display()))?;
            let mut ev: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{} is not JSON: {e}", event.display()))?;
            if now {
                let at = jiff::Timestamp::now().round(jiff::Unit::Second)?.to_string();
                ev.as_object_mut()
                    .ok_or_else(|| anyhow::anyhow!("{} is not a JSON object", event.display()))?
                    .insert("time".into(), at.into());
            }
            // A report is JSON whichever way it is asked for: it is the handler's own output.
            json(&tickctl::invoke(&env, function.name(), ev).await?)?;
        }
    }
    Ok(0)
}
