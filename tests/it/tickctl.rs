use std::sync::Arc;

use tickwork::clock::Clock;
use tickwork::config::{CoreConfig, Env};
use tickwork::queue::{Claim, NewItem, Queue, QueueConfig};
use tickwork::watermark::Watermarks;
use tickwork_lambda::Base;
use tickwork_tests::{unique, Local};

/// `provision`, then `status` (its JSON form) reflects a pause and a dead letter seeded through
/// the library, and `resume` / `retry` undo them.
#[tokio::test]
async fn provision_status_pause_and_dead_letters() {
    let local = Local::new().await;
    let prefix = unique("ctl");
    let env = Env::from_pairs([("TICKWORK_TABLE_PREFIX", prefix.as_str()), ("TICKWORK_QUEUE_MAX_ATTEMPTS", "1")]);
    let core = CoreConfig::from_env(&env).unwrap();
    let base = Base { core, sdk: local.sdk.clone(), db: local.db.clone(), clock: Arc::new(local.clock.clone()) };
    let made = tickctl::provision(&base, &env).await.unwrap();
    assert_eq!(made.len(), tickctl::all_tables().len());
    assert!(made.contains(&format!("{prefix}-control")));

    let marks = Watermarks::new(base.db.clone(), &base.core.control_table, base.clock.clone());
    marks.set_paused("pulse-sweep", true, Some("runaway writer")).await.unwrap();
    let q =
        Queue::new(base.db.clone(), base.core.table("queue"), QueueConfig::from_env(&env).unwrap(), base.clock.clone());
    let now = local.clock.now_ms();
    for id in ["ok-1", "bad-1"] {
        q.enqueue(&NewItem { id: id.into(), kind: "k".into(), payload: "{}".into(), tenant: None, due_ms: now })
            .await
            .unwrap();
    }
    let Claim::Claimed(job) = q.claim("bad-1", "w").await.unwrap() else { panic!() };
    q.fail(&job, "boom").await.unwrap();

    let status = serde_json::to_value(tickctl::status(&base, &env).await.unwrap()).unwrap();
    let sweep = status["jobs"].as_array().unwrap().iter().find(|j| j["job"] == "pulse-sweep").unwrap();
    assert_eq!(sweep["watermark"]["paused"], true);
    assert_eq!(sweep["watermark"]["paused_reason"], "runaway writer");
    assert_eq!(status["dead_letters"], 1);
    let ready: u64 = status["ready_by_shard"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(ready, 1, "ok-1 is ready, bad-1 is dead");

    // The release the stack runs and the time zone database it decides with (a government's rule
    // change reaches a stack only with a release carrying a newer one: docs/operations.md).
    assert_eq!(status["tickctl_version"], tickwork::release::VERSION);
    assert_eq!(status["tzdb"], tickwork::release::tzdb());
    assert!(status["stack_version"].is_null(), "no Version output read: none claimed");
    let told =
        Env::from_pairs([("TICKWORK_TABLE_PREFIX", prefix.as_str()), ("TICKWORK_STACK_VERSION", "0.1.0+tzdb.2026f")]);
    let status = serde_json::to_value(tickctl::status(&base, &told).await.unwrap()).unwrap();
    assert_eq!(status["stack_version"], "0.1.0+tzdb.2026f");
    let text = crate::binary::ok(
        &crate::binary::tickctl_command(&local, &prefix)
            .env("TICKWORK_STACK_VERSION", "0.1.0+tzdb.2026f")
            .arg("status")
            .output()
            .unwrap(),
    );
    let first = text.lines().next().unwrap_or_default();
    let want = format!(
        "stack release 0.1.0+tzdb.2026f (tickctl {}), time zone database {}",
        tickwork::release::VERSION,
        tickwork::release::tzdb()
    );
    assert!(first.starts_with(&want), "{first}");

    marks.set_paused("pulse-sweep", false, None).await.unwrap();
    assert!(q.retry_dead("bad-1").await.unwrap());
    assert!(!q.retry_dead("bad-1").await.unwrap(), "only dead letters can be retried");
    let status = serde_json::to_value(tickctl::status(&base, &env).await.unwrap()).unwrap();
    assert_eq!(status["dead_letters"], 0);
    let sweep = status["jobs"].as_array().unwrap().iter().find(|j| j["job"] == "pulse-sweep").unwrap();
    assert_eq!(sweep["watermark"]["paused"], false);
}

/// `invoke` refuses a function it does not know, naming it.
#[tokio::test]
async fn invoke_rejects_an_unknown_function_by_name() {
    let env = Env::from_pairs([]);
    let err = tickctl::invoke(&env, "no-such-fn", serde_json::json!({})).await.unwrap_err();
    assert!(err.to_string().contains("no-such-fn"));
}

use tickwork_tests::ms;

/// A sweep on its own tables, its clock at `at`.
async fn sweep_deps(local: &Local, at: &str) -> pulse_sweep::Deps {
    use tickwork::queue::queue_table;
    use tickwork::tenants::tenants_table;
    local.clock.set(ms(at));
    let tables = local.sweep_tables().await;
    let cfg = pulse_sweep::PulseConfig::from_env(&Env::from_pairs([]), std::time::Duration::from_secs(1)).unwrap();
    let db = local.fresh_db();
    db.register_gsis(&tables.queue, queue_table().gsi_shapes());
    db.register_gsis(&tables.tenants, tenants_table().gsi_shapes());
    pulse_sweep::Deps::new(db, local.clock(), cfg, tables, 8, QueueConfig::default())
}

async fn tick(local: &Local, d: &pulse_sweep::Deps, at: &str) -> pulse_sweep::Report {
    local.clock.set(ms(at));
    d.db.meter().reset();
    let t = tickwork_lambda::Tick::parse(&tickwork_lambda::Tick::envelope(ms(at), false)).unwrap();
    pulse_sweep::run(d, &t, &tickwork::budget::Unlimited, &format!("w-{at}")).await.unwrap()
}

/// `plan` (its JSON form) names each zone group's next boundary and tenant count, writes nothing,
/// and the tick it predicts then makes exactly the reads and writes it said; a pause shows.
#[tokio::test]
async fn plan_predicts_the_next_boundary_tick_and_writes_nothing() {
    let local = Local::new().await;
    let d = sweep_deps(&local, "2026-03-28T12:00:00Z").await;
    let zones = ["Europe/Berlin", "Asia/Tokyo", "UTC"];
    // 13 Berlin, 7 Tokyo, 3 UTC tenants (round-robin over a weighted list).
    let mut list = Vec::new();
    for (zone, n) in [(zones[0], 13), (zones[1], 7), (zones[2], 3)] {
        for i in 0..n {
            list.push(tickwork::tenants::Tenant {
                id: format!("{}-{i:03}", zone.replace('/', "-")),
                zone: zone.into(),
                active: true,
                since_ms: None,
                pos: Default::default(),
            });
        }
    }
    pulse_sweep::add_tenants(&d, &list).await.unwrap();
    // First sight: every group completes its 03-28; the next tick visits the tenants woken when
    // they were added (they follow their groups by then).
    assert_eq!(tick(&local, &d, "2026-03-28T12:00:00Z").await.groups_completed, 3);
    tick(&local, &d, "2026-03-28T12:15:00Z").await;

    d.db.meter().reset();
    let p = tickctl::plan(&d, "pulse-sweep", ms("2026-03-28T14:00:00Z"), |_, _| {}).await.unwrap();
    assert_eq!(d.db.meter().read_write_requests().1, 0, "plan writes nothing");
    let p = serde_json::to_value(&p).unwrap();
    assert_eq!(p["paused"], false);
    assert_eq!(p["idle_tick"], serde_json::json!([1, 0]));
    let g = |zone: &str| p["groups"].as_array().unwrap().iter().find(|g| g["zone"] == zone).unwrap().clone();
    // Midnight of Sunday 03-29: Tokyo (UTC+9) at 15:00Z, Berlin (still CET, UTC+1) at 23:00Z, UTC at 00:00Z.
    assert_eq!(g("Asia/Tokyo")["next_boundary"], "2026-03-28T15:00:00Z");
    assert_eq!(g("Europe/Berlin")["next_boundary"], "2026-03-28T23:00:00Z");
    assert_eq!(g("UTC")["next_boundary"], "2026-03-29T00:00:00Z");
    assert_eq!(g("Europe/Berlin")["watermark"], "2026-03-28");
    assert_eq!(g("Asia/Tokyo")["due_now"], false);
    assert_eq!(g("Asia/Tokyo")["grains"], serde_json::json!(["day"]));
    assert_eq!(g("UTC")["new_tenants_owed"].as_array().unwrap().len(), 5, "every grain by default");
    // A sweep set to days plans days alone.
    let mut days = d.clone();
    days.cfg.grains = tickwork::grains::Grains::parse("day").unwrap();
    let only =
        serde_json::to_value(tickctl::plan(&days, "pulse-sweep", ms("2026-03-28T14:00:00Z"), |_, _| {}).await.unwrap())
            .unwrap();
    let owed = &only["groups"].as_array().unwrap()[0]["new_tenants_owed"];
    assert_eq!(owed.as_array().unwrap().len(), 1, "{owed}");
    d.db.meter().reset();
    assert_eq!((g("Europe/Berlin")["tenants"].as_u64(), g("Asia/Tokyo")["tenants"].as_u64()), (Some(13), Some(7)));
    let first = &p["ticks"][0];
    assert_eq!(first["at"], "2026-03-28T15:00:00Z");
    assert_eq!(first["groups"], serde_json::json!(["Asia/Tokyo"]));

    // The predicted tick, live.
    let r = tick(&local, &d, "2026-03-28T15:00:00Z").await;
    assert_eq!((r.groups_completed, r.tenants), (1, 7));
    let (reads, writes) = d.db.meter().read_write_requests();
    assert_eq!((reads, writes), (first["reads"].as_u64().unwrap(), first["writes"].as_u64().unwrap()));

    // An idle tick after it costs what plan said; a pause shows in the plan.
    tick(&local, &d, "2026-03-28T15:01:00Z").await;
    assert_eq!(d.db.meter().read_write_requests(), (1, 0));
    d.marks.set_paused("pulse-sweep", true, Some("audit")).await.unwrap();
    let p = tickctl::plan(&d, "pulse-sweep", ms("2026-03-28T16:00:00Z"), |_, _| {}).await.unwrap();
    assert!(p.paused);
    let err = tickctl::plan(&d, "archiver", ms("2026-03-28T16:00:00Z"), |_, _| {}).await.unwrap_err();
    assert!(err.to_string().contains("`archiver`"), "{err}");
}

/// `audit` over the lines real invocations log: healthy ticks and drains raise nothing; a
/// `000_*`-style tick (7 cursor GetItems per tenant, nothing written) raises both tells.
#[tokio::test]
async fn audit_reads_real_invocation_logs_and_flags_the_tells() {
    use tickwork::schema::key;
    let local = Local::new().await;
    let d = sweep_deps(&local, "2026-03-28T12:00:00Z").await;
    let list: Vec<_> = (0..20).map(|i| tickwork::tenants::sample_tenant(i, &["UTC"], None)).collect();
    pulse_sweep::add_tenants(&d, &list).await.unwrap();
    let queue = Queue::new(d.db.clone(), &d.tables.queue, QueueConfig::default(), local.clock());
    let summaries = local.table(&queue_worker::summary::summaries_table()).await;
    let handlers = queue_worker::summary::registry(d.db.clone(), &summaries, local.clock());
    let mut log = String::new();
    fn emit(log: &mut String, job: &str, m: &tickwork::meter::Meter) {
        let line =
            tickwork::meter::InvocationLine { job: job.into(), outcome: "completed".into(), ..Default::default() };
        // As `aws logs tail` prints a line: time and stream first.
        *log += &format!("2026-03-28T23:45:00 stream {}\n", m.invocation_line("tickwork", 0, "INFO", &line));
    }
    // 30 one-minute ticks, each followed by a queue drain, as deployed: the first runs Berlin's
    // boundary and visits the others' woken tenants, the second visits Berlin's, 00:00Z is UTC's
    // boundary, the other 27 idle.
    for i in 0..30 {
        let at = jiff::Timestamp::from_millisecond(ms("2026-03-28T23:45:00Z") + i * 60_000).unwrap().to_string();
        tick(&local, &d, &at).await;
        emit(&mut log, "pulse-sweep", d.db.meter());
        d.db.meter().reset();
        queue_worker::drain(
            &queue,
            &handlers,
            "w",
            &tickwork::budget::Unlimited,
            &queue_worker::WorkerConfig::default(),
        )
        .await
        .unwrap();
        emit(&mut log, "queue-worker", d.db.meter());
    }
    let rules = tickctl::audit::Rules::default();
    let a = tickctl::audit::audit(log.as_bytes(), &rules, |_| {}).unwrap();
    let j = serde_json::to_value(&a).unwrap();
    assert_eq!(j["findings"], serde_json::json!([]), "{:#}", j["findings"]);
    assert_eq!(j["invocations"]["pulse-sweep"]["count"], 30);
    assert_eq!(j["invocations"]["pulse-sweep"]["idle_reads_max"], 1);
    assert_eq!(j["invocations"]["queue-worker"]["idle_reads_max"], 8);
    let control_get = format!("{} GetItem", d.tables.control);
    assert!(j["capacity"]["pulse-sweep"][&control_get]["requests"].as_f64().unwrap() >= 30.0);
    assert_eq!(j["unreadable"], 0);

    // Three ticks of the before design on the same control table: 20 tenants x 7 grains, read one
    // by one, nothing written.
    for _ in 0..3 {
        d.db.meter().reset();
        for t in &list {
            for g in tickwork::calendar::Grain::ALL {
                let k = key(format!("cursor#{}", t.id), g.name());
                d.db.get(d.db.client().get_item().table_name(&d.tables.control).set_key(Some(k))).await.unwrap();
            }
        }
        emit(&mut log, "pulse-sweep", d.db.meter());
    }
    let a = tickctl::audit::audit(log.as_bytes(), &rules, |_| {}).unwrap();
    let j = serde_json::to_value(&a).unwrap();
    let findings = j["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 2, "{findings:#?}");
    assert!(findings[0]["message"].as_str().unwrap().contains("bookkeeping outweighs the data it books"));
    assert!(
        findings[1]["message"]
            .as_str()
            .unwrap()
            // 27 live idle ticks: the first runs Berlin's boundary (its midnight passed unticked),
            // the next visits Berlin's tenants woken as that run started, 00:00 is UTC's.
            .contains("3 of 30 idle invocations read more than the expected 1 (up to 140 reads)"),
        "{findings:#?}"
    );
    assert_eq!(j["invocations"]["pulse-sweep"]["idle_reads_max"], 140);
}
