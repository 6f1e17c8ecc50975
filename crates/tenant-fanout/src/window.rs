//! Windows and items: which UTC days are owed a fan-out, and the item each tenant gets.
//!
//! A window is a UTC date. The fan-out's watermark holds the last window completed; every later
//! window up to today is due, oldest first, so a window not finished during its own day (an
//! outage, a run longer than a day) is caught up on later ticks rather than never visited again.
//! Windows older than the lateness bound are not owed.

use serde_json::{Map, Value};
use tickwork::batch::Batch;
use tickwork::clock::Millis;
use tickwork::queue::NewItem;
use tickwork::tenants::Tenant;

/// The watermark group of the fan-out: one mark, the last window completed.
pub const MARK_GROUP: &str = "all";

/// The window a tick belongs to: its UTC date.
pub fn window_of(time_ms: Millis) -> String {
    jiff::Timestamp::from_millisecond(time_ms)
        .map(|t| t.to_zoned(jiff::tz::TimeZone::UTC).date().to_string())
        .unwrap_or_else(|_| "invalid".into())
}

/// The windows due at `time_ms`, oldest first: after `mark` (the last completed window) through
/// today, at most `max_lateness_days` back. No mark: today only (a new job owes no history).
pub fn due_windows(mark: Option<&str>, time_ms: Millis, max_lateness_days: u32) -> Vec<String> {
    let Ok(today) = window_of(time_ms).parse::<jiff::civil::Date>() else { return vec![] };
    let oldest = today.checked_sub(jiff::Span::new().days(i64::from(max_lateness_days))).unwrap_or(today);
    let first = match mark.and_then(|m| m.parse::<jiff::civil::Date>().ok()) {
        None => today,
        Some(m) => m.tomorrow().unwrap_or(today).max(oldest),
    };
    let mut out = Vec::new();
    let mut d = first;
    while d <= today {
        out.push(d.to_string());
        match d.tomorrow() {
            Ok(n) => d = n,
            Err(_) => break,
        }
    }
    out
}

/// The batch items for a page of tenants in one window: one unit per tenant, key
/// `<job>#<tenant>#<window>` (the handler's idempotency key), payload `{"tenant", "window"}`. A
/// page's batch is split to the batch limits ([`Batch::split`]: 128 KB, 2,000 units): a page of
/// 1,000 tenants with ids of 900 bytes is some 900 KB, past the queue's payload limit, and was
/// refused on every tick, stalling every later window behind it. Each item's id names the window,
/// the shard and a digest of its units (so any id length fits the queue's key limit, and an
/// existing id means these very units were enqueued). None for a page with no tenant.
pub fn batches_for(job: &str, window: &str, shard: u32, tenants: &[Tenant], due_ms: Millis) -> Vec<NewItem> {
    let mut b = Batch::new(Map::new());
    b.add(
        vec![Map::from_iter([("window".to_string(), Value::String(window.to_string()))])],
        tenants.iter().map(|t| t.id.clone()),
    );
    b.split()
        .into_iter()
        .map(|part| NewItem {
            id: format!("{job}#{window}#{shard}#{}", part.fingerprint(job)),
            kind: job.to_string(),
            payload: part.to_payload(),
            tenant: None,
            due_ms,
        })
        .collect()
}

/// The watermark a job without one starts from: the day before its first due window, so that
/// window, if unfinished today, is caught up tomorrow. `None` when the job has a mark or nothing
/// is due. Pure.
pub fn first_mark(mark: Option<&str>, first_due: Option<&str>) -> Option<String> {
    match (mark, first_due) {
        (None, Some(first)) => first.parse::<jiff::civil::Date>().ok()?.yesterday().ok().map(|d| d.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_without_a_mark_starts_the_day_before_its_first_window() {
        assert_eq!(first_mark(None, Some("2026-03-01")), Some("2026-02-28".into()));
        assert_eq!(first_mark(Some("2026-02-27"), Some("2026-03-01")), None, "a mark stands");
        assert_eq!(first_mark(None, None), None, "nothing due");
    }

    #[test]
    fn window_is_the_utc_date_of_the_event() {
        // 2026-11-29T23:59:59.999Z and the first ms of the next day.
        assert_eq!(window_of(1_795_996_799_999), "2026-11-29");
        assert_eq!(window_of(1_795_996_800_000), "2026-11-30");
    }

    #[test]
    fn unfinished_windows_are_caught_up_oldest_first() {
        let t = 1_795_996_800_000; // 2026-11-30T00:00Z
        assert_eq!(due_windows(Some("2026-11-30"), t, 7), Vec::<String>::new());
        assert_eq!(due_windows(Some("2026-11-29"), t, 7), ["2026-11-30"]);
        assert_eq!(due_windows(Some("2026-11-27"), t, 7), ["2026-11-28", "2026-11-29", "2026-11-30"]);
        assert_eq!(due_windows(None, t, 7), ["2026-11-30"], "a new job owes no history");
        assert_eq!(due_windows(Some("2026-01-01"), t, 2), ["2026-11-28", "2026-11-29", "2026-11-30"]);
    }

    #[test]
    fn a_page_is_a_batch_whose_unit_keys_are_the_idempotency_keys() {
        let t = |id: &str| Tenant::new(id, "Europe/Paris");
        let items = batches_for("utc-daily", "2026-11-29", 3, &[t("t1"), t("t2")], 5);
        assert_eq!(items.len(), 1);
        let i = items[0].clone();
        assert!(i.id.starts_with("utc-daily#2026-11-29#3#"), "{}", i.id);
        assert!(i.validate().is_ok());
        let job = tickwork::queue::Job {
            attempts: 1,
            owner: "w".into(),
            ..tickwork::queue::Job::unclaimed(i.id.clone(), i.kind.clone(), i.payload.clone())
        };
        let units = Batch::of_job(&job).unwrap().unwrap().units(&i.kind);
        let keys: Vec<&str> = units.iter().map(|u| u.key.as_str()).collect();
        assert_eq!(keys, ["utc-daily#t1#2026-11-29", "utc-daily#t2#2026-11-29"]);
        assert_eq!(units[0].payload, r#"{"tenant":"t1","window":"2026-11-29"}"#);
        assert!(batches_for("utc-daily", "2026-11-29", 3, &[], 5).is_empty());
    }

    #[test]
    fn a_page_of_long_ids_is_split_into_items_the_queue_takes() {
        let page: Vec<Tenant> = (0..1000).map(|i| Tenant::new(format!("{i:04}{}", "x".repeat(896)), "UTC")).collect();
        let items = batches_for("utc-daily", "2026-11-29", 0, &page, 5);
        assert!(items.len() >= 7, "{} items", items.len());
        let mut units = 0;
        for i in &items {
            assert!(i.validate().is_ok(), "{}", i.payload.len());
            let job = tickwork::queue::Job {
                attempts: 1,
                owner: "w".into(),
                ..tickwork::queue::Job::unclaimed(i.id.clone(), i.kind.clone(), i.payload.clone())
            };
            units += Batch::of_job(&job).unwrap().unwrap().len();
        }
        assert_eq!(units, 1000, "every tenant once");
        let ids: std::collections::BTreeSet<&str> = items.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids.len(), items.len(), "one id per part");
    }
}
