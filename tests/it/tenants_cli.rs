//! `tickctl tenants`, the binary itself, against the local servers: add, import (10,000 rows, 5
//! bad), list, suspend, resume, move and remove; and a tenant moved across zones by the command
//! line while the sweep runs in-process beside it gets each local day exactly once.

use std::collections::BTreeMap;
use std::process::Output;

use tickwork::budget::Unlimited;
use tickwork::config::Env;
use tickwork::queue::QueueConfig;
use tickwork_lambda::Tick;
use tickwork_sim::queued_units;
use tickwork_tests::{unique, Local};

use crate::binary::{ok, tickctl};

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_str(&ok(o)).unwrap()
}

/// `tenants list --json`: one object a line.
fn listed(local: &Local, prefix: &str, extra: &[&str]) -> BTreeMap<String, serde_json::Value> {
    let args: Vec<&str> = ["--json", "tenants", "list"].iter().chain(extra).copied().collect();
    ok(&tickctl(local, prefix, &args))
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["id"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

#[tokio::test]
async fn tenants_are_added_imported_listed_suspended_resumed_moved_and_removed() {
    let local = Local::new().await;
    let p = unique("tn");
    ok(&tickctl(&local, &p, &["provision"]));

    // One at a time; again is a no-op; another zone is refused, naming the move.
    assert_eq!(
        json(&tickctl(&local, &p, &["--json", "tenants", "add", "acme", "--zone", "Europe/Berlin"]))["done"],
        "added"
    );
    assert_eq!(
        ok(&tickctl(&local, &p, &["tenants", "add", "acme", "--zone", "Europe/Berlin"])).trim(),
        "acme: exists (unchanged)"
    );
    let o = tickctl(&local, &p, &["tenants", "add", "acme", "--zone", "Asia/Tokyo"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("tickctl tenants move acme --zone Asia/Tokyo"));
    let o = tickctl(&local, &p, &["tenants", "add", "bad#id", "--zone", "UTC"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains('#'));

    // While the table is small: suspend takes a tenant out of its zone's index, resume brings it
    // back, move re-zones it.
    ok(&tickctl(&local, &p, &["tenants", "suspend", "acme"]));
    assert!(!listed(&local, &p, &["--zone", "Europe/Berlin"]).contains_key("acme"));
    assert_eq!(listed(&local, &p, &[])["acme"]["status"], "suspended");
    ok(&tickctl(&local, &p, &["tenants", "resume", "acme"]));
    assert!(listed(&local, &p, &["--zone", "Europe/Berlin"]).contains_key("acme"));
    ok(&tickctl(&local, &p, &["tenants", "move", "acme", "--zone", "Asia/Kolkata"]));
    assert!(listed(&local, &p, &["--zone", "Asia/Kolkata"]).contains_key("acme"));
    assert!(!listed(&local, &p, &["--zone", "Europe/Berlin"]).contains_key("acme"));
    // The new zone is registered with the sweep (`status` shows the sweep's zone groups).
    let status = json(&tickctl(&local, &p, &["--json", "status"]));
    let sweep = status["jobs"].as_array().unwrap().iter().find(|j| j["job"] == "pulse-sweep").unwrap();
    assert!(sweep["watermark"]["groups"].as_array().unwrap().iter().any(|g| g == "Asia/Kolkata"), "{sweep}");
    ok(&tickctl(&local, &p, &["tenants", "move", "acme", "--zone", "Europe/Berlin"]));
    let o = tickctl(&local, &p, &["tenants", "move", "acme", "--zone", "Nowhere/Atlantis"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("Nowhere/Atlantis"));

    // An import of 10,000 rows with 5 bad ones: each reported with its line, the rest added.
    let zones = tickwork::tenants::SAMPLE_ZONES;
    let mut csv = String::from("id,zone\n");
    let bad_lines = [101u64, 2_002, 5_003, 7_504, 9_999];
    for i in 0..10_000u64 {
        let line = i + 2; // the header is line 1
        let row = match bad_lines.iter().position(|b| *b == line) {
            Some(0) => format!("imp-{i},Mars/Olympus_Mons"),
            Some(1) => format!("imp#{i},UTC"),
            Some(2) => format!(",{}", zones[0]),
            Some(3) => format!("imp-{i},UTC,extra"),
            Some(_) => "imp-0,Asia/Tokyo".to_string(), // imp-0 is Berlin on line 2
            None => format!("imp-{i},{}", zones[i as usize % zones.len()]),
        };
        csv.push_str(&row);
        csv.push('\n');
    }
    let dir = std::env::temp_dir().join(&p);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tenants.csv");
    std::fs::write(&file, &csv).unwrap();
    let o = tickctl(&local, &p, &["--json", "tenants", "import", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "refused rows: exit 1 ({})", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (r["rows"].as_u64(), r["added"].as_u64(), r["unchanged"].as_u64()),
        (Some(10_000), Some(9_995), Some(0)),
        "{r}"
    );
    let refused: Vec<u64> = r["refused"].as_array().unwrap().iter().map(|x| x["line"].as_u64().unwrap()).collect();
    assert_eq!(refused, bad_lines, "{r}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("5 of 10000 rows refused"));
    // Idempotent: the first 200 rows again are unchanged (and the bad one among them refused).
    let head: String = csv.lines().take(201).map(|l| format!("{l}\n")).collect();
    let again = dir.join("again.csv");
    std::fs::write(&again, head).unwrap();
    let o = tickctl(&local, &p, &["--json", "tenants", "import", again.to_str().unwrap()]);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (r["added"].as_u64(), r["unchanged"].as_u64(), r["refused"].as_array().unwrap().len()),
        (Some(0), Some(199), 1),
        "{r}"
    );
    assert_eq!(o.status.code(), Some(1), "a refused row fails the import");
    // NDJSON from standard input: one tenant that exists in another zone is refused as a move.
    let mut child = crate::binary::tickctl_command(&local, &p)
        .args(["--json", "tenants", "import", "-", "--format", "ndjson"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"id\":\"nd-1\",\"zone\":\"UTC\"}\n{\"id\":\"acme\",\"zone\":\"UTC\"}\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "a refused row: exit 1");
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["added"], 1);
    assert!(r["refused"][0]["reason"].as_str().unwrap().contains("exists in zone Europe/Berlin"), "{r}");

    // Every tenant listed (a Scan followed to its end), and one zone's by its index.
    let all = listed(&local, &p, &[]);
    assert_eq!(all.len(), 9_995 + 2);
    assert_eq!(all["imp-0"]["zone"], "Europe/Berlin");
    let berlin = listed(&local, &p, &["--zone", "Europe/Berlin"]);
    assert!(!berlin.is_empty(), "a zone of the sample list has tenants");
    assert_eq!(berlin.len(), all.values().filter(|v| v["zone"] == "Europe/Berlin").count());

    ok(&tickctl(&local, &p, &["tenants", "remove", "acme"]));
    for cmd in ["remove", "suspend", "resume"] {
        let o = tickctl(&local, &p, &["tenants", cmd, "acme"]);
        assert_eq!(o.status.code(), Some(1), "{cmd}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("no tenant `acme`"), "{cmd}");
    }
}

fn ms(t: jiff::Timestamp) -> i64 {
    t.as_millisecond()
}

/// A tenant added and moved by the command line (Tokyo → Honolulu → Tokyo, neither with DST) while
/// the sweep ticks hourly beside it: every local date from its first to the last boundary, once.
#[tokio::test]
async fn a_move_on_the_command_line_loses_and_repeats_no_day() {
    let local = Local::new().await;
    let p = unique("mv");
    ok(&tickctl(&local, &p, &["provision"]));
    // The command line stamps `since` with the wall clock: the sweep's ticks come after it.
    let added = jiff::Timestamp::now();
    ok(&tickctl(&local, &p, &["tenants", "add", "mover", "--zone", "Asia/Tokyo"]));
    let tables = pulse_sweep::Tables {
        control: format!("{p}-control"),
        tenants: format!("{p}-tenants"),
        queue: format!("{p}-queue"),
    };
    let cfg = pulse_sweep::PulseConfig::from_env(&Env::from_pairs([]), std::time::Duration::from_secs(1)).unwrap();
    let deps = pulse_sweep::Deps::new(local.fresh_db(), local.clock(), cfg, tables.clone(), 8, QueueConfig::default());
    let start = jiff::Timestamp::now().round(jiff::Unit::Hour).unwrap() + jiff::SignedDuration::from_hours(2);
    let hour = jiff::SignedDuration::from_hours(1);
    let mut at = start;
    let tick = |at: jiff::Timestamp| {
        let deps = deps.clone();
        let clock = local.clock.clone();
        async move {
            let t = ms(at) + 300_000; // five past the hour
            clock.set(t);
            pulse_sweep::run(&deps, &Tick::parse(&Tick::envelope(t, false)).unwrap(), &Unlimited, "w").await.unwrap();
        }
    };
    for (hours, zone) in [(50, Some("Pacific/Honolulu")), (50, Some("Asia/Tokyo")), (50, None)] {
        for _ in 0..hours {
            tick(at).await;
            at += hour;
        }
        if let Some(z) = zone {
            ok(&tickctl(&local, &p, &["tenants", "move", "mover", "--zone", z]));
        }
    }
    let mut days: BTreeMap<String, u64> = BTreeMap::new();
    for (key, n) in queued_units(&local.db, &tables.queue).await.unwrap() {
        assert_eq!(n, 1, "{key} queued {n} times");
        if let ["pulse", "mover", "day", d] = key.split('#').collect::<Vec<_>>()[..] {
            *days.entry(d.to_string()).or_default() += 1;
        }
    }
    let dates: Vec<jiff::civil::Date> = days.keys().map(|d| d.parse().unwrap()).collect();
    for w in dates.windows(2) {
        assert_eq!(w[1], w[0].tomorrow().unwrap(), "no day lost between {} and {}: {days:?}", w[0], w[1]);
    }
    // The last boundary the sweep saw: Tokyo's local date at the last tick ended the day before.
    let last_tick = jiff::Timestamp::from_millisecond(ms(at - hour) + 300_000).unwrap();
    let tokyo_today = last_tick.to_zoned(jiff::tz::TimeZone::get("Asia/Tokyo").unwrap()).date();
    assert_eq!(*dates.last().unwrap(), tokyo_today.yesterday().unwrap(), "{days:?}");
    // The first: a tenant is owed every period that ends after it was added, so its first day
    // is its local date of adding (the day before ended before it existed).
    let tokyo = jiff::tz::TimeZone::get("Asia/Tokyo").unwrap();
    assert_eq!(dates[0], added.to_zoned(tokyo).date(), "{days:?}");
    assert!(dates.len() >= 6, "150 hours of ticks: {days:?}");
}
