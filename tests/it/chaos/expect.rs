//! What every tenant is owed, computed independently of `tickwork::calendar`: local dates through
//! chrono-tz's copy of the tz database (the code under test uses jiff's), periods by chrono's
//! calendar arithmetic, ids written out by hand.
//!
//! The rule (the documented contract, not the code): a tenant is owed, for each pulsed grain,
//! every period from the one before the period it was added in, through the last period that
//! has ended in its zone at the final instant — except history that ended more than the lateness
//! bound (40 days) before it was added, which was never owed. A tenant moved to another zone may
//! also hold the periods that had ended in the zone it left by the time it left (pulsed before the
//! move); those are allowed, not required ([`super::checks`]).

use std::collections::BTreeSet;

use chrono::{Datelike, NaiveDate, TimeZone};

/// Grains and their id formats.
pub const GRAINS: [&str; 5] = ["day", "week", "month", "quarter", "year"];

fn local(ms: i64, zone: &str) -> NaiveDate {
    let tz: chrono_tz::Tz = zone.parse().unwrap_or_else(|_| panic!("chrono-tz knows no zone `{zone}`"));
    tz.timestamp_millis_opt(ms).single().expect("an instant").date_naive()
}

/// The first day of the period of `grain` containing `d`.
fn start(grain: &str, d: NaiveDate) -> NaiveDate {
    match grain {
        "day" => d,
        "week" => d - chrono::Days::new(u64::from(d.weekday().num_days_from_monday())),
        "month" => NaiveDate::from_ymd_opt(d.year(), d.month(), 1).unwrap(),
        "quarter" => NaiveDate::from_ymd_opt(d.year(), (d.month() - 1) / 3 * 3 + 1, 1).unwrap(),
        "year" => NaiveDate::from_ymd_opt(d.year(), 1, 1).unwrap(),
        other => panic!("grain {other}"),
    }
}

fn next(grain: &str, p: NaiveDate) -> NaiveDate {
    match grain {
        "day" => p + chrono::Days::new(1),
        "week" => p + chrono::Days::new(7),
        "month" => p.checked_add_months(chrono::Months::new(1)).unwrap(),
        "quarter" => p.checked_add_months(chrono::Months::new(3)).unwrap(),
        "year" => p.checked_add_months(chrono::Months::new(12)).unwrap(),
        other => panic!("grain {other}"),
    }
}

fn prev(grain: &str, p: NaiveDate) -> NaiveDate {
    start(grain, p - chrono::Days::new(1))
}

/// The id a period is pulsed under.
pub fn id(grain: &str, p: NaiveDate) -> String {
    match grain {
        "day" => format!("{:04}-{:02}-{:02}", p.year(), p.month(), p.day()),
        "week" => {
            let w = p.iso_week();
            format!("{:04}-W{:02}", w.year(), w.week())
        }
        "month" => format!("{:04}-{:02}", p.year(), p.month()),
        "quarter" => format!("{:04}-Q{}", p.year(), (p.month() - 1) / 3 + 1),
        "year" => format!("{:04}", p.year()),
        other => panic!("grain {other}"),
    }
}

/// Every `(grain, period id)` owed to a tenant added at `since_ms` in `first_zone`, at `end_ms`
/// in `final_zone`: every period that ends after it was added (the one it was added in first).
pub fn owed(since_ms: i64, first_zone: &str, end_ms: i64, final_zone: &str) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    let added = local(since_ms, first_zone);
    let too_old = added - chrono::Days::new(40);
    for g in GRAINS {
        let first = start(g, added);
        let last = prev(g, start(g, local(end_ms, final_zone)));
        let mut p = first;
        while p <= last {
            if next(g, p) >= too_old {
                out.insert((g.to_string(), id(g, p)));
            }
            p = next(g, p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> i64 {
        chrono::DateTime::parse_from_rfc3339(s).unwrap().timestamp_millis()
    }

    #[test]
    fn owed_periods_by_hand() {
        // Added in Tokyo at 2026-03-28T15:30Z (the 29th there); the end at 2026-04-01T15:30Z (the
        // 2nd there): days 29th..1st, the 29th's week (W13, ended on the 30th), March and Q1
        // (ended on the 1st there); nothing that ended before the 29th.
        let o = owed(ms("2026-03-28T15:30:00Z"), "Asia/Tokyo", ms("2026-04-01T15:30:00Z"), "Asia/Tokyo");
        let days: Vec<&str> = o.iter().filter(|(g, _)| g == "day").map(|(_, p)| p.as_str()).collect();
        assert_eq!(days, ["2026-03-29", "2026-03-30", "2026-03-31", "2026-04-01"]);
        assert!(!o.contains(&("week".into(), "2026-W12".into())), "ended before the tenant was added");
        assert!(o.contains(&("week".into(), "2026-W13".into())), "the 29th's week ended on the 30th");
        assert!(!o.contains(&("month".into(), "2026-02".into())) && o.contains(&("month".into(), "2026-03".into())));
        assert!(o.contains(&("quarter".into(), "2026-Q1".into())));
        assert!(!o.contains(&("quarter".into(), "2026-Q2".into())));
        assert!(!o.contains(&("quarter".into(), "2025-Q4".into())), "ended 87 days before: never owed");
        assert!(!o.iter().any(|(g, _)| g == "year"), "2025 ended 87 days before");
    }
}
