//! `tickctl`: parses arguments and calls into the library; exit code 0 on success, 1 on an
//! operational failure, 2 on bad usage (clap).
use anyhow::Result;
use clap::{Parser, Subcommand};
use tickwork::config::Env;
use tickwork::queue::{Queue, QueueConfig};
use tickwork::watermark::Watermarks;
use tickwork_lambda::Base;

#[derive(Parser)]
#[command(name = "tickctl", about = "Operate tickwork: provision, status, pause/resume, dead letters, invoke")]
struct Cli {
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Create every table (and the archive bucket when TICKWORK_ARCHIVE_BUCKET is set).
    Provision,
    /// Leases, watermarks, pause switches, queue depth, dead letters, archiver positions.
    Status,
    /// Stop a job at its next tick (read by the same GetItem as its watermark).
    Pause {
        /// Job name (pulse-sweep, fanout-daily-summary, archiver).
        job: String,
        /// Why (shown by status).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Let a paused job run again.
    Resume {
        /// Job name.
        job: String,
    },
    /// Dead-lettered queue items.
    DeadLetters {
        #[command(subcommand)]
        action: Dead,
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

fn print<T: serde::Serialize + std::fmt::Debug>(json: bool, v: &T) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(v)?);
    } else {
        println!("{v:#?}");
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli).await {
        eprintln!("tickctl: {e:#}");
        std::process::exit(1);
    }
}

async fn run(cli: Cli) -> Result<()> {
    let env = Env::process();
    let base = Base::from_env(&env, "tickctl").await?;
    let control = base.core.control_table.clone();
    match cli.cmd {
        Cmd::Provision => {
            let made = tickctl::provision(&base, &env).await?;
            if cli.json {
                println!("{}", serde_json::to_string_pretty(&made)?);
            } else {
                for m in made {
                    println!("ready: {m}");
                }
            }
        }
        Cmd::Status => print(cli.json, &tickctl::status(&base, &env).await?)?,
        Cmd::Pause { job, reason } => {
            Watermarks::new(base.db.clone(), &control, base.clock.clone())
                .set_paused(&job, true, reason.as_deref())
                .await?;
            println!("{job}: paused");
        }
        Cmd::Resume { job } => {
            Watermarks::new(base.db.clone(), &control, base.clock.clone()).set_paused(&job, false, None).await?;
            println!("{job}: resumed");
        }
        Cmd::DeadLetters { action } => {
            let q =
                Queue::new(base.db.clone(), base.core.table("queue"), QueueConfig::from_env(&env)?, base.clock.clone());
            match action {
                Dead::List => print(cli.json, &q.dead_letters().await?)?,
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
            print(true, &tickctl::invoke(&env, &function, ev).await?)?;
        }
    }
    Ok(())
}
