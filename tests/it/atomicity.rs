use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use tickwork::schema::{av_n, av_s, key, PK};
use tickwork::DbError;
use tickwork_tests::Local;

const THREADS: usize = 16;
const INCREMENTS: usize = 50;

/// 16 tasks x 50 read-then-conditional-put increments: with every request atomic, each successful
/// put moved the counter by exactly one, so it ends at exactly 800. Bare moto ended at 797.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn concurrent_compare_and_set_counter_is_exact() {
    let local = Local::new().await;
    let table = local.control().await;
    let k = key("counter", "cas");
    let mut init = k.clone();
    init.insert("n".into(), av_n(0));
    local.db.put(local.db.client().put_item().table_name(&table).set_item(Some(init))).await.unwrap();

    let mut tasks = Vec::new();
    for _ in 0..THREADS {
        let db = local.fresh_db();
        let (table, k) = (table.clone(), k.clone());
        tasks.push(tokio::spawn(async move {
            let mut done = 0;
            let mut conflicts = 0;
            while done < INCREMENTS {
                let got = db
                    .get(db.client().get_item().table_name(&table).set_key(Some(k.clone())).consistent_read(true))
                    .await
                    .unwrap();
                let n: i64 = got.item().unwrap()["n"].as_n().unwrap().parse().unwrap();
                let mut next: HashMap<String, AttributeValue> = k.clone();
                next.insert("n".into(), av_n(n + 1));
                let put = db
                    .client()
                    .put_item()
                    .table_name(&table)
                    .set_item(Some(next))
                    .condition_expression("n = :old")
                    .expression_attribute_values(":old", av_n(n));
                match db.put(put).await {
                    Ok(_) => done += 1,
                    Err(DbError::ConditionFailed { .. }) => conflicts += 1,
                    Err(e) => panic!("{e}"),
                }
            }
            conflicts
        }));
    }
    let mut conflicts = 0;
    for t in tasks {
        conflicts += t.await.unwrap();
    }
    let got = local
        .db
        .get(local.db.client().get_item().table_name(&table).set_key(Some(k)).consistent_read(true))
        .await
        .unwrap();
    assert_eq!(got.item().unwrap()["n"].as_n().unwrap(), &(THREADS * INCREMENTS).to_string());
    // Contention really happened, or the test proved nothing about atomicity.
    assert!(conflicts > 0, "no conflicting writes: the test did not exercise concurrency");
}

/// `SET n = n + :one` from 16 tasks: 800 updates, 800 counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn concurrent_atomic_add_is_exact() {
    let local = Local::new().await;
    let table = local.control().await;
    let mut tasks = Vec::new();
    for _ in 0..THREADS {
        let db = local.fresh_db();
        let table = table.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..INCREMENTS {
                let req = db
                    .client()
                    .update_item()
                    .table_name(&table)
                    .set_key(Some(key("counter", "add")))
                    .update_expression("ADD n :one")
                    .expression_attribute_values(":one", av_n(1));
                db.update(req).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let got = local
        .db
        .get(local.db.client().get_item().table_name(&table).set_key(Some(key("counter", "add"))).consistent_read(true))
        .await
        .unwrap();
    assert_eq!(got.item().unwrap()["n"].as_n().unwrap(), "800");
}

/// A cancelled transaction leaves nothing behind, even with concurrent writers on the same items.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn cancelled_transactions_apply_nothing() {
    use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
    let local = Local::new().await;
    let table = local.control().await;
    let mut tasks = Vec::new();
    for t in 0..8 {
        let db = local.fresh_db();
        let table = table.clone();
        tasks.push(tokio::spawn(async move {
            let mut won = 0;
            for i in 0..25 {
                // Two puts that must land together: a marker per attempt and a shared slot `i`.
                let mut a = key("txn", format!("attempt-{t}-{i}"));
                a.insert("by".into(), av_s(format!("{t}")));
                let mut b = key("txn", format!("slot-{i}"));
                b.insert("by".into(), av_s(format!("{t}")));
                let put = |item, cond: bool| {
                    let mut p = Put::builder().table_name(&table).set_item(Some(item));
                    if cond {
                        p = p.condition_expression("attribute_not_exists(#pk)").expression_attribute_names("#pk", PK);
                    }
                    TransactWriteItem::builder().put(p.build().unwrap()).build()
                };
                match db.transact_write(vec![put(a, false), put(b, true)]).await {
                    Ok(_) => won += 1,
                    Err(DbError::TransactionCanceled { .. }) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            won
        }));
    }
    let mut won = 0;
    for t in tasks {
        won += t.await.unwrap();
    }
    assert_eq!(won, 25, "each slot is won exactly once");
    let out = local
        .db
        .query(
            local
                .db
                .client()
                .query()
                .table_name(&table)
                .key_condition_expression("#pk = :p")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_values(":p", av_s("txn"))
                .consistent_read(true),
        )
        .await
        .unwrap();
    // 25 slots + exactly one attempt marker per won slot: a cancelled transaction wrote no marker.
    assert_eq!(out.items().len(), 50, "cancelled transactions must not leave their first put behind");
    for item in out.items() {
        let sk = item["sk"].as_s().unwrap();
        if let Some(i) = sk.strip_prefix("slot-") {
            let by = item["by"].as_s().unwrap();
            let marker = out.items().iter().any(|m| m["sk"].as_s().unwrap() == &format!("attempt-{by}-{i}"));
            assert!(marker, "slot {i} won by {by} has its marker");
        }
    }
}
