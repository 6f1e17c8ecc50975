use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use tickwork::lease::{fenced_write, Acquire, Fenced, LeaseConfig, LeaseStore, Release, Renew};
use tickwork::schema::{av_s, key};
use tickwork::slot::{Record, Slots};
use tickwork::watermark::{Advance, Watermarks};
use tickwork_tests::Local;

const INTERVAL: Duration = Duration::from_secs(60);

fn cfg(job: &str) -> LeaseConfig {
    LeaseConfig::new(job, Duration::from_secs(50), INTERVAL, Duration::from_secs(2)).unwrap()
}

/// 16 contenders per window over 50 windows: exactly one holder each time, tokens 1..=50.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn one_holder_per_window_and_tokens_strictly_increase() {
    let local = Local::new().await;
    let table = local.control().await;
    let cfg = Arc::new(cfg("contended"));
    let mut last_token = 0;
    for window in 0..50i64 {
        local.clock.set(1_700_000_000_000 + window * INTERVAL.as_millis() as i64);
        let mut tasks = Vec::new();
        for c in 0..16 {
            let store = LeaseStore::new(local.fresh_db(), &table, local.clock());
            let cfg = cfg.clone();
            tasks.push(tokio::spawn(async move { store.acquire(&cfg, &format!("w{c}")).await.unwrap() }));
        }
        let mut holders = Vec::new();
        let mut held = 0;
        for t in tasks {
            match t.await.unwrap() {
                Acquire::Acquired(l) => holders.push(l),
                Acquire::Held { owner, .. } => {
                    held += 1;
                    assert!(owner.starts_with('w'), "Held names the holder");
                }
            }
        }
        assert_eq!(holders.len(), 1, "window {window}: exactly one holder");
        assert_eq!(held, 15);
        assert!(holders[0].token > last_token, "token strictly increases");
        last_token = holders[0].token;
    }
    assert_eq!(last_token, 50);
}

/// Expiry is strict: at the expiry millisecond the lease is still held; one ms later it is taken over.
#[tokio::test]
async fn expiry_is_strict_and_takeover_immediate() {
    let local = Local::new().await;
    let table = local.control().await;
    let store = LeaseStore::new(local.db.clone(), &table, local.clock());
    let cfg = cfg("strict");
    let Acquire::Acquired(a) = store.acquire(&cfg, "a").await.unwrap() else { panic!("first acquire") };
    local.clock.set(a.expires_at_ms);
    assert!(matches!(store.acquire(&cfg, "b").await.unwrap(), Acquire::Held { ref owner, .. } if owner == "a"));
    local.clock.set(a.expires_at_ms + 1);
    let Acquire::Acquired(b) = store.acquire(&cfg, "b").await.unwrap() else { panic!("takeover") };
    assert_eq!(b.token, a.token + 1);
    // The old holder can tell it lost the lease: a typed outcome, not an error.
    assert_eq!(store.renew(&a, Duration::from_secs(10)).await.unwrap(), Renew::Lost);
    assert!(matches!(store.renew(&b, Duration::from_secs(10)).await.unwrap(), Renew::Renewed(_)));
}

/// A stale leader's fenced writes (watermark, slot, anything) are rejected as typed outcomes.
#[tokio::test]
async fn stale_leader_cannot_write_progress() {
    let local = Local::new().await;
    let table = local.control().await;
    let store = LeaseStore::new(local.db.clone(), &table, local.clock());
    let marks = Watermarks::new(local.db.clone(), &table, local.clock());
    let slots = Slots::new(local.db.clone(), &table, local.clock(), Duration::from_secs(86_400));
    let cfg = cfg("fenced");
    let Acquire::Acquired(old) = store.acquire(&cfg, "old").await.unwrap() else { panic!() };
    local.clock.advance(51_000);
    let Acquire::Acquired(new) = store.acquire(&cfg, "new").await.unwrap() else { panic!() };

    let stale = old.fence(&table);
    assert_eq!(marks.advance(&stale, "UTC", "2026-11-29").await.unwrap(), Advance::Stale);
    assert_eq!(slots.record(&stale, "2026-11-29").await.unwrap(), Record::Stale);
    let mut item = key("progress", "x");
    item.insert("v".into(), av_s("stale"));
    let put = TransactWriteItem::builder()
        .put(Put::builder().table_name(&table).set_item(Some(item)).build().unwrap())
        .build();
    assert_eq!(fenced_write(&local.db, &stale, vec![put]).await.unwrap(), Fenced::Stale);
    assert!(marks.read("fenced").await.unwrap().marks.is_empty(), "stale leader wrote nothing");

    let fresh = new.fence(&table);
    assert_eq!(marks.advance(&fresh, "UTC", "2026-11-29").await.unwrap(), Advance::Advanced);
    assert_eq!(
        marks.advance(&fresh, "UTC", "2026-11-28").await.unwrap(),
        Advance::NotForward { current: Some("2026-11-29".into()) }
    );
    assert_eq!(marks.read("fenced").await.unwrap().marks["UTC"], "2026-11-29");
    assert_eq!(slots.record(&fresh, "2026-11-29").await.unwrap(), Record::Recorded);
    assert_eq!(slots.record(&fresh, "2026-11-29").await.unwrap(), Record::AlreadyRecorded);
    assert!(slots.is_recorded("fenced", "2026-11-29").await.unwrap());
    assert!(!slots.is_recorded("fenced", "2026-11-30").await.unwrap());
}

/// Release is conditional on owner and token; a non-owner's release changes nothing.
#[tokio::test]
async fn release_by_non_owner_changes_nothing() {
    let local = Local::new().await;
    let table = local.control().await;
    let store = LeaseStore::new(local.db.clone(), &table, local.clock());
    let cfg = cfg("release");
    let Acquire::Acquired(a) = store.acquire(&cfg, "a").await.unwrap() else { panic!() };
    let impostor = tickwork::lease::Lease { owner: "mallory".into(), ..a.clone() };
    assert_eq!(store.release(&impostor).await.unwrap(), Release::NotOwner);
    let wrong_token = tickwork::lease::Lease { token: a.token + 7, ..a.clone() };
    assert_eq!(store.release(&wrong_token).await.unwrap(), Release::NotOwner);
    let state = store.read("release").await.unwrap().unwrap();
    assert_eq!((state.owner.as_str(), state.token, state.expires_at_ms), ("a", a.token, a.expires_at_ms));
    assert_eq!(store.release(&a).await.unwrap(), Release::Released);
    // Released: the next acquirer need not wait for expiry, and the token still increases.
    let Acquire::Acquired(b) = store.acquire(&cfg, "b").await.unwrap() else { panic!("after release") };
    assert_eq!(b.token, a.token + 1);
}

/// Success keeps the lease (a second worker in the same window is turned away); failure releases it.
#[tokio::test]
async fn success_keeps_failure_releases() {
    let local = Local::new().await;
    let table = local.control().await;
    let store = LeaseStore::new(local.db.clone(), &table, local.clock());
    let cfg = cfg("keep");
    let ran: Option<u32> = store.run_if_leader(&cfg, "a", |_l| async { Ok::<_, std::io::Error>(1) }).await.unwrap();
    assert_eq!(ran, Some(1));
    let second: Option<u32> = store.run_if_leader(&cfg, "b", |_l| async { Ok::<_, std::io::Error>(2) }).await.unwrap();
    assert_eq!(second, None, "success kept the lease: the phase-shifted worker does not re-run the tick");

    let cfg = LeaseConfig::new("fail", Duration::from_secs(50), INTERVAL, Duration::from_secs(2)).unwrap();
    let r = store.run_if_leader(&cfg, "a", |_l| async { Err::<u32, _>(std::io::Error::other("boom")) }).await;
    assert!(matches!(r, Err(tickwork::lease::LeaderError::Action(_))));
    let retry: Option<u32> = store.run_if_leader(&cfg, "b", |_l| async { Ok::<_, std::io::Error>(3) }).await.unwrap();
    assert_eq!(retry, Some(3), "failure released the lease: another worker may retry the window");

    let one_shot = LeaseConfig::new("oneshot", Duration::from_secs(50), INTERVAL, Duration::from_secs(2))
        .unwrap()
        .release_on_success(true);
    store.run_if_leader(&one_shot, "a", |_l| async { Ok::<_, std::io::Error>(()) }).await.unwrap();
    assert!(store.run_if_leader(&one_shot, "b", |_l| async { Ok::<_, std::io::Error>(()) }).await.unwrap().is_some());
}

/// The pause switch lives on the watermark item and is read by the same GetItem.
#[tokio::test]
async fn pause_switch_rides_on_the_watermark_read() {
    let local = Local::new().await;
    let table = local.control().await;
    let marks = Watermarks::new(local.db.clone(), &table, local.clock());
    assert!(!marks.read("p").await.unwrap().paused);
    marks.set_paused("p", true, Some("runaway writer")).await.unwrap();
    local.db.meter().reset();
    let s = marks.read("p").await.unwrap();
    assert!(s.paused);
    assert_eq!(s.paused_reason.as_deref(), Some("runaway writer"));
    assert_eq!(local.db.meter().read_write_requests(), (1, 0));
    assert_eq!(local.db.meter().op("GetItem").rcu, 0.5, "one eventually consistent read of a small item");
    marks.set_paused("p", false, None).await.unwrap();
    assert!(!marks.read("p").await.unwrap().paused);
}
