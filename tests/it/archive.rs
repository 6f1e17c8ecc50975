use std::collections::BTreeMap;
use std::time::Duration;

use archiver::{decode_batch, run, s3_client, ArchiverConfig, Deps, Outcome};
use tickwork::budget::{Steps, Unlimited};
use tickwork::changes::{changes_table, record_change};
use tickwork::config::Env;
use tickwork_lambda::Tick;
use tickwork_tests::faults::{Fault, Faults, Planned};
use tickwork_tests::{quick_retry, unique, Local};

const DAY: i64 = 86_400_000;
/// 2026-11-29T00:00:00Z
const NOW: i64 = 1_795_910_400_000;

struct Setup {
    local: Local,
    deps: Deps,
    bucket: String,
    control: String,
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
    Setup { local, deps, bucket, control }
}

impl Setup {
    /// `n` rows written `age_days` days before NOW (1 ms apart from `offset_ms`), ids `prefix-i`.
    async fn rows_at(&self, prefix: &str, n: usize, age_days: i64, offset_ms: i64) -> Vec<String> {
        let mut keys = Vec::new();
        for i in 0..n {
            let ts = NOW - age_days * DAY + offset_ms + i as i64;
            let data = serde_json::json!({"i": i, "what": prefix});
            let id = format!("{prefix}-{i}");
            keys.push(
                record_change(&self.deps.db, &self.deps.table, self.deps.cfg.shards, "order", &id, &data, ts)
                    .await
                    .unwrap(),
            );
        }
        keys
    }

    async fn rows(&self, prefix: &str, n: usize, age_days: i64) -> Vec<String> {
        self.rows_at(prefix, n, age_days, 0).await
    }

    /// The same deps on clients through `faults` (a process that will die or be throttled).
    fn deps_with(&self, faults: &Faults) -> Deps {
        let db = self.local.db_with(Some(faults), None, &quick_retry());
        let s3 = self.local.s3_with(Some(faults), None);
        Deps::new(db, s3, self.local.clock(), self.deps.cfg.clone(), &self.control, self.deps.table.clone())
    }

    async fn sweep_with(
        &self,
        deps: &Deps,
        budget: &dyn tickwork::budget::Budget,
    ) -> Result<archiver::Report, archiver::ArchiveError> {
        deps.db.meter().reset();
        let now = tickwork::clock::Clock::now_ms(deps.clock.as_ref());
        run(deps, &Tick::parse(&Tick::envelope(now, false)).unwrap(), budget, &unique("arch")).await
    }

    async fn sweep(&self, budget: &dyn tickwork::budget::Budget) -> Result<archiver::Report, archiver::ArchiveError> {
        self.sweep_with(&self.deps, budget).await
    }

    /// Every archived row version (`pk`, `tsid`) with how many objects hold it, and the object count.
    async fn archived(&self) -> (BTreeMap<(String, String), usize>, usize) {
        let mut rows = BTreeMap::new();
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
                    let v = (item["pk"].as_s().unwrap().clone(), item["tsid"].as_s().unwrap().clone());
                    *rows.entry(v).or_default() += 1;
                }
            }
            match page.next_continuation_token() {
                Some(t) => token = Some(t.to_string()),
                None => break,
            }
        }
        (rows, objects)
    }

    /// The archived row keys, each once; fails if any version sits in two objects.
    async fn archived_once(&self) -> Vec<String> {
        let (rows, _) = self.archived().await;
        for (v, n) in &rows {
            assert_eq!(*n, 1, "{v:?} is in {n} objects");
        }
        rows.into_keys().map(|(pk, _)| pk).collect()
    }

    async fn remaining(&self) -> usize {
        tickwork_tests::count_where(&self.deps.db, &self.deps.table, "entity", "order").await
    }

    /// The archiver's state item is read with one GetItem per tick; clear its marks so the next
    /// tick probes (what an hour's wait would do).
    fn later(&self, ms: i64) {
        self.local.clock.advance(ms);
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// The first sweep probes each shard with one `Limit 1` key-condition Query and records the
/// oldest row that is not due; every sweep after it, until that row comes due or an hour passes,
/// is one GetItem of the state item and nothing else.
#[tokio::test]
async fn an_idle_sweep_is_one_read_once_the_oldest_row_is_known() {
    let s = setup(&[], 8).await;
    s.rows("fresh", 200, 1).await;
    let r = s.sweep(&Unlimited).await.unwrap();
    assert_eq!((r.outcome, r.probed), (Outcome::Idle, 8));
    let m = s.deps.db.meter();
    assert_eq!((m.op("Query").requests, m.op("Query").items_read), (8, 8), "8 shards, one oldest row each");
    assert_eq!(m.read_write_requests(), (9, 1), "the state item, 8 probes; the oldest row recorded");
    for _ in 0..5 {
        s.later(300_000);
        let r = s.sweep(&Unlimited).await.unwrap();
        assert_eq!((r.outcome, r.probed), (Outcome::Idle, 0));
        assert_eq!(s.deps.db.meter().read_write_requests(), (1, 0), "one read, no lease, no writes");
    }
    // An hour after the probe, the archiver looks again (a row written with an old timestamp by a
    // writer whose clock is behind would be found then).
    s.later(3_600_000);
    assert_eq!(s.sweep(&Unlimited).await.unwrap().probed, 8);
    assert_eq!(s.archived().await.1, 0, "no S3 object");
    // When the cutoff passes the oldest row (29 days on), the next tick probes and archives it.
    s.later(29 * DAY);
    let r = s.sweep(&Unlimited).await.unwrap();
    assert_eq!((r.outcome, r.archived), (Outcome::Completed, 200));
}

#[tokio::test]
async fn five_due_among_a_thousand_bill_five_items_and_one_per_shard_per_probe() {
    let s = setup(&[], 8).await;
    s.rows("fresh", 995, 1).await;
    let due = s.rows("old", 5, 40).await;
    let r = s.sweep(&Unlimited).await.unwrap();
    assert_eq!((r.outcome, r.archived), (Outcome::Completed, 5));
    let q = s.deps.db.meter().op("Query");
    // Two probes of 8 shards (before, and after to record the oldest row left) read one row
    // each; the due-row queries read exactly the 5 due rows; the 995 fresh rows are never read.
    assert_eq!(q.items_read, 5 + 2 * 8, "exactly the due rows and one per shard per probe");
    assert_eq!(sorted(s.archived_once().await), sorted(due));
    assert_eq!(s.remaining().await, 995, "fresh rows untouched");
}

#[tokio::test]
async fn a_backlog_drains_in_one_sweep_or_resumes_across_small_budgets() {
    let s = setup(&[("TICKWORK_ARCHIVE_PAGE_SIZE", "100")], 4).await;
    let due = s.rows("old", 800, 40).await;
    let r = s.sweep(&Unlimited).await.unwrap();
    assert_eq!((r.outcome, r.archived, r.shards_left), (Outcome::Completed, 800, 0));
    let (_, objects) = s.archived().await;
    assert_eq!(sorted(s.archived_once().await), sorted(due.clone()), "each due row once");
    assert!(objects >= 8, "one object per batch of at most 100: {objects}");
    assert_eq!(s.remaining().await, 0);
    // The archive restores into the table, row for row.
    let restored = archiver::restore(&s.deps.s3, &s.bucket, "archive/", &s.deps.db, &s.deps.table).await.unwrap();
    assert_eq!((restored, s.remaining().await), (800, 800));

    // Small budgets: several sweeps finish the job (the lease lapses between scheduled sweeps).
    let s = setup(&[("TICKWORK_ARCHIVE_PAGE_SIZE", "20")], 4).await;
    let due2 = s.rows("older", 400, 45).await;
    let mut sweeps = 0;
    loop {
        sweeps += 1;
        assert!(sweeps < 50);
        let r = s.sweep(&Steps::new(1)).await.unwrap();
        if r.outcome == Outcome::Completed {
            break;
        }
        assert_eq!(r.outcome, Outcome::Partial, "a backlog is never taken for idle");
        s.later(300_000);
    }
    assert!(sweeps > 2, "the budget cut the work ({sweeps} sweeps)");
    assert_eq!(sorted(s.archived_once().await), sorted(due2), "every row exactly once");
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
    // With the bucket back, the next sweep (after the failed one released its lease) finishes the
    // batches the failed one had recorded, at their recorded keys.
    s.later(300_000);
    let r = s.sweep(&Unlimited).await.unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    assert!(r.recovered >= 1);
    assert_eq!(s.archived_once().await.len(), 30);
    assert_eq!(s.remaining().await, 0);
}

/// A sweep that dies at the k-th conditional delete (1st, 3rd, 6th: mid-batch), and the next
/// scheduled sweep that recovers: every due row in S3 exactly once, every due row deleted, the
/// fresh ones kept.
#[tokio::test]
async fn a_crash_among_the_deletes_loses_and_doubles_nothing() {
    for crash_at in [1u64, 3, 6] {
        let s = setup(&[("TICKWORK_ARCHIVE_PAGE_SIZE", "40"), ("TICKWORK_ARCHIVE_SHARD_CONCURRENCY", "1")], 2).await;
        let due = s.rows("old", 300, 40).await;
        s.rows("fresh", 50, 1).await;
        let faults = Faults::new();
        faults.crash_before(Some("DeleteItem"), crash_at);
        let err = s.sweep_with(&s.deps_with(&faults), &Unlimited).await;
        assert!(err.is_err() && faults.crashed(), "crash_at={crash_at}: the sweep died");
        s.later(300_000);
        let r = s.sweep(&Unlimited).await.unwrap();
        assert_eq!(r.outcome, Outcome::Completed, "crash_at={crash_at}");
        assert_eq!(sorted(s.archived_once().await), sorted(due), "crash_at={crash_at}: each due row once");
        assert_eq!(s.remaining().await, 50, "crash_at={crash_at}: no due row left, fresh ones kept");
    }
}

/// A sweep that dies after recording its intent, before (or as) it writes the object: the next
/// sweep finds no object at the intent's key, re-reads the listed rows, and writes them there.
#[tokio::test]
async fn a_crash_around_the_put_writes_the_batch_once_at_its_recorded_key() {
    for fault in [Fault::CrashBefore, Fault::CrashAfter] {
        let s = setup(&[("TICKWORK_ARCHIVE_PAGE_SIZE", "25"), ("TICKWORK_ARCHIVE_SHARD_CONCURRENCY", "1")], 1).await;
        let due = s.rows("old", 60, 40).await;
        let faults = Faults::new();
        faults.plan(Planned { op: Some("PutObject"), nth: 2, fault });
        assert!(s.sweep_with(&s.deps_with(&faults), &Unlimited).await.is_err(), "{fault:?}");
        s.later(300_000);
        let r = s.sweep(&Unlimited).await.unwrap();
        assert_eq!((r.outcome, r.recovered), (Outcome::Completed, 1), "{fault:?}");
        assert_eq!(sorted(s.archived_once().await), sorted(due), "{fault:?}");
        assert_eq!(s.archived().await.1, 3, "{fault:?}: 25 + 25 + 10, one object each");
    }
}

/// Defect (found by reading): the object key came from the batch's first and last rows, and the
/// intent was recorded after the put. A crash between the two made the next sweep re-read a batch
/// that had grown (rows written since with timestamps inside it), under a new key: those rows were
/// in two objects. Now the intent names the key and the exact rows before the put.
#[tokio::test]
async fn a_batch_that_grew_after_a_crash_is_not_archived_twice() {
    let s = setup(&[("TICKWORK_ARCHIVE_PAGE_SIZE", "100"), ("TICKWORK_ARCHIVE_SHARD_CONCURRENCY", "1")], 1).await;
    let first = s.rows_at("old", 30, 40, 0).await;
    let faults = Faults::new();
    faults.plan(Planned { op: Some("PutObject"), nth: 1, fault: Fault::CrashAfter });
    assert!(s.sweep_with(&s.deps_with(&faults), &Unlimited).await.is_err());
    // Rows written since, due too (a writer whose clock is behind), sorting after the batch's last
    // row: a re-read of the page would now end elsewhere, and name another object.
    let late = s.rows_at("late", 5, 40, 100).await;
    s.later(300_000);
    let r = s.sweep(&Unlimited).await.unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    let mut all = first.clone();
    all.extend(late);
    assert_eq!(sorted(s.archived_once().await), sorted(all), "each row in exactly one object");
    assert_eq!(s.remaining().await, 0);
}

/// Defect (found by reading): rows were deleted by key alone. A change row rewritten after it was
/// read (the same entity, a new `tsid`) was deleted without its new version ever being archived.
/// Now a row is deleted only while it is still the version its object holds.
#[tokio::test]
async fn a_row_rewritten_after_it_was_read_is_not_deleted() {
    let s = setup(&[("TICKWORK_ARCHIVE_PAGE_SIZE", "100"), ("TICKWORK_ARCHIVE_SHARD_CONCURRENCY", "1")], 1).await;
    let due = s.rows("old", 20, 40).await;
    let faults = Faults::new();
    faults.crash_before(Some("DeleteItem"), 1);
    assert!(s.sweep_with(&s.deps_with(&faults), &Unlimited).await.is_err());
    // old-7 is written again, now: a new version, not due for 30 days.
    let data = serde_json::json!({"i": 7, "what": "rewritten"});
    record_change(&s.deps.db, &s.deps.table, 1, "order", "old-7", &data, NOW + 1_000).await.unwrap();
    s.later(300_000);
    let r = s.sweep(&Unlimited).await.unwrap();
    assert_eq!((r.outcome, r.kept), (Outcome::Completed, 1), "the rewritten row's delete failed its condition");
    assert_eq!(s.remaining().await, 1, "the new version of old-7 is still in the feed");
    assert_eq!(sorted(s.archived_once().await), sorted(due), "the old version of old-7 is archived, once");
    // When the new version comes due it is archived too: both versions, each once.
    s.later(31 * DAY);
    assert_eq!(s.sweep(&Unlimited).await.unwrap().archived, 1);
    let (rows, _) = s.archived().await;
    assert_eq!(rows.keys().filter(|(pk, _)| pk == "order#old-7").count(), 2);
    assert!(rows.values().all(|n| *n == 1));
    assert_eq!(s.remaining().await, 0);
}

/// Defect (found by reading): recovery deleted every row in the interrupted batch's *range*,
/// including a row written later with a timestamp inside it, which no object held. Now recovery
/// deletes exactly the versions its intent lists.
#[tokio::test]
async fn recovery_deletes_only_the_rows_its_object_holds() {
    let s = setup(&[("TICKWORK_ARCHIVE_PAGE_SIZE", "100"), ("TICKWORK_ARCHIVE_SHARD_CONCURRENCY", "1")], 1).await;
    let due = s.rows_at("old", 20, 40, 0).await;
    let faults = Faults::new();
    faults.crash_before(Some("DeleteItem"), 4);
    assert!(s.sweep_with(&s.deps_with(&faults), &Unlimited).await.is_err());
    // A row with a timestamp inside the stored batch's range, written after the crash.
    let stray = s.rows_at("stray", 1, 40, 5).await;
    s.later(300_000);
    let r = s.sweep(&Unlimited).await.unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    let mut all = due.clone();
    all.extend(stray);
    assert_eq!(sorted(s.archived_once().await), sorted(all), "the stray row archived by a later batch, not lost");
    assert_eq!(s.remaining().await, 0);
}

/// Restore writes back with BatchWriteItem; requests answered as unprocessed are sent again until
/// none remain.
#[tokio::test]
async fn restore_retries_unprocessed_writes_until_none_remain() {
    let s = setup(&[("TICKWORK_ARCHIVE_PAGE_SIZE", "60")], 1).await;
    let due = s.rows("old", 120, 40).await;
    assert_eq!(s.sweep(&Unlimited).await.unwrap().archived, 120);
    let faults = Faults::new();
    for nth in 1..=3 {
        faults.plan(Planned { op: Some("BatchWriteItem"), nth, fault: Fault::Unprocessed });
    }
    let db = s.local.db_with(Some(&faults), None, &quick_retry());
    let n = archiver::restore(&s.deps.s3, &s.bucket, "archive/", &db, &s.deps.table).await.unwrap();
    assert_eq!(n, 120);
    assert_eq!(faults.injected()[&Fault::Unprocessed], 3);
    // Two objects of 60 rows, each written as 25 + 25 + 10; the first three came back
    // unprocessed and were sent again.
    assert_eq!(faults.calls_of("BatchWriteItem"), 6 + 3);
    assert_eq!(s.remaining().await, due.len());
}
