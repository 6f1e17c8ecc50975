//! The control plane's cost model (`tickwork_cost::control`) against what the control function's
//! operations make: each operation run through `control::handle` on the local DynamoDB server,
//! its requests and capacity units counted by the meter (DynamoDB's rules: a read of up to 4 KB
//! is one unit strongly consistent, half eventually; a write of up to 1 KB one unit; an index
//! write as a write of the projected item), held equal to the model's.

use tickwork_cost::control::{Op, OPS};
use tickwork_tests::{unique, Local};

use crate::binary::{ok, tickctl};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_operation_makes_the_requests_and_units_the_model_prices() {
    let local = Local::new().await;
    let p = unique("ctlc");
    ok(&tickctl(&local, &p, &["provision"]));
    let tables = pulse_sweep::Tables {
        control: format!("{p}-control"),
        tenants: format!("{p}-tenants"),
        queue: format!("{p}-queue"),
    };
    let db = local.fresh_db();
    db.register_gsis(&tables.tenants, tickwork::tenants::tenants_table().gsi_shapes());
    db.register_gsis(&tables.control, tickwork::schema::control_table().gsi_shapes());
    let policy =
        pulse_sweep::config::policy(&tickwork::config::Env::from_pairs([]), std::time::Duration::from_secs(900))
            .unwrap();
    // The queue's shards as the template deploys them (`QueueShards`, 1): explain reads each one.
    let deps =
        control::Deps::new(db.clone(), local.clock(), &tables, 8, "pulse-sweep".into(), policy).with_queue_shards(1);
    local.clock.set(tickwork_tests::ms("2026-12-02T10:00:00Z"));
    let run = |req: serde_json::Value| {
        let deps = deps.clone();
        async move {
            let a = control::handle(&deps, req.clone()).await.unwrap();
            assert!(a.ok && a.result.as_ref().is_some(), "{req}: {a:?}");
        }
    };
    // The steady state each operation is priced in: its zone registered, its group there.
    run(serde_json::json!({"op": "tenants.add", "tenants": [{"id": "first", "zone": "Europe/Berlin"}]})).await;
    run(serde_json::json!({"op": "schedules.put", "schedules": [{"tenant": "first", "name": "nudge", "spec": "daily 08:00"}]})).await;
    let mut wrong = Vec::new();
    for op in OPS {
        let req = match op.name {
            "tenants.add" => {
                serde_json::json!({"op": "tenants.add", "tenants": [{"id": "acme", "zone": "Europe/Berlin"}]})
            }
            "schedules.put" => {
                serde_json::json!({"op": "schedules.put", "schedules": [{"tenant": "acme", "name": "nudge", "spec": "daily 08:00"}]})
            }
            "timers.at" => {
                serde_json::json!({"op": "timers.at", "tenant": "acme", "name": "call", "at": "2026-12-24T09:00", "payload": {"why": "trial"}})
            }
            "tenants.get" => serde_json::json!({"op": "tenants.get", "id": "acme"}),
            "tenants.explain" => serde_json::json!({"op": "tenants.explain", "id": "acme"}),
            other => panic!("no scenario for {other}"),
        };
        db.meter().reset();
        run(req).await;
        let t = db.meter().total();
        let measured = Op { name: op.name, requests: t.requests as f64, read_units: t.rcu, write_units: t.wcu };
        if measured != op {
            wrong.push(format!("model {op:?}\n meter {measured:?}"));
        }
    }
    assert!(wrong.is_empty(), "the model against the meter:\n{}", wrong.join("\n"));
    // Its memory is the stack's (which a template test holds to `MemorySize`).
    assert_eq!(tickwork_cost::control::MEMORY_MB, f64::from(tickwork_cost::bill::Stack::default().memory_mb));
}
