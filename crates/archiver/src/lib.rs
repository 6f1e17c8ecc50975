//! Archiver: move change-feed rows older than a cutoff to S3 — billed only for what is due,
//! nothing lost, nothing doubled.
//!
//! ## One sweep
//! 1. The cutoff is the event's `time` minus the configured age.
//! 2. **Probe** each shard with one Query whose *key condition* is `shard = :s AND tsid < :cutoff`
//!    (a full first page, kept as the shard's first batch). Every shard empty: return. That is the whole cost of an idle sweep — one Query per shard,
//!    0 items billed, no lease, no S3 call.
//! 3. Take the lease; read the per-shard checkpoints (an unreadable one stops the sweep before
//!    anything is deleted).
//! 4. Per shard (bounded concurrency), page by cursor; each page is a batch, and steps 5 to 7
//!    run for each.
//! 5. Write one S3 object: gzip NDJSON (DynamoDB JSON, one row a line) at a **deterministic key**
//!    from the shard and the batch's first and last sort keys, with a SHA-256 checksum the SDK
//!    sends and S3 verifies, and the row count and range as metadata.
//! 6. **Only after the put succeeded**, delete the rows (BatchWriteItem in 25s, UnprocessedItems
//!    retried with backoff).
//! 7. Save the shard's cursor (fenced). A crash between 5 and 6 re-reads the same page from
//!    the same cursor next time and writes the same key again: nothing lost, nothing doubled.
//!
//! A crash *during* 6 leaves part of the batch deleted, and a re-read page would then hold a
//! different set of rows (and so get another key, duplicating the undeleted rows). So between
//! 5 and 6 an **intent** is recorded (fenced): the batch's first and last sort keys and the
//! cursor after it. A sweep that finds an intent deletes what is left of that batch (a key-condition
//! Query on exactly its range), then moves the cursor past it and clears the intent in one fenced
//! transaction; it never writes that batch again.
//!
//! ## Bucket layout
//! `<prefix>/<table>/<yyyy>/<mm>/<dd>/shard=<k>/<first>_<last>.ndjson.gz`, the date being the UTC
//! date of the batch's first row; each line is `{"Item": {...}}` in DynamoDB JSON, the format of
//! DynamoDB's own S3 export, so Athena reads it with the same table definition.
//!
//! ## Known limit
//! A row written *after* a crash with a timestamp inside an already-archived range can change a
//! re-read batch's boundaries, and so its key: the old object and the new one then overlap. Change
//! rows carry their write time, so this needs a writer whose clock is behind by more than the
//! archive age.

use std::io::Write;
use std::time::Duration;

use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::ChecksumAlgorithm;
use futures::stream::{self, StreamExt};
use serde::Serialize;
use serde_json::Value;
use tickwork::budget::{AnyOf, Budget, Deadline};
use tickwork::capacity::Item;
use tickwork::changes::{cutoff_key, shard_key, to_ddb_json, BY_SHARD, SHARD, TSID};
use tickwork::checkpoint::{CheckpointError, Checkpoints, ShardState};
use tickwork::clock::{Millis, SharedClock};
use tickwork::config::{ConfigError, Env};
use tickwork::lease::{Fenced, LeaderError, LeaseConfig, LeaseStore};
use tickwork::pager::{for_each_page, Page, PageError, PageRun};
use tickwork::schema::{av_s, get_s, PK};
use tickwork::{Db, DbError};
use tickwork_lambda::{BadEvent, Base, Tick};

/// Checkpoint run name: one rolling position per shard.
const RUN: &str = "current";

/// Archiver settings.
#[derive(Debug, Clone)]
pub struct ArchiverConfig {
    /// Every tick a dry run (`TICKWORK_DRY_RUN`, default false).
    pub dry_run: bool,
    /// Rows older than this are archived (`TICKWORK_ARCHIVE_AGE_SECS`, default 30 days).
    pub age: Duration,
    /// Rows per batch and per object (`TICKWORK_ARCHIVE_PAGE_SIZE`, default 100).
    pub page_size: i32,
    /// Change-feed shards (`TICKWORK_CHANGE_SHARDS`, default 8).
    pub shards: u32,
    /// Shards archived at once (`TICKWORK_ARCHIVE_SHARD_CONCURRENCY`, default 4).
    pub shard_concurrency: usize,
    /// Bucket (`TICKWORK_ARCHIVE_BUCKET`, required).
    pub bucket: String,
    /// Key prefix (`TICKWORK_ARCHIVE_PREFIX`, default `archive`).
    pub prefix: String,
    /// Lease (`TICKWORK_ARCHIVE_LEASE_SECS`, default 240, below `TICKWORK_ARCHIVE_INTERVAL_SECS`, default 300).
    pub lease: LeaseConfig,
    /// Stop this long before the deadline.
    pub margin: Duration,
}

impl ArchiverConfig {
    /// Reads and validates the settings.
    pub fn from_env(env: &Env, skew: Duration) -> Result<Self, ConfigError> {
        let interval = env.secs_or("TICKWORK_ARCHIVE_INTERVAL_SECS", Duration::from_secs(300))?;
        let ttl = env.secs_or("TICKWORK_ARCHIVE_LEASE_SECS", Duration::from_secs(240))?;
        let lease = LeaseConfig::new("archiver", ttl, interval, skew)
            .map_err(|e| ConfigError::invalid("TICKWORK_ARCHIVE_LEASE_SECS", e.problem))?;
        let page_size: i32 = env.parse_or("TICKWORK_ARCHIVE_PAGE_SIZE", 100)?;
        if !(1..=1000).contains(&page_size) {
            return Err(ConfigError::invalid("TICKWORK_ARCHIVE_PAGE_SIZE", format!("{page_size} is not in 1..=1000")));
        }
        let shards: u32 = env.parse_or("TICKWORK_CHANGE_SHARDS", 8)?;
        if !(1..=1000).contains(&shards) {
            return Err(ConfigError::invalid("TICKWORK_CHANGE_SHARDS", format!("{shards} is not in 1..=1000")));
        }
        Ok(Self {
            dry_run: tickwork_lambda::forced_dry_run(env)?,
            age: env.secs_or("TICKWORK_ARCHIVE_AGE_SECS", Duration::from_secs(30 * 86_400))?,
            page_size,
            shards,
            shard_concurrency: env.parse_or("TICKWORK_ARCHIVE_SHARD_CONCURRENCY", 4usize)?.max(1),
            bucket: env.required("TICKWORK_ARCHIVE_BUCKET")?,
            prefix: env.get("TICKWORK_ARCHIVE_PREFIX").unwrap_or_else(|| "archive".into()),
            lease,
            margin: env.secs_or("TICKWORK_DEADLINE_MARGIN_SECS", Duration::from_secs(5))?,
        })
    }
}

/// Everything the handler needs.
#[derive(Debug, Clone)]
pub struct Deps {
    /// Metered DynamoDB client.
    pub db: Db,
    /// S3 client.
    pub s3: aws_sdk_s3::Client,
    /// Settings.
    pub cfg: ArchiverConfig,
    /// Change-feed table.
    pub table: String,
    /// Leases.
    pub leases: LeaseStore,
    /// Per-shard positions.
    pub checkpoints: Checkpoints,
    /// Wall clock.
    pub clock: SharedClock,
}

impl Deps {
    /// Builds from the environment.
    pub async fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let base = Base::from_env(env, "archiver").await?;
        let cfg = ArchiverConfig::from_env(env, base.core.clock_skew)?;
        let table = env.get("TICKWORK_CHANGES_TABLE").unwrap_or_else(|| base.core.table("changes"));
        let s3 = s3_client(&base.sdk);
        Ok(Self::new(base.db, s3, base.clock, cfg, &base.core.control_table, table))
    }

    /// Builds from parts.
    pub fn new(
        db: Db,
        s3: aws_sdk_s3::Client,
        clock: SharedClock,
        cfg: ArchiverConfig,
        control: &str,
        table: String,
    ) -> Self {
        Self {
            leases: LeaseStore::new(db.clone(), control, clock.clone()),
            checkpoints: Checkpoints::new(db.clone(), control, clock.clone(), Duration::from_secs(30 * 86_400)),
            db,
            s3,
            cfg,
            table,
            clock,
        }
    }
}

/// An S3 client; path-style addressing when the endpoint is overridden (local servers).
pub fn s3_client(sdk: &aws_config::SdkConfig) -> aws_sdk_s3::Client {
    let local = sdk.endpoint_url().is_some() || std::env::var("AWS_ENDPOINT_URL_S3").is_ok();
    aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(sdk).force_path_style(local).build())
}

/// What a sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// How it ended.
    pub outcome: Outcome,
    /// The cutoff (ms).
    pub cutoff_ms: Millis,
    /// Rows archived and deleted.
    pub archived: u64,
    /// Objects written.
    pub objects: u64,
    /// Shards with rows left (resumed next sweep).
    pub shards_left: u32,
    /// Dry run: due rows per shard.
    pub due_by_shard: Vec<u64>,
}

/// How a sweep ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Nothing due.
    #[default]
    Idle,
    /// Everything due was archived.
    Completed,
    /// The budget ran out; resumes next sweep.
    Partial,
    /// Another sweep holds the lease.
    Busy,
    /// Dry run.
    DryRun,
    /// Our lease was taken over; we stopped.
    LostLease,
}

/// Why a sweep failed; rows are deleted only after their object is stored, so nothing is lost.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The event.
    #[error(transparent)]
    BadEvent(#[from] BadEvent),
    /// DynamoDB.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The checkpoint.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A cursor.
    #[error(transparent)]
    Cursor(#[from] tickwork::pager::CursorError),
    /// S3.
    #[error("S3 put of `s3://{bucket}/{key}` failed ({reason}); its rows were not deleted")]
    S3 {
        /// Bucket.
        bucket: String,
        /// Key.
        key: String,
        /// Why.
        reason: String,
    },
}

impl From<ArchiveError> for lambda_runtime::Diagnostic {
    fn from(e: ArchiveError) -> Self {
        let error_type = match &e {
            ArchiveError::BadEvent(_) => "BadEvent",
            ArchiveError::Db(_) => "DynamoDb",
            ArchiveError::Checkpoint(_) => "Checkpoint",
            ArchiveError::Cursor(_) => "Cursor",
            ArchiveError::S3 { .. } => "S3",
        };
        tickwork_lambda::diagnostic(error_type, &e)
    }
}

/// The Lambda entry.
pub async fn handle(deps: &Deps, event: Value, deadline_ms: Millis) -> Result<Report, ArchiveError> {
    let mut tick = Tick::parse(&event)?;
    tick.dry_run |= deps.cfg.dry_run;
    deps.db.meter().reset();
    let budget = Deadline::new(deps.clock.clone(), deadline_ms, deps.cfg.margin.as_millis() as i64);
    let owner = tickwork_lambda::owner_id("archiver");
    let result = run(deps, &tick, &budget, &owner).await;
    deps.db.meter().emit("tickwork", "archiver", deps.clock.now_ms());
    if let Ok(r) = &result {
        // ShardsLeft staying above 0 sweep after sweep is the archiver-backlog alarm.
        let counts = [("Archived", r.archived as f64), ("ShardsLeft", f64::from(r.shards_left))];
        tickwork::meter::emit_job_metrics("tickwork", "archiver", deps.clock.now_ms(), &counts);
    }
    match &result {
        Ok(r) => {
            tracing::info!(outcome = ?r.outcome, archived = r.archived, objects = r.objects, shards_left = r.shards_left, "archive sweep")
        }
        Err(e) => tracing::error!(error = %tickwork_lambda::error_chain(e), "archive sweep failed"),
    }
    result
}

fn due_query(deps: &Deps, k: u32, cutoff: &str) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
    deps.db
        .client()
        .query()
        .table_name(&deps.table)
        .index_name(BY_SHARD)
        .key_condition_expression("#shard = :s AND #tsid < :cutoff")
        .expression_attribute_names("#shard", SHARD)
        .expression_attribute_names("#tsid", TSID)
        .expression_attribute_values(":s", av_s(shard_key(k)))
        .expression_attribute_values(":cutoff", av_s(cutoff))
}

/// One sweep for `tick`, within `budget`.
pub async fn run(deps: &Deps, tick: &Tick, budget: &dyn Budget, owner: &str) -> Result<Report, ArchiveError> {
    let cutoff_ms = tick.time_ms - deps.cfg.age.as_millis() as i64;
    let cutoff = cutoff_key(cutoff_ms);
    let mut report = Report { cutoff_ms, ..Default::default() };
    // 2. Probe: one key-condition Query per shard, no lease.
    // The probe reads a full first page, which becomes the first batch when the shard has no
    // position of its own: each due row is billed once, by the probe or by the pages after it.
    let mut probes = Vec::new();
    for k in 0..deps.cfg.shards {
        let out = deps.db.query(due_query(deps, k, &cutoff).limit(deps.cfg.page_size)).await?;
        if !out.items().is_empty() {
            let next =
                out.last_evaluated_key().filter(|k| !k.is_empty()).map(tickwork::pager::Cursor::encode).transpose()?;
            probes.push(Probe { k, items: out.items.unwrap_or_default(), next });
        }
    }
    if probes.is_empty() {
        return Ok(report);
    }
    if tick.dry_run {
        report.due_by_shard = vec![0; deps.cfg.shards as usize];
        for probe in &probes {
            let k = probe.k;
            let mut n = probe.items.len() as u64;
            let Some(next) = &probe.next else {
                report.due_by_shard[k as usize] = n;
                continue;
            };
            let run = for_each_page(
                &deps.db,
                due_query(deps, k, &cutoff),
                Some(next),
                deps.cfg.page_size,
                budget,
                "archive dry run",
                |p: Page| {
                    n += p.items.len() as u64;
                    std::future::ready(Ok::<(), DbError>(()))
                },
            )
            .await;
            match run {
                Ok(_) => {}
                Err(PageError::Db(e)) | Err(PageError::Handler(e)) => return Err(e.into()),
                Err(PageError::Cursor(c)) => return Err(c.into()),
            }
            report.due_by_shard[k as usize] = n;
            tracing::info!(
                shard = k,
                due = n,
                objects = n.div_ceil(deps.cfg.page_size as u64),
                "dry run: would archive"
            );
        }
        report.outcome = Outcome::DryRun;
        return Ok(report);
    }
    // 3. Lease, then checkpoints (read before any delete).
    // Kept after success for the rest of the window; released on failure so another worker can
    // retry (every unit of work is idempotent).
    let busy = Report { outcome: Outcome::Busy, ..report.clone() };
    match deps
        .leases
        .run_if_leader(&deps.cfg.lease, owner, |lease| async move {
            archive(deps, &lease, &cutoff, probes, budget, report).await
        })
        .await
    {
        Ok(Some(r)) => Ok(r),
        Ok(None) => Ok(busy),
        Err(LeaderError::Db(e)) => Err(e.into()),
        Err(LeaderError::Action(e)) => Err(e),
    }
}

async fn archive(
    deps: &Deps,
    lease: &tickwork::lease::Lease,
    cutoff: &str,
    probes: Vec<Probe>,
    budget: &dyn Budget,
    mut report: Report,
) -> Result<Report, ArchiveError> {
    let states = deps.checkpoints.read(&deps.cfg.lease.job, RUN).await?;
    let lease_end = Deadline::new(
        deps.clock.clone(),
        lease.safe_until_ms(deps.cfg.lease.clock_skew),
        deps.cfg.margin.as_millis() as i64,
    );
    let budget = AnyOf(vec![budget, &lease_end]);
    let fence = lease.fence(deps.leases.table());
    let results: Vec<Result<(u64, u64, bool, bool), ArchiveError>> = stream::iter(probes.into_iter().map(|probe| {
        let state = Checkpoints::state_of(&states, &probe.k.to_string()).clone();
        let (budget, fence) = (&budget, &fence);
        async move { archive_shard(deps, fence, probe, cutoff, state, budget).await }
    }))
    .buffer_unordered(deps.cfg.shard_concurrency)
    .collect()
    .await;
    let mut lost = false;
    for r in results {
        let (rows, objects, drained, lost_lease) = r?;
        report.archived += rows;
        report.objects += objects;
        report.shards_left += u32::from(!drained);
        lost |= lost_lease;
    }
    report.outcome = if lost {
        Outcome::LostLease
    } else if report.shards_left > 0 {
        Outcome::Partial
    } else {
        Outcome::Completed
    };
    Ok(report)
}

#[derive(Debug, thiserror::Error)]
enum BatchFail {
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    #[error("lease lost")]
    Lost,
}

impl From<DbError> for BatchFail {
    fn from(e: DbError) -> Self {
        BatchFail::Archive(e.into())
    }
}

fn intent_key(k: u32) -> Item {
    tickwork::schema::key("ckpt#archiver", format!("intent#{k}"))
}

/// A batch whose object is stored and whose rows are being deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Intent {
    first: String,
    last: String,
    next: tickwork::pager::Cursor,
}

async fn read_intent(deps: &Deps, k: u32) -> Result<Option<Intent>, ArchiveError> {
    let item = deps.db.get_strong(deps.leases.table(), intent_key(k)).await?;
    let Some(i) = item.as_ref() else { return Ok(None) };
    let unreadable = |what: &str| {
        ArchiveError::Db(DbError::Invalid(format!(
            "archive intent of shard {k} is unreadable ({what}); nothing was deleted"
        )))
    };
    Ok(Some(Intent {
        first: get_s(i, "first").ok_or_else(|| unreadable("first"))?.to_string(),
        last: get_s(i, "last").ok_or_else(|| unreadable("last"))?.to_string(),
        next: get_s(i, "next").ok_or_else(|| unreadable("next"))?.parse().map_err(|_| unreadable("next"))?,
    }))
}

fn intent_put(deps: &Deps, k: u32, intent: &Intent) -> aws_sdk_dynamodb::types::TransactWriteItem {
    let mut item = intent_key(k);
    item.insert("first".into(), av_s(&intent.first));
    item.insert("last".into(), av_s(&intent.last));
    item.insert("next".into(), av_s(intent.next.as_str()));
    let put = aws_sdk_dynamodb::types::Put::builder()
        .table_name(deps.leases.table())
        .set_item(Some(item))
        .build()
        .expect("put");
    aws_sdk_dynamodb::types::TransactWriteItem::builder().put(put).build()
}

fn intent_delete(deps: &Deps, k: u32) -> aws_sdk_dynamodb::types::TransactWriteItem {
    let del = aws_sdk_dynamodb::types::Delete::builder()
        .table_name(deps.leases.table())
        .set_key(Some(intent_key(k)))
        .build()
        .expect("delete");
    aws_sdk_dynamodb::types::TransactWriteItem::builder().delete(del).build()
}

/// Finishes a batch an earlier sweep stored but did not finish deleting. Returns rows deleted.
async fn finish_intent(deps: &Deps, fence: &tickwork::lease::Fence, k: u32, intent: &Intent) -> Result<u64, BatchFail> {
    let q = deps
        .db
        .client()
        .query()
        .table_name(&deps.table)
        .index_name(BY_SHARD)
        .key_condition_expression("#shard = :s AND #tsid BETWEEN :first AND :last")
        .expression_attribute_names("#shard", SHARD)
        .expression_attribute_names("#tsid", TSID)
        .expression_attribute_values(":s", av_s(shard_key(k)))
        .expression_attribute_values(":first", av_s(&intent.first))
        .expression_attribute_values(":last", av_s(&intent.last));
    let mut left = Vec::new();
    let run = for_each_page(&deps.db, q, None, 1000, &tickwork::budget::Unlimited, "archive intent", |p: Page| {
        left.extend(p.items);
        std::future::ready(Ok::<(), DbError>(()))
    })
    .await;
    match run {
        Ok(_) => {}
        Err(PageError::Db(e)) | Err(PageError::Handler(e)) => return Err(e.into()),
        Err(PageError::Cursor(c)) => return Err(BatchFail::Archive(c.into())),
    }
    delete_rows(deps, &left).await?;
    let st = ShardState::Resume(intent.next.clone());
    match deps.checkpoints.save_with(fence, RUN, &k.to_string(), &st, vec![intent_delete(deps, k)]).await? {
        Fenced::Written => Ok(left.len() as u64),
        _ => Err(BatchFail::Lost),
    }
}

/// The first page of a due shard, read before the lease.
#[derive(Debug)]
struct Probe {
    k: u32,
    items: Vec<Item>,
    next: Option<tickwork::pager::Cursor>,
}

async fn archive_shard(
    deps: &Deps,
    fence: &tickwork::lease::Fence,
    probe: Probe,
    cutoff: &str,
    state: ShardState,
    budget: &dyn Budget,
) -> Result<(u64, u64, bool, bool), ArchiveError> {
    let k = probe.k;
    let mut state = state;
    let mut use_probe = state == ShardState::Start;
    if let Some(intent) = read_intent(deps, k).await? {
        tracing::warn!(shard = k, first = %intent.first, last = %intent.last, "finishing a batch an earlier sweep stored but did not delete");
        use_probe = false; // the probe may hold that batch's leftovers: re-read after finishing it
        match finish_intent(deps, fence, k, &intent).await {
            Ok(_) => state = ShardState::Resume(intent.next.clone()),
            Err(BatchFail::Lost) => return Ok((0, 0, false, true)),
            Err(BatchFail::Archive(e)) => return Err(e),
        }
    }
    let mut rows = 0u64;
    let mut objects = 0u64;
    if use_probe {
        rows += probe.items.len() as u64;
        objects += 1;
        match process_batch(deps, fence, k, &probe.items, probe.next.clone()).await {
            Ok(()) => {}
            Err(BatchFail::Lost) => return Ok((rows, objects, false, true)),
            Err(BatchFail::Archive(e)) => return Err(e),
        }
        match probe.next {
            None => return Ok((rows, objects, true, false)),
            Some(_) if budget.exhausted() => return Ok((rows, objects, false, false)),
            Some(next) => state = ShardState::Resume(next),
        }
    }
    let label = format!("archive shard {k}");
    let run = for_each_page(
        &deps.db,
        due_query(deps, k, cutoff),
        state.cursor(),
        deps.cfg.page_size,
        budget,
        &label,
        |page: Page| {
            let n = page.items.len() as u64;
            rows += n;
            objects += u64::from(n > 0);
            async move { process_batch(deps, fence, k, &page.items, page.next).await }
        },
    )
    .await;
    match run {
        Ok(PageRun::Exhausted { .. }) => Ok((rows, objects, true, false)),
        Ok(PageRun::Stopped { .. }) => Ok((rows, objects, false, false)),
        Err(PageError::Handler(BatchFail::Lost)) => Ok((rows, objects, false, true)),
        Err(PageError::Handler(BatchFail::Archive(e))) => Err(e),
        Err(PageError::Db(e)) => Err(e.into()),
        Err(PageError::Cursor(c)) => Err(c.into()),
    }
}

/// Steps 5 to 7 for one batch: the object, the intent, the deletes, then the position.
async fn process_batch(
    deps: &Deps,
    fence: &tickwork::lease::Fence,
    k: u32,
    items: &[Item],
    next: Option<tickwork::pager::Cursor>,
) -> Result<(), BatchFail> {
    let mut extra = Vec::new();
    if let (Some(first), Some(last)) = (items.first(), items.last()) {
        put_batch(deps, k, items).await?;
        // Record what is being deleted before deleting it (see the module docs).
        let key_of = |i: &Item| -> Item {
            [PK, SHARD, TSID].iter().filter_map(|a| Some((a.to_string(), i.get(*a)?.clone()))).collect()
        };
        let intent = Intent {
            first: get_s(first, TSID).unwrap_or_default().to_string(),
            last: get_s(last, TSID).unwrap_or_default().to_string(),
            next: tickwork::pager::Cursor::encode(&key_of(last)).map_err(|e| BatchFail::Archive(e.into()))?,
        };
        match tickwork::lease::fenced_write(&deps.db, fence, vec![intent_put(deps, k, &intent)]).await? {
            Fenced::Written => {}
            _ => return Err(BatchFail::Lost),
        }
        delete_rows(deps, items).await?;
        extra.push(intent_delete(deps, k));
    }
    // Drained: forget the position so the next sweep starts from the oldest row again.
    let st = next.map(ShardState::Resume).unwrap_or(ShardState::Start);
    match deps.checkpoints.save_with(fence, RUN, &k.to_string(), &st, extra).await? {
        Fenced::Written => Ok(()),
        _ => Err(BatchFail::Lost),
    }
}

/// The object key of a batch: deterministic from the shard and its first and last sort keys.
pub fn object_key(prefix: &str, table: &str, shard: u32, first_tsid: &str, last_tsid: &str) -> String {
    let ms: i64 = first_tsid.get(..13).and_then(|s| s.parse().ok()).unwrap_or(0);
    let date = jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_zoned(jiff::tz::TimeZone::UTC).date())
        .unwrap_or(jiff::civil::date(1970, 1, 1));
    let clean = |s: &str| s.replace(['#', '/'], "-");
    format!(
        "{prefix}/{table}/{:04}/{:02}/{:02}/shard={shard}/{}_{}.ndjson.gz",
        date.year(),
        date.month(),
        date.day(),
        clean(first_tsid),
        clean(last_tsid)
    )
}

/// Gzip NDJSON of the rows, one `{"Item": ...}` per line; the same rows give the same bytes.
pub fn encode_batch(items: &[Item]) -> Vec<u8> {
    let mut gz = flate2::GzBuilder::new().mtime(0).write(Vec::new(), flate2::Compression::default());
    for item in items {
        let line = serde_json::json!({ "Item": to_ddb_json(item) });
        writeln!(gz, "{line}").expect("writing to memory");
    }
    gz.finish().expect("writing to memory")
}

/// Reads an archived object's rows back (restore, tests).
pub fn decode_batch(bytes: &[u8]) -> Result<Vec<Item>, String> {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(bytes).read_to_string(&mut text).map_err(|e| format!("not gzip: {e}"))?;
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            let v: Value = serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 1))?;
            tickwork::changes::from_ddb_json(&v["Item"]).map_err(|e| format!("line {}: {e}", i + 1))
        })
        .collect()
}

/// Restores every row of the archived objects under `prefix` in `bucket` back into `table`
/// (operator recovery; rows are put as they were, so restoring twice changes nothing). Returns
/// rows restored.
pub async fn restore(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
    db: &Db,
    table: &str,
) -> Result<u64, ArchiveError> {
    let s3_err =
        |key: &str, e: String| ArchiveError::S3 { bucket: bucket.to_string(), key: key.to_string(), reason: e };
    let mut restored = 0u64;
    let mut token = None;
    loop {
        let page = s3
            .list_objects_v2()
            .bucket(bucket)
            .prefix(prefix)
            .set_continuation_token(token.take())
            .send()
            .await
            .map_err(|e| s3_err(prefix, aws_sdk_s3::error::DisplayErrorContext(&e).to_string()))?;
        for obj in page.contents() {
            let key = obj.key().unwrap_or_default();
            let got = s3
                .get_object()
                .bucket(bucket)
                .key(key)
                .send()
                .await
                .map_err(|e| s3_err(key, aws_sdk_s3::error::DisplayErrorContext(&e).to_string()))?;
            let bytes = got.body.collect().await.map_err(|e| s3_err(key, e.to_string()))?.into_bytes();
            let items = decode_batch(&bytes).map_err(|e| s3_err(key, e))?;
            restored += items.len() as u64;
            let puts: Vec<WriteRequest> = items
                .into_iter()
                .map(|i| {
                    WriteRequest::builder()
                        .put_request(
                            aws_sdk_dynamodb::types::PutRequest::builder().set_item(Some(i)).build().expect("item"),
                        )
                        .build()
                })
                .collect();
            db.batch_write_all(table, puts, 10).await?;
        }
        match page.next_continuation_token() {
            Some(t) => token = Some(t.to_string()),
            None => return Ok(restored),
        }
    }
}

async fn put_batch(deps: &Deps, k: u32, items: &[Item]) -> Result<(), ArchiveError> {
    let first = get_s(&items[0], TSID).unwrap_or_default();
    let last = get_s(&items[items.len() - 1], TSID).unwrap_or_default();
    let key = object_key(&deps.cfg.prefix, &deps.table, k, first, last);
    let body = encode_batch(items);
    deps.s3
        .put_object()
        .bucket(&deps.cfg.bucket)
        .key(&key)
        .body(ByteStream::from(body))
        .content_type("application/x-ndjson")
        .content_encoding("gzip")
        .checksum_algorithm(ChecksumAlgorithm::Sha256)
        .metadata("rows", items.len().to_string())
        .metadata("first-tsid", first)
        .metadata("last-tsid", last)
        .send()
        .await
        .map_err(|e| ArchiveError::S3 {
            bucket: deps.cfg.bucket.clone(),
            key: key.clone(),
            reason: aws_sdk_s3::error::DisplayErrorContext(&e).to_string(),
        })?;
    Ok(())
}

async fn delete_rows(deps: &Deps, items: &[Item]) -> Result<(), ArchiveError> {
    let deletes: Vec<WriteRequest> = items
        .iter()
        .filter_map(|i| i.get(PK).cloned())
        .map(|pk| {
            WriteRequest::builder()
                .delete_request(DeleteRequest::builder().key(PK, pk).build().expect("delete has a key"))
                .build()
        })
        .collect();
    deps.db.batch_write_all(&deps.table, deletes, 10).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::AttributeValue;

    #[test]
    fn keys_are_deterministic_and_dated() {
        let k = object_key("archive", "tw-changes", 3, "1764374400000#order#1", "1764374999999#order#9");
        assert_eq!(k, "archive/tw-changes/2025/11/29/shard=3/1764374400000-order-1_1764374999999-order-9.ndjson.gz");
    }

    #[test]
    fn batches_encode_deterministically_and_round_trip() {
        let items: Vec<Item> = (0..3)
            .map(|i| {
                Item::from([
                    ("pk".into(), AttributeValue::S(format!("e#{i}"))),
                    ("n".into(), AttributeValue::N(i.to_string())),
                ])
            })
            .collect();
        let a = encode_batch(&items);
        assert_eq!(a, encode_batch(&items), "same rows, same bytes");
        assert_eq!(decode_batch(&a).unwrap(), items);
        assert!(decode_batch(b"not gzip").is_err());
    }

    #[test]
    fn bucket_is_required() {
        let e = ArchiverConfig::from_env(&Env::from_pairs([]), Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.var, "TICKWORK_ARCHIVE_BUCKET");
    }
}
