//! The capacity estimator against dynalite, which applies DynamoDB's size rules for single-item
//! operations and for Queries that match items.
//!
//! Each case runs the same operation on two identical tables on dynalite: once through a meter in
//! `Estimate` mode (our rules, from the item sizes the meter sees) and once in `Server` mode
//! (dynalite's `ConsumedCapacity`). They must agree exactly.
//!
//! dynalite's known deviations from DynamoDB, asserted as deviations rather than copied:
//! - an empty Query: dynalite reports 0; DynamoDB bills the minimum (0.5 eventually consistent);
//! - GSI write costs are left out (so only tables without GSIs are compared here);
//! - strings are measured in UTF-16 code units, not UTF-8 bytes (only ASCII is compared here);
//! - no transactions (their 2x rule is unit-tested in `tickwork::capacity`).

use std::future::Future;

use aws_sdk_dynamodb::types::AttributeValue;
use tickwork::meter::{CapacitySource, Meter, Tally};
use tickwork::retry::{work_client, RetryPolicy};
use tickwork::schema::{self, av_n, av_s, key, PK};
use tickwork::Db;
use tickwork_tests::{endpoint, sdk_config_for, unique};

struct Pair {
    est: Db,
    srv: Db,
    t_est: String,
    t_srv: String,
}

async fn pair() -> Pair {
    let sdk = sdk_config_for(&endpoint("TICKWORK_DYNALITE_ENDPOINT")).await;
    let est = Db::new(work_client(&sdk, &RetryPolicy::default(), &unique("p")), Meter::new(CapacitySource::Estimate));
    let srv = Db::new(work_client(&sdk, &RetryPolicy::default(), &unique("p")), Meter::new(CapacitySource::Server));
    let def = schema::control_table();
    let t_est = unique("est");
    let t_srv = unique("srv");
    // dynalite has no TTL API and no stream; create without them.
    let def = schema::TableDef { ttl: None, stream: None, ..def };
    schema::create_table(est.client(), &def, &t_est).await.unwrap();
    schema::create_table(srv.client(), &def, &t_srv).await.unwrap();
    Pair { est, srv, t_est, t_srv }
}

impl Pair {
    /// Runs `op` on both sides and returns (estimated, dynalite's) totals for that op alone.
    async fn both<F, Fut>(&self, op: F) -> (Tally, Tally)
    where
        F: Fn(Db, String) -> Fut,
        Fut: Future<Output = ()>,
    {
        self.est.meter().reset();
        self.srv.meter().reset();
        op(self.est.clone(), self.t_est.clone()).await;
        op(self.srv.clone(), self.t_srv.clone()).await;
        (self.est.meter().total(), self.srv.meter().total())
    }
}

fn item(sk: &str, payload: usize) -> tickwork::capacity::Item {
    let mut i = key("p", sk);
    i.insert("data".into(), av_s("x".repeat(payload)));
    i.insert("n".into(), av_n(1234567));
    i
}

const SIZES: [usize; 9] = [100, 1000, 1010, 1100, 4000, 4100, 8200, 20_000, 40_000];

#[tokio::test]
async fn single_item_operations_agree_with_dynalite() {
    let p = pair().await;
    let mut compared = 0;
    for (i, &size) in SIZES.iter().enumerate() {
        let sk = format!("k{i}");
        // PutItem of a new item.
        let (e, s) = p
            .both(|db, t| {
                let it = item(&sk, size);
                async move {
                    db.put(db.client().put_item().table_name(t).set_item(Some(it))).await.unwrap();
                }
            })
            .await;
        assert_eq!(e.wcu, s.wcu, "PutItem new, {size} B");
        // GetItem, eventually and strongly consistent.
        for consistent in [false, true] {
            let (e, s) = p
                .both(|db, t| {
                    let k = key("p", &sk);
                    async move {
                        db.get(db.client().get_item().table_name(t).set_key(Some(k)).consistent_read(consistent))
                            .await
                            .unwrap();
                    }
                })
                .await;
            assert_eq!(e.rcu, s.rcu, "GetItem {size} B consistent={consistent}");
        }
        // PutItem overwrite with a smaller item: the larger (old) size is billed.
        let (e, s) = p
            .both(|db, t| {
                let it = item(&sk, 10);
                async move {
                    db.put(db.client().put_item().table_name(t).set_item(Some(it))).await.unwrap();
                }
            })
            .await;
        assert_eq!(e.wcu, s.wcu, "PutItem overwrite {size} B -> small");
        // UpdateItem that grows the item back.
        let (e, s) = p
            .both(|db, t| {
                let k = key("p", &sk);
                async move {
                    let req = db
                        .client()
                        .update_item()
                        .table_name(t)
                        .set_key(Some(k))
                        .update_expression("SET #d = :d")
                        .expression_attribute_names("#d", "data")
                        .expression_attribute_values(":d", av_s("y".repeat(size)));
                    db.update(req).await.unwrap();
                }
            })
            .await;
        assert_eq!(e.wcu, s.wcu, "UpdateItem grow to {size} B");
        compared += 5;
    }
    // DeleteItem of each (existing, sized) and of a missing key (the minimum).
    for (i, &size) in SIZES.iter().enumerate() {
        let sk = format!("k{i}");
        let (e, s) = p
            .both(|db, t| {
                let k = key("p", &sk);
                async move {
                    db.delete(db.client().delete_item().table_name(t).set_key(Some(k))).await.unwrap();
                }
            })
            .await;
        assert_eq!(e.wcu, s.wcu, "DeleteItem {size} B");
        compared += 1;
    }
    let (e, s) = p
        .both(|db, t| async move {
            db.delete(db.client().delete_item().table_name(t).set_key(Some(key("p", "missing")))).await.unwrap();
        })
        .await;
    assert_eq!((e.wcu, s.wcu), (1.0, 1.0), "DeleteItem of a missing item");
    let (e, s) = p
        .both(|db, t| async move {
            db.get(db.client().get_item().table_name(t).set_key(Some(key("p", "missing")))).await.unwrap();
        })
        .await;
    assert_eq!((e.rcu, s.rcu), (0.5, 0.5), "GetItem of a missing item");
    assert_eq!(compared, 54);
}

#[tokio::test]
async fn queries_that_match_items_agree_and_empty_query_deviation_is_named() {
    let p = pair().await;
    for db_t in [(&p.est, &p.t_est), (&p.srv, &p.t_srv)] {
        let (db, t) = db_t;
        for (i, size) in [300usize, 700, 1500, 5000, 9000, 12_000, 100, 2500].iter().enumerate() {
            let mut it = item(&format!("q{i}"), *size);
            it.insert(PK.into(), av_s("query-part"));
            db.put(db.client().put_item().table_name(t).set_item(Some(it))).await.unwrap();
        }
    }
    for limit in [1, 2, 3, 5, 8] {
        for consistent in [false, true] {
            let (e, s) = p
                .both(|db, t| async move {
                    let q = db
                        .client()
                        .query()
                        .table_name(t)
                        .key_condition_expression("#pk = :p")
                        .expression_attribute_names("#pk", PK)
                        .expression_attribute_values(":p", av_s("query-part"))
                        .consistent_read(consistent)
                        .limit(limit);
                    db.query(q).await.unwrap();
                })
                .await;
            assert_eq!(e.rcu, s.rcu, "Query of {limit} items consistent={consistent}");
            assert_eq!(e.items_read, limit as u64);
        }
    }
    // Known deviation: an empty Query. DynamoDB bills the minimum; dynalite reports 0.
    let (e, s) = p
        .both(|db, t| async move {
            let q = db
                .client()
                .query()
                .table_name(t)
                .key_condition_expression("#pk = :p")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_values(":p", AttributeValue::S("nothing-here".into()));
            db.query(q).await.unwrap();
        })
        .await;
    assert_eq!(e.rcu, 0.5, "DynamoDB's minimum for an eventually consistent Query");
    assert_eq!(s.rcu, 0.0, "dynalite's documented deviation");
    assert_eq!((e.items_read, s.items_read), (0, 0));
}

/// What an invocation prints (its one EMF line) parses and its detail adds up to the meter's totals.
#[tokio::test]
async fn the_invocation_line_adds_up_after_real_calls() {
    let p = pair().await;
    for i in 0..5 {
        p.est
            .put(p.est.client().put_item().table_name(&p.t_est).set_item(Some(item(&format!("e{i}"), 2000))))
            .await
            .unwrap();
        p.est
            .get(p.est.client().get_item().table_name(&p.t_est).set_key(Some(key("p", format!("e{i}")))))
            .await
            .unwrap();
    }
    let total = p.est.meter().total();
    let (mut req, mut rcu, mut wcu, mut written) = (0u64, 0f64, 0f64, 0u64);
    let inv = tickwork::meter::InvocationLine { job: "test".into(), outcome: "completed".into(), ..Default::default() };
    let line = p.est.meter().invocation_line("tickwork", 0, "INFO", &inv);
    let v: serde_json::Value = serde_json::from_str(&line).expect("the line is JSON");
    assert_eq!(v["_aws"]["CloudWatchMetrics"][0]["Namespace"], "tickwork");
    for c in v["calls"].as_array().unwrap() {
        req += c["requests"].as_u64().unwrap();
        rcu += c["rcu"].as_f64().unwrap();
        wcu += c["wcu"].as_f64().unwrap();
        written += c["items_written"].as_u64().unwrap();
    }
    assert_eq!((req, rcu, wcu, written), (total.requests, total.rcu, total.wcu, total.items_written));
    assert_eq!((req, rcu, wcu, written), (10, 2.5, 10.0, 5));
}
