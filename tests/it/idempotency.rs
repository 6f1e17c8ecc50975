use std::time::Duration;

use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use tickwork::idempotency::{insert_once, Idempotency, KeyClaim, KeySettle};
use tickwork::schema::key;
use tickwork::DbError;
use tickwork_tests::Local;

#[tokio::test]
async fn claim_complete_and_expired_reclaim() {
    let local = Local::new().await;
    let table = local.control().await;
    let idem = Idempotency::new(local.db.clone(), &table, local.clock(), Duration::from_secs(86_400));
    let now = 1_700_000_000_000;
    local.clock.set(now);
    assert_eq!(idem.claim("pulse", "t1#day#2026-11-29", "a", now + 10_000).await.unwrap(), KeyClaim::Claimed);
    assert_eq!(
        idem.claim("pulse", "t1#day#2026-11-29", "b", now + 10_000).await.unwrap(),
        KeyClaim::InProgress { owner: "a".into(), until_ms: now + 10_000 }
    );
    // A dead worker's claim expires and can be taken again; the old owner then owns nothing.
    local.clock.set(now + 10_001);
    assert_eq!(idem.claim("pulse", "t1#day#2026-11-29", "b", now + 20_000).await.unwrap(), KeyClaim::Claimed);
    assert_eq!(idem.complete("pulse", "t1#day#2026-11-29", "a").await.unwrap(), KeySettle::NotOwner);
    assert_eq!(
        idem.abandon("pulse", "t1#day#2026-11-29", "a").await.unwrap(),
        KeySettle::NotOwner,
        "never delete what you do not own"
    );
    assert_eq!(idem.complete("pulse", "t1#day#2026-11-29", "b").await.unwrap(), KeySettle::Settled);
    assert_eq!(idem.claim("pulse", "t1#day#2026-11-29", "c", now + 30_000).await.unwrap(), KeyClaim::Done);
    // Abandon gives an unfinished claim back for a retry.
    assert_eq!(idem.claim("pulse", "k2", "a", now + 30_000).await.unwrap(), KeyClaim::Claimed);
    assert_eq!(idem.abandon("pulse", "k2", "a").await.unwrap(), KeySettle::Settled);
    assert_eq!(idem.claim("pulse", "k2", "b", now + 30_000).await.unwrap(), KeyClaim::Claimed);
}

/// The in-transaction key makes the effect and its key commit together: a repeat changes nothing.
#[tokio::test]
async fn insert_once_makes_the_effect_happen_once() {
    let local = Local::new().await;
    let table = local.control().await;
    let effect = |n: u32| {
        let mut item = key("effects", "pulse-t1");
        item.insert("n".into(), tickwork::schema::av_n(n));
        TransactWriteItem::builder()
            .put(Put::builder().table_name(&table).set_item(Some(item)).build().unwrap())
            .build()
    };
    let first =
        local.db.transact_write(vec![insert_once(&table, "pulse", "t1#day#d", Default::default()), effect(1)]).await;
    assert!(first.is_ok());
    let second =
        local.db.transact_write(vec![insert_once(&table, "pulse", "t1#day#d", Default::default()), effect(2)]).await;
    match second {
        Err(DbError::TransactionCanceled { reasons }) => assert!(reasons[0].condition_failed()),
        other => panic!("expected a cancelled repeat, got {other:?}"),
    }
    let got = local
        .db
        .get(
            local
                .db
                .client()
                .get_item()
                .table_name(&table)
                .set_key(Some(key("effects", "pulse-t1")))
                .consistent_read(true),
        )
        .await
        .unwrap();
    assert_eq!(got.item().unwrap()["n"].as_n().unwrap(), "1", "the repeat's effect was not applied");
}
