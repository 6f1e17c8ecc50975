use tickctl::cost::model;
use tickwork_sim::{simulate, SimConfig};
use tickwork_tests::Local;

fn within(model: f64, live: f64, tol: f64) -> bool {
    (model - live).abs() <= tol * live.max(1.0)
}

/// `tickctl cost` predicts what the handlers do: a live simulated day (48 tenants in 8 zones,
/// 3 workers on phase-shifted 5-minute ticks, queue drains every 3 ticks, from 2026-03-29T00:00Z:
/// every zone's first sight and next local midnight, Berlin's DST change, Auckland's and Tokyo's
/// month and quarter end) against the model with the same input, job by job and operation by
/// operation.
#[tokio::test(flavor = "multi_thread")]
async fn cost_model_predicts_a_live_run_within_one_percent() {
    let local = Local::new().await;
    // 5-minute ticks: the same boundaries as 1-minute ones at a fifth of the idle ticks (the
    // longest test of the suite otherwise).
    let cfg = SimConfig { tenants: 48, days: 1, drain_every: 3, tick_ms: 300_000, ..SimConfig::default() };
    let live = simulate(&local.sdk, &cfg).await.unwrap();
    let input = cfg.cost_input();
    let m = model(&input).unwrap();
    let sweep = m.job("pulse-sweep").unwrap();
    let worker = m.job("queue-worker").unwrap();
    let live_sweep_units = {
        let mut t = live.idle;
        t.add(&live.boundary);
        t
    };
    println!("sweep  ops: model {:?}\n            live  {:?}", sweep.ops, live.sweep_ops);
    println!("worker ops: model {:?}\n            live  {:?}", worker.ops, live.worker_ops);
    println!(
        "sweep  RCU model {:.1} live {:.1}; WCU model {:.1} live {:.1}",
        sweep.rcu, live_sweep_units.rcu, sweep.wcu, live_sweep_units.wcu
    );
    println!(
        "worker RCU model {:.1} live {:.1}; WCU model {:.1} live {:.1}",
        worker.rcu, live.worker.rcu, worker.wcu, live.worker.wcu
    );
    let live_pulses: u64 = live.pulses.values().sum();
    let model_pulses: u64 = m.pulses.values().sum();
    assert_eq!(model_pulses, live_pulses, "pulses: model {:?}", m.pulses);
    let live_sweep_req: u64 = live.sweep_ops.values().sum();
    let live_worker_req: u64 = live.worker_ops.values().sum();
    assert!(
        within(sweep.requests() as f64, live_sweep_req as f64, 0.01),
        "sweep requests: model {} live {live_sweep_req}",
        sweep.requests()
    );
    assert!(
        within(worker.requests() as f64, live_worker_req as f64, 0.01),
        "worker requests: model {} live {live_worker_req}",
        worker.requests()
    );
    // Operation by operation, every one either side made.
    for (job, model_ops, live_ops) in
        [("sweep", &sweep.ops, &live.sweep_ops), ("worker", &worker.ops, &live.worker_ops)]
    {
        for op in model_ops.keys().chain(live_ops.keys()) {
            let (p, n) = (model_ops.get(op).copied().unwrap_or(0), live_ops.get(op).copied().unwrap_or(0));
            assert!(within(p as f64, n as f64, 0.01), "{job} {op}: model {p} live {n}");
        }
    }
    // Capacity: per-request unit figures, measured, so a looser bound.
    assert!(within(sweep.rcu, live_sweep_units.rcu, 0.05), "sweep RCU");
    assert!(within(sweep.wcu, live_sweep_units.wcu, 0.05), "sweep WCU");
    assert!(within(worker.rcu, live.worker.rcu, 0.05), "worker RCU");
    assert!(within(worker.wcu, live.worker.wcu, 0.05), "worker WCU");
}

/// The fan-out's part of the bill ([`tickctl::cost::model_fanout`]) is what a live window costs:
/// 230 tenants over 4 shards in pages of 25 (full pages, short ones, an empty one after a full
/// one), a steady day's window (the day before set the watermark up) and the worker's drain of its
/// items, against the model of that day.
#[tokio::test(flavor = "multi_thread")]
async fn the_fanout_model_predicts_a_live_window() {
    use std::time::Duration;
    use tickwork::queue::{queue_table, Queue, QueueConfig};
    use tickwork::tenants::{sample_tenant, shard_of, Tenants};
    let local = Local::new().await;
    let start = 1_774_749_600_000; // 2026-03-29T02:00Z
    local.clock.set(start);
    let (shards, page) = (4u32, 25usize);
    let t = local.fanout_tables().await;
    let zones = ["UTC", "Asia/Tokyo"];
    let list: Vec<_> = (0..230).map(|i| sample_tenant(i, &zones, Some(start))).collect();
    Tenants::new(local.fresh_db(), &t.tenants, shards).put_all(&list).await.unwrap();
    let env = tickwork::config::Env::from_pairs([("TICKWORK_FANOUT_PAGE_SIZE", "25")]);
    let cfg = tenant_fanout::FanoutConfig::from_env(&env, Duration::from_secs(1)).unwrap();
    let qcfg = QueueConfig { shards: 1, ..Default::default() };
    let fan_db = local.fresh_db();
    fan_db.register_gsis(&t.queue, queue_table().gsi_shapes());
    let d = tenant_fanout::Deps::new(fan_db.clone(), local.clock(), cfg, &t, shards, qcfg.clone())
        .resolve_shards()
        .await
        .expect("shard registry");
    let worker_db = local.fresh_db();
    worker_db.register_gsis(&t.queue, queue_table().gsi_shapes());
    let q = Queue::new(worker_db.clone(), &t.queue, qcfg, local.clock());
    let summaries = local.table(&queue_worker::summary::summaries_table()).await;
    let handlers = queue_worker::summary::registry(worker_db.clone(), &summaries, local.clock());
    let owner = tickwork_lambda::owner_id("queue-worker");
    let wcfg = queue_worker::WorkerConfig::default();
    // The day before, first sight (its watermark set up): not counted; the steady day is.
    let before = start - 86_400_000;
    local.clock.set(before);
    let tick = tickwork_lambda::Tick::parse(&tickwork_lambda::Tick::envelope(before, false)).unwrap();
    tenant_fanout::run(&d, &tick, &tickwork::budget::Unlimited, "f0").await.unwrap();
    queue_worker::drain(&q, &handlers, &owner, &tickwork::budget::Unlimited, &wcfg).await.unwrap();
    local.clock.set(start);
    fan_db.meter().reset();
    worker_db.meter().reset();
    let tick = tickwork_lambda::Tick::parse(&tickwork_lambda::Tick::envelope(start, false)).unwrap();
    let r = tenant_fanout::run(&d, &tick, &tickwork::budget::Unlimited, "f").await.unwrap();
    assert_eq!((r.windows_done, r.enqueued), (1, 230), "{r:?}");
    let wr = queue_worker::drain(&q, &handlers, &owner, &tickwork::budget::Unlimited, &wcfg).await.unwrap();
    assert_eq!(wr.units, 230);

    let mut per_shard = vec![Vec::new(); shards as usize];
    for t in &list {
        per_shard[shard_of(&t.id, shards) as usize].push(t.clone());
    }
    let m = tickctl::cost::model_fanout(&mut per_shard, page, 1.0).unwrap();
    let mut live_ops = fan_db.meter().requests_by_op();
    for (op, n) in worker_db.meter().requests_by_op() {
        if op != "Query" {
            // The worker's polls are its own schedule's, not the fan-out's.
            *live_ops.entry(op).or_default() += n;
        }
    }
    let live_wcu = fan_db.meter().total().wcu + worker_db.meter().total().wcu;
    println!("fan-out ops: model {:?}\n             live  {live_ops:?}", m.ops);
    println!("fan-out WCU: model {:.1} live {live_wcu:.1}", m.wcu);
    for op in ["TransactWriteItems", "UpdateItem", "PutItem", "Query"] {
        assert_eq!(m.ops.get(op).copied().unwrap_or(0), live_ops.get(op).copied().unwrap_or(0), "{op}");
    }
    // The model's day has 23 idle ticks besides the window's, one read each.
    assert_eq!(m.ops["GetItem"] - 23, live_ops["GetItem"], "GetItem");
    assert!(within(m.wcu, live_wcu, 0.05), "WCU: model {} live {live_wcu}", m.wcu);
}
