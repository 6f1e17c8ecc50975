use tickctl::cost::model;
use tickwork_sim::{simulate, SimConfig};
use tickwork_tests::Local;

fn within(model: f64, live: f64, tol: f64) -> bool {
    (model - live).abs() <= tol * live.max(1.0)
}

/// `tickctl cost` predicts what the handlers do: a live simulated day (48 tenants in 8 zones,
/// 3 workers on phase-shifted 1-minute ticks, queue drains every 5 ticks, from 2026-03-29T00:00Z:
/// every zone's first sight and next local midnight, Berlin's DST change, Auckland's and Tokyo's
/// month and quarter end) against the model with the same input, job by job and operation by
/// operation.
#[tokio::test(flavor = "multi_thread")]
async fn cost_model_predicts_a_live_run_within_one_percent() {
    let local = Local::new().await;
    let cfg = SimConfig { tenants: 48, days: 1, drain_every: 5, ..SimConfig::default() };
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
    for (op, n) in &live.sweep_ops {
        let p = sweep.ops.get(op).copied().unwrap_or(0);
        assert!(within(p as f64, *n as f64, 0.01), "sweep {op}: model {p} live {n}");
    }
    for (op, n) in &live.worker_ops {
        let p = worker.ops.get(op).copied().unwrap_or(0);
        assert!(within(p as f64, *n as f64, 0.01), "worker {op}: model {p} live {n}");
    }
    // Capacity: per-request unit figures, measured, so a looser bound.
    assert!(within(sweep.rcu, live_sweep_units.rcu, 0.05), "sweep RCU");
    assert!(within(sweep.wcu, live_sweep_units.wcu, 0.05), "sweep WCU");
    assert!(within(worker.rcu, live.worker.rcu, 0.05), "worker RCU");
    assert!(within(worker.wcu, live.worker.wcu, 0.05), "worker WCU");
}
