//! Bad input refused and nothing written; every job's pause switch, read in the one read its idle
//! tick already makes; tenant ids at their limit work end to end.

use std::time::Duration;

use tickwork::budget::Unlimited;
use tickwork::config::Env;
use tickwork::queue::{queue_table, NewItem, Queue, QueueConfig};
use tickwork::tenants::{tenants_table, Tenant, MAX_TENANT_ID_BYTES};
use tickwork::watermark::Watermarks;
use tickwork_lambda::{Outcome, Tick};
use tickwork_tests::{count_where, unique, Local};

use tickwork_tests::ms;

struct Stack {
    local: Local,
    control: String,
    tenants: String,
    queue: String,
    summaries: String,
    changes: String,
    bucket: String,
}

impl Stack {
    async fn new() -> Self {
        let local = Local::new().await;
        let bucket = unique("guards").to_lowercase();
        archiver::s3_client(&local.sdk).create_bucket().bucket(&bucket).send().await.unwrap();
        Self {
            control: local.control().await,
            tenants: local.table(&tenants_table()).await,
            queue: local.table(&queue_table()).await,
            summaries: local.table(&queue_worker::summary::summaries_table()).await,
            changes: local.table(&tickwork::changes::changes_table()).await,
            bucket,
            local,
        }
    }

    fn sweep(&self) -> pulse_sweep::Deps {
        let cfg = pulse_sweep::PulseConfig::from_env(&Env::from_pairs([]), Duration::from_secs(1)).unwrap();
        let t = pulse_sweep::Tables {
            control: self.control.clone(),
            tenants: self.tenants.clone(),
            queue: self.queue.clone(),
        };
        let db = self.local.fresh_db();
        db.register_gsis(&self.queue, queue_table().gsi_shapes());
        pulse_sweep::Deps::new(db, self.local.clock(), cfg, t, 4, QueueConfig::default())
    }

    fn fanout(&self) -> tenant_fanout::Deps {
        let cfg = tenant_fanout::FanoutConfig::from_env(&Env::from_pairs([]), Duration::from_secs(1)).unwrap();
        let t = tenant_fanout::Tables {
            control: self.control.clone(),
            tenants: self.tenants.clone(),
            queue: self.queue.clone(),
        };
        tenant_fanout::Deps::new(self.local.fresh_db(), self.local.clock(), cfg, &t, 4, QueueConfig::default())
    }

    fn worker(&self) -> queue_worker::Deps {
        let db = self.local.fresh_db();
        let q = Queue::new(db.clone(), &self.queue, QueueConfig::default(), self.local.clock());
        let reg = queue_worker::summary::registry(db, &self.summaries, self.local.clock());
        queue_worker::Deps::new(q, reg, queue_worker::WorkerConfig::default(), self.local.clock())
    }

    fn archiver(&self) -> archiver::Deps {
        let cfg = archiver::ArchiverConfig::from_env(
            &Env::from_pairs([("TICKWORK_ARCHIVE_BUCKET", self.bucket.as_str())]),
            Duration::from_secs(1),
        )
        .unwrap();
        archiver::Deps::new(
            self.local.fresh_db(),
            archiver::s3_client(&self.local.sdk),
            self.local.clock(),
            cfg,
            &self.control,
            self.changes.clone(),
        )
    }
}

/// An event dated 400 days ahead, and one in the year 10000, are refused by every function with
/// an error naming the field, before any read or write.
#[tokio::test]
async fn events_from_the_future_are_refused_by_every_job_and_write_nothing() {
    let s = Stack::new().await;
    let now = ms("2026-11-29T12:00:00Z");
    s.local.clock.set(now);
    let ahead = Tick::envelope(now + 400 * 86_400_000, false);
    let mut far = Tick::envelope(now, false);
    far["time"] = "+10000-01-01T00:00:00Z".into();
    let (sweep, fanout, worker, arch) = (s.sweep(), s.fanout(), s.worker(), s.archiver());
    let deadline = now + 60_000;
    for ev in [ahead, far] {
        let errors = [
            (
                pulse_sweep::handle(&sweep, ev.clone(), deadline).await.unwrap_err().to_string(),
                sweep.db.meter().total(),
            ),
            (
                tenant_fanout::handle(&fanout, ev.clone(), deadline).await.unwrap_err().to_string(),
                fanout.db.meter().total(),
            ),
            (
                queue_worker::handle(&worker, ev.clone(), deadline).await.unwrap_err().to_string(),
                worker.queue.db().meter().total(),
            ),
            (archiver::handle(&arch, ev.clone(), deadline).await.unwrap_err().to_string(), arch.db.meter().total()),
        ];
        for (e, used) in errors {
            assert!(e.contains("field `time`"), "{e}");
            assert_eq!(used.requests, 0, "{e}: refused before any request");
        }
    }
}

/// `pause` stops each of the four jobs at its next tick with no read beyond what its idle tick
/// makes; `resume` lets it run.
#[tokio::test]
async fn pause_stops_every_job_with_no_extra_read_and_resume_restarts_it() {
    let s = Stack::new().await;
    let now = ms("2026-11-29T12:00:00Z");
    s.local.clock.set(now);
    let (sweep, fanout, worker, arch) = (s.sweep(), s.fanout(), s.worker(), s.archiver());
    let tick = Tick::parse(&Tick::envelope(now, false)).unwrap();
    let tenants = tickwork_tests::tenants(6, "UTC", 0);
    pulse_sweep::add_tenants(&sweep, &tenants).await.unwrap();
    let marks = Watermarks::new(s.local.fresh_db(), &s.control, s.local.clock());
    let queue = Queue::new(s.local.fresh_db(), &s.queue, QueueConfig::default(), s.local.clock());
    for job in ["pulse-sweep", "fanout-utc-daily", "archiver"] {
        marks.set_paused(job, true, Some("test")).await.unwrap();
    }
    queue.set_paused(true).await.unwrap();
    queue
        .enqueue(&NewItem {
            id: "w1".into(),
            kind: "utc-daily".into(),
            payload: r#"{"tenant":"t1","window":"2026-11-29"}"#.into(),
            tenant: Some("t1".into()),
            due_ms: now,
        })
        .await
        .unwrap();

    sweep.db.meter().reset();
    assert_eq!(pulse_sweep::run(&sweep, &tick, &Unlimited, "a").await.unwrap().outcome, Outcome::Paused);
    assert_eq!(sweep.db.meter().read_write_requests(), (1, 0), "the sweep's idle read, nothing else");
    fanout.db.meter().reset();
    assert_eq!(tenant_fanout::run(&fanout, &tick, &Unlimited, "a").await.unwrap().outcome, Outcome::Paused);
    assert_eq!(fanout.db.meter().read_write_requests(), (1, 0), "the fan-out's idle read");
    arch.db.meter().reset();
    assert_eq!(archiver::run(&arch, &tick, &Unlimited, "a").await.unwrap().outcome, Outcome::Paused);
    assert_eq!(arch.db.meter().read_write_requests(), (1, 0), "the archiver's idle read");
    let m = worker.queue.db().meter();
    m.reset();
    let r = queue_worker::handle(&worker, Tick::envelope(now, false), now + 60_000).await.unwrap();
    assert_eq!((r.outcome, r.claimed), (Outcome::Paused, 0));
    assert_eq!(m.read_write_requests(), (1, 0), "one poll (fewer than an idle worker's one per shard), no claim");

    for job in ["pulse-sweep", "fanout-utc-daily", "archiver"] {
        marks.set_paused(job, false, None).await.unwrap();
    }
    queue.set_paused(false).await.unwrap();
    assert_eq!(pulse_sweep::run(&sweep, &tick, &Unlimited, "b").await.unwrap().outcome, Outcome::Completed);
    assert_eq!(tenant_fanout::run(&fanout, &tick, &Unlimited, "b").await.unwrap().outcome, Outcome::Completed);
    assert_eq!(archiver::run(&arch, &tick, &Unlimited, "b").await.unwrap().outcome, Outcome::Idle);
    let r = queue_worker::handle(&worker, Tick::envelope(now, false), now + 60_000).await.unwrap();
    assert!(r.finished >= 1, "{r:?}");
}

/// A tenant id over the limit is refused when added, naming the limit, and nothing is written;
/// an id exactly at the limit goes through every job end to end: its day pulse, its fan-out
/// item, its daily summary and its UTC rollup.
#[tokio::test]
async fn tenant_ids_over_the_limit_are_refused_and_ids_at_the_limit_work_end_to_end() {
    let s = Stack::new().await;
    let now = ms("2026-11-29T12:00:00Z");
    s.local.clock.set(now);
    let sweep = s.sweep();
    let long =
        Tenant { id: "x".repeat(1_500), zone: "UTC".into(), active: true, since_ms: None, pos: Default::default() };
    let e = pulse_sweep::add_tenants(&sweep, &[long]).await.unwrap_err().to_string();
    assert!(e.contains("1500 bytes") && e.contains(&MAX_TENANT_ID_BYTES.to_string()), "{e}");
    let e = pulse_sweep::add_tenants(
        &sweep,
        &[Tenant { id: "a\u{7}b".into(), zone: "UTC".into(), active: true, since_ms: None, pos: Default::default() }],
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("control characters"), "{e}");
    assert_eq!(count_where(&s.local.db, &s.tenants, "zone", "UTC").await, 0, "nothing written");

    // At the limit, with multi-byte characters to count bytes, not characters.
    let mut id = "ü".repeat(MAX_TENANT_ID_BYTES / 2);
    id.truncate(MAX_TENANT_ID_BYTES);
    assert_eq!(id.len(), MAX_TENANT_ID_BYTES);
    // Migrated (owed from yesterday), so that the first tick pulses a day for it.
    let at_limit = Tenant { id: id.clone(), zone: "UTC".into(), active: true, since_ms: None, pos: Default::default() };
    pulse_sweep::add_tenants(&sweep, &tickwork_tests::owed_from_yesterday(vec![at_limit], now)).await.unwrap();
    let tick = Tick::parse(&Tick::envelope(now, false)).unwrap();
    let r = pulse_sweep::run(&sweep, &tick, &Unlimited, "s").await.unwrap();
    assert_eq!((r.outcome, r.pulses["day"], r.failed_tenants), (Outcome::Completed, 1, 0));
    let f = tenant_fanout::run(&s.fanout(), &tick, &Unlimited, "f").await.unwrap();
    assert_eq!((f.outcome, f.enqueued, f.failed_tenants), (Outcome::Completed, 1, 0));
    let worker = s.worker();
    let w = queue_worker::drain(&worker.queue, &worker.handlers, "w", &Unlimited, &worker.cfg).await.unwrap();
    assert_eq!((w.dead_lettered, w.retried), (0, 0), "{w:?}");
    let rows = count_where(&s.local.db, &s.summaries, "pk", &id).await;
    assert_eq!(rows, 2, "the daily summary (day pulse) and the UTC rollup (fan-out item)");
}
