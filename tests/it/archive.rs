use std::collections::BTreeSet;
use std::time::Duration;

use archiver::{decode_batch, run, s3_client, ArchiverConfig, Deps, Outcome};
use tickwork::budget::{Steps, Unlimited};
use tickwork::changes::{changes_table, record_change};
use tickwork::config::Env;
use tickwork_lambda::Tick;
use tickwork_tests::{unique, Local};

const DAY: i64 = 86_400_000;
/// 2026-11-29T00:00:00Z
const NOW: i64 = 1_795_910_400_000;

struct Setup {
    local: Local,
    deps: Deps,
    bucket: String,
}

async fn setup(env: &[(&str, &str)], shards: u32) -> Setup {
    let local = Local::new().await;
    let control = local.control().await;
    let table = local.table(&changes_table()).await;
    let bucket = unique("archive").to_lowercase();
    let s3 = s3_client(&local.sdk);
    s3.create_bucket().bucket(&bucket).send().await.unwrap();
    let shards_s = shards.to_string();
    let mut pairs: Vec<(&str, &str)> =
        vec![("TICKWORK_ARCHIVE_BUCKET", bucket.as_str()), ("TICKWORK_CHANGE_SHARDS", shards_s.as_str())];
    pairs.extend_from_slice(env);
    let cfg = ArchiverConfig::from_env(&Env::from_pairs(pairs), Duration::from_secs(1)).unwrap();
    let db = local.fresh_db();
    local.clock.set(NOW);
    let deps = Deps::new(db, s3, local.clock(), cfg, &control, table);
    Setup { local, deps, bucket }
}

impl Setup {
    /// `n` rows written `age_days` days before NOW (1 ms apart), ids `prefix-i`.
    async fn rows(&self, prefix: &str, n: usize, age_days: i64) -> Vec<String> {
        let mut keys = Vec::new();
        for i in 0..n {
            let ts = NOW - age_days * DAY + i as i64;
            let data = serde_json::json!({"i": i, "what": prefix});
            keys.push(
                record_change(
                    &self.deps.db,
                    &self.deps.table,
                    self.deps.cfg.shards,
                    "order",
                    &format!("{prefix}-{i}"),
                    &data,
                    ts,
                )
                .await
                .unwrap(),
            );
        }
        keys
    }

    async fn sweep(&self, budget: &dyn tickwork::budget::Budget) -> Result<archiver::Report, archiver::ArchiveError> {
        self.deps.db.meter().reset();
        run(&self.deps, &Tick::parse(&Tick::envelope(NOW, false)).unwrap(), budget, &unique("arch")).await
    }

    /// Every row in the bucket, decompressed, and the number of objects.
    async fn archived(&self) -> (Vec<String>, usize) {
        let mut rows = Vec::new();
        let mut objects = 0;
        let mut token = None;
        loop {
            let page = self
                .deps
                .s3
                .list_objects_v2()
                .bucket(&self.bucket)
                .set_continuation_token(token.take())
                .send()
                .await
                .unwrap();
            for o in page.contents() {
                objects += 1;
                let body = self.deps.s3.get_object().bucket(&self.bucket).key(o.key().unwrap()).send().await.unwrap();
                let bytes = body.body.collect().await.unwrap().into_bytes();
                for item in decode_batch(&bytes).unwrap() {
                    rows.push(item["pk"].as_s().unwrap().clone());
                }
            }
            match page.next_continuation_token() {
                Some(t) => token = Some(t.to_string()),
                None => break,
            }
        }
        (rows, objects)
    }

    async fn remaining(&self) -> usize {
        tickwork_tests::count_where(&self.deps.db, &self.deps.table, "entity", "order").await
    }
}

#[tokio::test]
async fn nothing_due_costs_one_empty_query_per_shard_and_nothing_else() {
    let s = setup(&[], 8).await;
    s.rows("fresh", 200, 1).await;
    let r = s.sweep(&Unlimited).await.unwrap();
    assert_eq!(r.outcome, Outcome::Idle);
    let m = s.deps.db.meter();
    assert_eq!((m.op("Query").requests, m.op("Query").items_read), (8, 0), "8 shards, 0 items billed");
    assert_eq!(m.read_write_requests(), (8, 0), "no lease, no writes");
    assert_eq!(s.archived().await.1, 0, "no S3 object");
}

#[tokio::test]
async fn five_due_among_a_thousand_bill_five_items() {
    let s = setup(&[], 8).await;
    s.rows("fresh", 995, 1).await;
    let due = s.rows("old", 5, 40).await;
    let r = s.sweep(&Unlimited).await.unwrap();
    assert_eq!((r.outcome, r.archived), (Outcome::Completed, 5));
    let q = s.deps.db.meter().op("Query");
    // The probe's page becomes the first batch: each due row billed once, the 995 fresh never.
    assert_eq!(q.items_read, 5, "exactly the due rows are billed");
    let (rows, _) = s.archived().await;
    assert_eq!(rows.iter().cloned().collect::<BTreeSet<_>>(), due.into_iter().collect());
    assert_eq!(s.remaining().await, 995, "fresh rows untouched");
}

#[tokio::test]
async fn a_backlog_drains_in_one_sweep_or_resumes_across_small_budgets() {
    let s = setup(&[("TICKWORK_ARCHIVE_PAGE_SIZE", "100")], 4).await;
    let due = s.rows("old", 2_000, 40).await;
    let r = s.sweep(&Unlimited).await.unwrap();
    assert_eq!((r.outcome, r.archived, r.shards_left), (Outcome::Completed, 2_000, 0));
    let (rows, objects) = s.archived().await;
    assert_eq!(rows.len(), 2_000);
    assert_eq!(rows.iter().cloned().collect::<BTreeSet<_>>(), due.iter().cloned().collect(), "each due row once");
    assert!(objects >= 20, "one object per batch of at most 100: {objects}");
    assert_eq!(s.remaining().await, 0);
    // The archive restores into the table, row for row.
    let restored = archiver::restore(&s.deps.s3, &s.bucket, "archive/", &s.deps.db, &s.deps.table).await.unwrap();
    assert_eq!((restored, s.remaining().await), (2_000, 2_000));

    // Small budgets: several sweeps finish the job (the lease lapses between scheduled sweeps).
    let s = setup(&[("TICKWORK_ARCHIVE_PAGE_SIZE", "50")], 4).await;
    let due2 = s.rows("older", 1_000, 45).await;
    let mut sweeps = 0;
    loop {
        sweeps += 1;
        assert!(sweeps < 50);
        let r = s.sweep(&Steps::new(1)).await.unwrap();
        if r.outcome == Outcome::Completed || r.outcome == Outcome::Idle {
            break;
        }
        s.local.clock.advance(300_000);
        s.deps.db.meter().reset();
    }
    assert!(sweeps > 2, "the budget cut the work ({sweeps} sweeps)");
    let (rows, _) = s.archived().await;
    assert_eq!(rows.iter().cloned().collect::<BTreeSet<_>>(), due2.into_iter().collect());
    assert_eq!(rows.len(), 1_000, "every row exactly once");
}

#[tokio::test]
async fn dry_run_writes_nothing_and_a_missing_bucket_deletes_nothing() {
    let s = setup(&[], 4).await;
    s.rows("old", 30, 40).await;
    s.deps.db.meter().reset();
    let dry = run(&s.deps, &Tick::parse(&Tick::envelope(NOW, true)).unwrap(), &Unlimited, "dry").await.unwrap();
    assert_eq!(dry.outcome, Outcome::DryRun);
    assert_eq!(dry.due_by_shard.iter().sum::<u64>(), 30);
    assert_eq!(s.deps.db.meter().read_write_requests().1, 0);
    assert_eq!(s.archived().await.1, 0);

    let mut deps = s.deps.clone();
    deps.cfg.bucket = "no-such-bucket-here".into();
    let err = run(&deps, &Tick::parse(&Tick::envelope(NOW, false)).unwrap(), &Unlimited, "x").await.unwrap_err();
    assert!(err.to_string().contains("no-such-bucket-here"), "{err}");
    assert_eq!(s.remaining().await, 30, "nothing deleted");
}

/// Fails BatchWriteItem (the deletes that follow each S3 put) when told to, or answers the first
/// ones with every request unprocessed.
#[derive(Debug, Clone, Default)]
struct DeleteFaults {
    /// Fail the n-th BatchWriteItem call (1-based) and every one after: the worker died there.
    crash_at: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Answer this many calls with all their requests in UnprocessedItems.
    unprocessed: std::sync::Arc<std::sync::atomic::AtomicU64>,
    calls: std::sync::Arc<std::sync::atomic::AtomicU64>,
    last_body: std::sync::Arc<std::sync::Mutex<Option<serde_json::Value>>>,
}

use aws_sdk_dynamodb::config::interceptors::{
    BeforeDeserializationInterceptorContextMut, BeforeSerializationInterceptorContextRef,
    BeforeTransmitInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::operation::batch_write_item::BatchWriteItemInput;
use std::sync::atomic::Ordering::SeqCst;

type BoxError = aws_smithy_runtime_api::box_error::BoxError;

impl Intercept for DeleteFaults {
    fn name(&self) -> &'static str {
        "DeleteFaults"
    }
    fn read_before_execution(
        &self,
        ctx: &BeforeSerializationInterceptorContextRef<'_>,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if ctx.input().downcast_ref::<BatchWriteItemInput>().is_some() {
            let n = self.calls.fetch_add(1, SeqCst) + 1;
            let at = self.crash_at.load(SeqCst);
            if at > 0 && n >= at {
                return Err("injected crash between the S3 put and the delete".into());
            }
        }
        Ok(())
    }
    fn read_before_transmit(
        &self,
        ctx: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let body = ctx.request().body().bytes().and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok());
        *self.last_body.lock().unwrap() = body;
        Ok(())
    }
    fn modify_before_deserialization(
        &self,
        ctx: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let body = self.last_body.lock().unwrap().clone();
        let Some(req) = body.filter(|b| b.get("RequestItems").is_some()) else { return Ok(()) };
        if self.unprocessed.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)).is_ok() {
            // The deletes were applied; the answer says none were: a retry must be harmless.
            let answer = serde_json::json!({ "UnprocessedItems": req["RequestItems"] });
            *ctx.response_mut().body_mut() = aws_smithy_types::body::SdkBody::from(answer.to_string());
        }
        Ok(())
    }
}

fn faulty(s: &Setup, faults: &DeleteFaults) -> Deps {
    let conf = aws_sdk_dynamodb::config::Builder::from(&s.local.sdk).interceptor(faults.clone()).build();
    let db = tickwork::Db::new(
        aws_sdk_dynamodb::Client::from_conf(conf),
        tickwork::meter::Meter::new(tickwork::meter::CapacitySource::Estimate),
    );
    Deps {
        db: db.clone(),
        leases: tickwork::lease::LeaseStore::new(db.clone(), s.deps.leases.table(), s.local.clock()),
        checkpoints: tickwork::checkpoint::Checkpoints::new(
            db,
            s.deps.leases.table(),
            s.local.clock(),
            Duration::from_secs(86_400),
        ),
        ..s.deps.clone()
    }
}

#[tokio::test]
async fn a_crash_between_put_and_delete_loses_and_doubles_nothing() {
    for crash_at in [1u64, 3, 6] {
        let s = setup(&[("TICKWORK_ARCHIVE_PAGE_SIZE", "40"), ("TICKWORK_ARCHIVE_SHARD_CONCURRENCY", "1")], 2).await;
        let due = s.rows("old", 300, 40).await;
        s.rows("fresh", 50, 1).await;
        let faults = DeleteFaults::default();
        faults.crash_at.store(crash_at, SeqCst);
        let crashed = faulty(&s, &faults);
        let err = run(&crashed, &Tick::parse(&Tick::envelope(NOW, false)).unwrap(), &Unlimited, "dies").await;
        assert!(err.is_err(), "crash_at={crash_at}: the sweep died");
        // The next scheduled sweep, after the dead one's lease lapsed, recovers.
        s.local.clock.advance(300_000);
        let r = s.sweep(&Unlimited).await.unwrap();
        assert_eq!(r.outcome, Outcome::Completed, "crash_at={crash_at}");
        let (rows, _) = s.archived().await;
        assert_eq!(rows.len(), 300, "crash_at={crash_at}: no duplicate row in S3");
        assert_eq!(
            rows.into_iter().collect::<BTreeSet<_>>(),
            due.iter().cloned().collect(),
            "crash_at={crash_at}: nothing missing"
        );
        assert_eq!(s.remaining().await, 50, "crash_at={crash_at}: no due row left, fresh ones kept");
    }
}

#[tokio::test]
async fn unprocessed_deletes_are_retried_until_none_remain() {
    let s = setup(&[("TICKWORK_ARCHIVE_PAGE_SIZE", "60")], 1).await;
    let due = s.rows("old", 120, 40).await;
    let faults = DeleteFaults::default();
    faults.unprocessed.store(3, SeqCst);
    let d = faulty(&s, &faults);
    let r = run(&d, &Tick::parse(&Tick::envelope(NOW, false)).unwrap(), &Unlimited, "u").await.unwrap();
    assert_eq!((r.outcome, r.archived), (Outcome::Completed, 120));
    // Two pages of 60 rows, each deleted as 25 + 25 + 10: the first page's three calls were
    // answered "unprocessed" and all three were sent again; the second page's went through.
    assert_eq!(faults.calls.load(SeqCst), 9);
    assert_eq!(s.remaining().await, 0);
    let (rows, _) = s.archived().await;
    assert_eq!(rows.into_iter().collect::<BTreeSet<_>>(), due.into_iter().collect());
}
