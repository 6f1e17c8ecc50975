//! The command line: every command, argument and choice `tickctl` accepts (clap derive). Where
//! the set of values is known it is an enumeration, so a wrong one is a usage error (exit 2) that
//! lists the right ones.

use clap::{Parser, Subcommand};
use tickctl::tenants::Format;
use tickctl::Function;

#[derive(Parser)]
#[command(
    name = "tickctl",
    version,
    about = "Operate tickwork: tenants, schedules, provision, status, plan, pause/resume, dead letters, audit, cost, invoke",
    long_about = "Operate tickwork. Endpoints and table names come from the same environment the Lambdas read \
                  (AWS_ENDPOINT_URL_DYNAMODB, TICKWORK_TABLE_PREFIX, ...), or from a file (--env-file, --stack). \
                  Exit codes: 0 ok, 1 failed, 2 bad usage, 3 audit found something."
)]
pub struct Cli {
    /// Print JSON instead of a table (every command; `tenants list` prints one object a line).
    #[arg(long, global = true)]
    pub json: bool,
    /// Read variables from this dotenv file first (they override the environment's).
    #[arg(long, global = true, value_name = "PATH", conflicts_with = "stack")]
    pub env_file: Option<std::path::PathBuf>,
    /// A deployed stack: reads `.local/stacks/<NAME>.env`, which `make stack-env STACK=<NAME>`
    /// writes from the stack's outputs.
    #[arg(long, global = true, value_name = "NAME")]
    pub stack: Option<String>,
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand)]
pub enum Cmd {
    /// Your tenants: add, import, list, suspend, resume, move, remove.
    Tenants {
        #[command(subcommand)]
        action: TenantCmd,
    },
    /// Tenants' schedules (a local time, a cron in the tenant's zone, a one-off): add, list,
    /// pause, resume, remove, next.
    Schedules {
        #[command(subcommand)]
        action: SchedCmd,
    },
    /// Create every table (and the archive bucket when TICKWORK_ARCHIVE_BUCKET is set).
    Provision,
    /// Add sample tenants (tenant-00000, ...) round-robin over sample zones, for a local try.
    Seed {
        /// How many.
        #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
        tenants: u32,
        /// Over the first N sample zones.
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u8).range(1..=8))]
        zones: u8,
    },
    /// Leases, watermarks, pause switches, queue depth, dead letters, archiver positions.
    Status,
    /// The pulse sweep's next boundaries per zone group, tenants touched, requests; writes nothing.
    Plan {
        /// Job (default: the pulse sweep's job name as `TICKWORK_PULSE_JOB` sets it).
        job: Option<String>,
        /// Plan as of this instant (RFC 3339, e.g. 2026-03-29T22:00:00Z); default now.
        #[arg(long)]
        at: Option<String>,
    },
    /// Stop a function at its next tick (read by the one read its idle tick already makes).
    Pause {
        /// The function.
        job: Function,
        /// Why (shown by status).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Let a paused function run again.
    Resume {
        /// The function.
        job: Function,
    },
    /// Events the control function refused or failed for good (an asynchronous invocation,
    /// such as the template's EventBridge rule's, after Lambda's retries): each with its time,
    /// attempts, the request and the reason, from the stack's on-failure queue
    /// (TICKWORK_CONTROL_FAILURES_URL). Read-only: each message shows again after 30 s.
    ControlFailures {
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        max: usize,
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
    /// The month's bill, and the requests and capacity units each job costs, beside the `000_*`
    /// design's under the same load. Needs no endpoint.
    Cost(Box<CostArgs>),
    /// Run a handler in-process on an event file against the configured endpoints.
    Invoke {
        /// The function.
        function: Function,
        /// A scheduled-event JSON file (see events/).
        #[arg(long)]
        event: std::path::PathBuf,
        /// Set the event's `time` to now: a file's fixed time would size a backlog, or plan a
        /// boundary, as of the day it was written.
        #[arg(long)]
        now: bool,
    },
    /// Print a shell completion script (e.g. `tickctl completions bash > /etc/bash_completion.d/tickctl`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

#[derive(clap::Args)]
pub struct CostArgs {
    /// Active tenants.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub tenants: u64,
    /// Sweep tick interval (60s, 15m, 1h, ...); the template's schedule is every quarter hour.
    #[arg(long, default_value = "15m")]
    pub tick: String,
    /// Sweep workers (schedules or overlapping invocations) on phase-shifted ticks.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub workers: u32,
    /// Days to price.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=3650))]
    pub days: u32,
    /// Or a number of ticks (a window shorter than a day).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub ticks: Option<u64>,
    /// Spread tenants over the first N sample zones.
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=8))]
    pub zones: Option<u8>,
    /// Or name the zones (repeat).
    #[arg(long = "zone")]
    pub zone: Vec<String>,
    /// Start (RFC 3339); default 2026-03-29T00:00:00Z (Berlin DST, month and quarter end).
    #[arg(long)]
    pub start: Option<String>,
    /// Queue worker drains (the template's: on every enqueue, and a safety poll hourly).
    #[arg(long, default_value = "1h")]
    pub worker_every: String,
    /// Override a price: name=value in US dollars (repeat; names in `tickctl cost --json`).
    #[arg(long = "price", value_parser = price_arg)]
    pub price: Vec<String>,
    /// Price the optional dashboard too (`CreateDashboard=true`).
    #[arg(long)]
    pub dashboard: bool,
    /// The boundary of one zone group: its tenants (default: the largest group of this load).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub group_tenants: Option<u64>,
    /// Invocations sharing the boundary (default `TICKWORK_PULSE_SHARD_WORKERS`, else 1).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(pulse_sweep::config::MAX_SHARD_WORKERS)))]
    pub shard_workers: Option<u32>,
    /// One DynamoDB request's latency (an assumption: a page of 1,000 index items or a flush of
    /// one is tens of milliseconds).
    #[arg(long, default_value = "50ms")]
    pub latency: String,
    /// One asynchronous Invoke until its helper runs (an assumption).
    #[arg(long, default_value = "100ms")]
    pub invoke_latency: String,
    /// The boundary should finish within this (the workers it needs are printed).
    #[arg(long, default_value = "15m")]
    pub target: String,
    /// A handler call's time, a unit (an assumption: a handler that writes one row is about 10 ms).
    #[arg(long, default_value = "10ms")]
    pub handler: String,
    /// Queue-worker drains at once (default `TICKWORK_WORKER_DRAINS`, else the template's 4).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub drains: Option<u32>,
    /// Handler calls at once in a drain (default `TICKWORK_WORKER_CONCURRENCY`, else the template's 16).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub concurrency: Option<u32>,
    /// From the first item written until the first drain runs (an assumption: the stream's 5 s
    /// batching window and Lambda's start).
    #[arg(long, default_value = "6s")]
    pub signal_latency: String,
    /// Where the units go: `rust` (a handler in the worker), `lambda` (a function in any runtime,
    /// `TICKWORK_TARGET_BATCH` units an Invoke, 10 by default), `sqs`, `sqs-fifo` or `events` (10
    /// units a request): the target's
    /// calls a month in dollars, and its batches in boundary-to-done (docs/targets.md).
    #[arg(long, default_value = "rust", value_parser = |s: &str| s.parse::<tickctl::targets::TargetKind>())]
    pub deliver_to: tickctl::targets::TargetKind,
    /// A target call's round trip (an assumption: an Invoke, a SendMessageBatch or a PutEvents
    /// in the same region).
    #[arg(long, default_value = "30ms")]
    pub call_latency: String,
    /// Handler calls in flight the target allows across every drain: a function's reserved
    /// concurrency (a new account's whole concurrency is 10); unbounded when not given.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub target_concurrency: Option<u32>,
    /// Writes a second the handlers' table takes (each unit one write): a new on-demand table's
    /// 4,000 until its traffic has peaked higher (it then serves twice its previous peak); give
    /// the table's warm throughput, or twice its last boundary's peak, for a table that has seen
    /// one. Not with a queue or a bus.
    #[arg(long, default_value_t = 4_000, value_parser = clap::value_parser!(u32).range(1..=40_000))]
    pub handler_table_wcu: u32,
    /// With `--schedules`: write units a second the control table takes during a burst: a new
    /// on-demand table's 4,000 until its traffic has peaked higher; give its warm throughput
    /// (`WarmThroughput`) for a table warmed for bursts.
    #[arg(long, default_value_t = 4_000, value_parser = clap::value_parser!(u32).range(1..=40_000))]
    pub control_table_wcu: u32,
    /// With `--schedules`: strongly consistent reads a second the control and tenants tables each
    /// take during a burst: a new on-demand table's 12,000, or their warm throughput.
    #[arg(long, default_value_t = 12_000, value_parser = clap::value_parser!(u32).range(1..=40_000))]
    pub table_rcu: u32,
    /// With `--schedules`: a kilobyte on the wire, either way, adds this to a request, ms (an
    /// assumption: DynamoDB publishes no figure; 0.1 is about 10 MB a second on a connection). A
    /// 1,000-member page read is about 200 KB.
    #[arg(long, default_value_t = tickctl::burst::PER_KB_MS, value_parser = per_kb_arg)]
    pub latency_per_kb_ms: f64,
    /// With `--schedules`: the burst's groups are one-off (`at <instant>`) groups shared by their
    /// members, a campaign's, fired as the sweep fires them today.
    #[arg(long)]
    pub burst_one_off: bool,
    /// With `--schedules`: a tenant id's bytes (member pages, tenant reads and batch items grow
    /// with it; a UUID is 36).
    #[arg(long, default_value_t = tickctl::burst::TENANT_ID_BYTES, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub tenant_id_bytes: u64,
    /// With `--schedules`: fires due in the same minute, for the burst's time (a populous zone's
    /// 08:00).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub burst: u64,
    /// With `--schedules`: the groups the burst's fires fall in — 1 when every tenant's schedule
    /// is the zone's `daily 08:00`, up to 30 with a 30-minute spread, `--burst` when every spec
    /// differs (a group of one each).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub burst_groups: u64,
    /// Price schedules instead: one daily schedule per tenant, the units a fire costs (tenants
    /// sharing a spec or not), and the month beside one EventBridge Scheduler schedule per tenant;
    /// and how long a burst of `--burst` fires takes to hand over and to deliver.
    #[arg(long)]
    pub schedules: bool,
    /// Price the control plane instead: 1,000 of each operation a team's service sends through
    /// the control function (tenants.add, schedules.put, timers.at, tenants.get, tenants.explain),
    /// its Lambda request and modelled duration and its DynamoDB units (docs/control.md).
    #[arg(long)]
    pub control: bool,
}

/// A `--price` refused at parsing: a usage error (exit 2) naming the known prices.
fn price_arg(spec: &str) -> std::result::Result<String, String> {
    tickctl::bill::Prices::default().set(spec).map(|_| spec.to_string()).map_err(|e| e.to_string())
}

#[derive(Subcommand)]
pub enum Dead {
    /// List every dead letter.
    List,
    /// Put one back in the queue with its attempts reset.
    Retry { id: String },
    /// Delete one for good.
    Purge { id: String },
}

#[derive(Subcommand)]
pub enum TenantCmd {
    /// Add one tenant (idempotent: an existing id in the same zone is left as it is). It is owed
    /// every period that ends after it is added: added at 15:00, its first day pulse is that
    /// day's, at its end.
    Add {
        /// Tenant id (at most 900 bytes; no `#`, no control characters).
        id: String,
        /// IANA time zone (e.g. Europe/Berlin): its local midnights end the tenant's periods.
        #[arg(long)]
        zone: String,
        /// A migration: owed every period that ends after this local date (YYYY-MM-DD) begins,
        /// e.g. yesterday, last week and last month, which an old system may have missed. Within
        /// the sweep's lateness bound (TICKWORK_PULSE_MAX_LATENESS_SECS).
        #[arg(long, value_name = "DATE")]
        owed_from: Option<jiff::civil::Date>,
    },
    /// Add tenants from a file (CSV `id,zone` with a header, or NDJSON); idempotent; bad rows are
    /// reported with their line and reason, the rest added. Exit 1 when a row was refused.
    Import {
        /// The file, or `-` for standard input (then --format is needed).
        file: String,
        /// The file's format; by default from its name (.csv, .ndjson, .jsonl).
        #[arg(long)]
        format: Option<Format>,
        /// A migration: every tenant added is owed every period that ends after this local date
        /// (YYYY-MM-DD, in each tenant's zone) begins. Within the sweep's lateness bound.
        #[arg(long, value_name = "DATE")]
        owed_from: Option<jiff::civil::Date>,
    },
    /// Every tenant (a Scan, paged to the end), or the active tenants of one zone (its index).
    List {
        /// Only the active tenants of this zone.
        #[arg(long)]
        zone: Option<String>,
    },
    /// Stop a tenant's pulses; resuming owes every period since (the catch-up policy decides).
    Suspend { id: String },
    /// Pulse a suspended tenant again, from where it stopped.
    Resume { id: String },
    /// Move a tenant to another zone: no period lost or pulsed twice across the move.
    Move {
        id: String,
        /// The new IANA time zone.
        #[arg(long)]
        zone: String,
    },
    /// Remove a tenant (its queued work still runs; its archived history stays).
    Remove { id: String },
    /// Why a tenant's summary or nudge did not arrive: its zone, status and calendar position, the
    /// sweep's state for its zone, the periods it was last pulsed for and the next ones, its
    /// schedules with their next fires, and findings. Read-only, by key (the control function's
    /// `tenants.explain`, the same answer).
    Explain { id: String },
}

#[derive(Subcommand)]
pub enum SchedCmd {
    /// Add or change a tenant's schedule (idempotent by tenant and name: the same definition again
    /// writes nothing; a changed one applies from its first occurrence after the change).
    Add {
        /// The tenant (it must exist: its zone governs).
        tenant: String,
        /// Unique for the tenant: 1 to 64 letters, digits, `-`, `_`, `.`, `:`.
        name: String,
        /// `daily HH:MM`, `weekly DAYS HH:MM` (mon,wed or mon-fri), `monthly DAY|last HH:MM`,
        /// `cron M H DOM MON DOW` (in the tenant's zone), or `at YYYY-MM-DDTHH:MM` (local) /
        /// `at <RFC 3339 instant>` (once).
        #[arg(long)]
        spec: String,
        /// Minutes across which tenants sharing a local time are spread, at a stable offset each.
        #[arg(long, default_value_t = 0)]
        spread: u32,
        /// A local time the spring change skips: fire when the gap ends (`shift`) or not (`skip`).
        #[arg(long, default_value = "shift")]
        gap: String,
        /// A local time the autumn change repeats: fire at its `first` or `last` instant, or at
        /// `both`; by default `both` for a cron whose minute or hour field begins with `*` (as
        /// cronie runs it), else `first`.
        #[arg(long)]
        fold: Option<String>,
    },
    /// Add schedules from a CSV file (header: tenant,name,spec[,spread,gap,fold]), or `-` for
    /// standard input; idempotent; bad rows are reported with their line and reason, the rest
    /// added. Exit 1 when a row was refused. With --from-scheduler or --from-crontab, the file is
    /// another system's schedules (docs/migrate.md); what has no equivalent is refused by name
    /// and nothing is written for it.
    Import {
        file: String,
        /// The file is EventBridge Scheduler's `aws scheduler get-schedule` output (one object,
        /// an array, `{"Schedules": [...]}` or one a line): each schedule becomes its tenant's,
        /// the tenant named in its target's JSON input.
        #[arg(long, conflicts_with = "from_crontab")]
        from_scheduler: bool,
        /// With --from-scheduler: the input's field holding the tenant's id (the rest of the
        /// input becomes the schedule's payload).
        #[arg(long, default_value = "tenant", requires = "from_scheduler")]
        tenant_field: String,
        /// With --from-scheduler: the one target ARN to accept (default: the first schedule's).
        #[arg(long, requires = "from_scheduler")]
        target: Option<String>,
        /// The file is a crontab: each line becomes a schedule of --tenant, in --zone (or a
        /// `CRON_TZ=` line's zone), carrying its command as the payload.
        #[arg(long, requires_all = ["zone", "tenant"])]
        from_crontab: bool,
        /// With --from-crontab: the zone its times are in.
        #[arg(long)]
        zone: Option<String>,
        /// With --from-crontab: the tenant whose schedules the lines become.
        #[arg(long)]
        tenant: Option<String>,
    },
    /// A tenant's schedules.
    List { tenant: String },
    /// Stop a schedule's fires; resuming owes only what comes after the resume.
    Pause { tenant: String, name: String },
    /// Fire a paused schedule again, from its next occurrence.
    Resume { tenant: String, name: String },
    /// Remove a schedule (a one-off not yet fired is cancelled).
    Remove { tenant: String, name: String },
    /// Schedule groups whose due record the sweep could not read, set aside with the problem
    /// (their members fire nothing meanwhile); with --repair, each written again (as it was when
    /// it reads now, else rebuilt from its group's head) and fired under the catch-up policy.
    /// Exit 1 while one is left set aside.
    Doctor {
        /// Repair this group (its id, as listed).
        #[arg(long)]
        repair: Option<String>,
        /// Repair every group listed.
        #[arg(long, conflicts_with = "repair")]
        repair_all: bool,
    },
    /// The coming fire instants of a tenant's schedules (or one), as the sweep decides them.
    Next {
        tenant: String,
        /// Only this schedule.
        name: Option<String>,
        /// How many per schedule.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
        count: u32,
        /// From this instant (RFC 3339); default now.
        #[arg(long)]
        from: Option<String>,
    },
}

/// `--latency-per-kb-ms`: a time, at least 0 and at most a second a kilobyte.
fn per_kb_arg(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{s:?} is not a number of milliseconds: {e}"))?;
    if !(0.0..=1000.0).contains(&v) {
        return Err(format!("{v} ms a kilobyte is outside 0 to 1000"));
    }
    Ok(v)
}
