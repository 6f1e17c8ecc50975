//! Moving over: an EventBridge Scheduler export (cron with `?` and a year, days numbered from
//! Sunday = 1, `at()`, zones, a flexible window) and a crontab become the
//! tickwork schedules an independent reading (chrono-tz) expects; what has no equivalent (a
//! `rate()`, a target of its own, a start date, a disabled schedule, a one-time schedule that has
//! run, `@reboot`, a tenant that is not there or is in another zone) is refused by name, and
//! nothing is written for it.

use chrono::{Datelike, TimeZone, Timelike};
use tickwork_tests::{unique, Local};

use crate::binary::{ok, tickctl};

fn get_schedule(name: &str, expr: &str, tz: &str, input: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "Name": name, "GroupName": "default", "State": "ENABLED",
        "ScheduleExpression": expr, "ScheduleExpressionTimezone": tz,
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "Target": {"Arn": "arn:aws:lambda:us-east-1:123456789012:function:remind", "RoleArn": "arn:aws:iam::123456789012:role/s", "Input": input.to_string()},
        "Arn": format!("arn:aws:scheduler:us-east-1:123456789012:schedule/default/{name}")
    })
}

/// A listing's JSON: one array, or one object a line.
fn json_lines(text: &str) -> Vec<serde_json::Value> {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Array(a)) => a,
        _ => text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect(),
    }
}

async fn control_items(local: &Local, p: &str) -> Vec<String> {
    let mut all: Vec<String> = tickwork_sim::scan_all(&local.db, &format!("{p}-control"))
        .await
        .unwrap()
        .into_iter()
        .map(|i| format!("{:?}", i.into_iter().collect::<std::collections::BTreeMap<_, _>>()))
        .collect();
    all.sort();
    all
}

#[tokio::test]
async fn a_scheduler_export_and_a_crontab_become_the_expected_schedules_and_the_rest_is_refused_by_name() {
    let local = Local::new().await;
    let p = unique("mig");
    ok(&tickctl(&local, &p, &["provision"]));
    for (id, zone) in [("acme", "Europe/Berlin"), ("bob", "America/New_York"), ("ops", "Europe/Berlin")] {
        ok(&tickctl(&local, &p, &["tenants", "add", id, "--zone", zone]));
    }
    let dir = std::env::temp_dir().join(unique("migrate"));
    std::fs::create_dir_all(&dir).unwrap();

    // Only refusals: nothing is written.
    let mut bad = vec![
        get_schedule("bob-daily-rate", "rate(1 day)", "America/New_York", serde_json::json!({"tenant": "bob"})),
        get_schedule("carol-nudge", "cron(0 8 * * ? *)", "UTC", serde_json::json!({"tenant": "carol"})),
        get_schedule("acme-tokyo", "cron(0 8 * * ? *)", "Asia/Tokyo", serde_json::json!({"tenant": "acme"})),
        get_schedule("acme-2027-only", "cron(0 8 * * ? 2027)", "Europe/Berlin", serde_json::json!({"tenant": "acme"})),
    ];
    let mut started =
        get_schedule("acme-started", "cron(0 8 * * ? *)", "Europe/Berlin", serde_json::json!({"tenant": "acme"}));
    started["StartDate"] = "2027-01-01T00:00:00Z".into();
    bad.push(started);
    let mut elsewhere =
        get_schedule("bob-elsewhere", "cron(0 8 * * ? *)", "America/New_York", serde_json::json!({"tenant": "bob"}));
    elsewhere["Target"]["Arn"] = "arn:aws:sqs:us-east-1:123456789012:other".into();
    let first = get_schedule("acme-first", "cron(0 7 * * ? *)", "Europe/Berlin", serde_json::json!({"tenant": "acme"}));
    let before = control_items(&local, &p).await;
    let file = dir.join("bad.json");
    std::fs::write(&file, serde_json::json!({"Schedules": bad}).to_string()).unwrap();
    let out = tickctl(&local, &p, &["--json", "schedules", "import", file.to_str().unwrap(), "--from-scheduler"]);
    assert_eq!(out.status.code(), Some(1), "refusals exit 1: {}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let by_name = |r: &serde_json::Value, n: &str| {
        r["refused"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["source"] == n)
            .map(|x| x["reason"].as_str().unwrap().to_string())
    };
    for (name, says) in [
        ("bob-daily-rate", "drifts"),
        ("carol-nudge", "no tenant `carol`"),
        ("acme-tokyo", "is in Europe/Berlin"),
        ("acme-2027-only", "year"),
        ("acme-started", "StartDate"),
    ] {
        let why = by_name(&r, name).unwrap_or_else(|| panic!("{name} not refused: {r}"));
        assert!(why.contains(says), "{name}: {why}");
    }
    assert_eq!(r["imported"]["added"], 0);
    assert_eq!(control_items(&local, &p).await, before, "a refused schedule writes nothing");

    // The export a team has: every feature that maps, and one target of its own.
    let mut nudge = get_schedule(
        "acme-nudge",
        "cron(30 9 ? * 2-6 *)",
        "Europe/Berlin",
        serde_json::json!({"tenant": "acme", "kind": "nudge"}),
    );
    nudge["FlexibleTimeWindow"] = serde_json::json!({"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 15});
    let mut trial = get_schedule(
        "acme-trial",
        "at(2027-01-15T09:00:00)",
        "Europe/Berlin",
        serde_json::json!({"tenant": "acme", "plan": "pro"}),
    );
    trial["State"] = "DISABLED".into();
    let report =
        get_schedule("bob-report", "cron(0 18 L * ? *)", "America/New_York", serde_json::json!({"tenant": "bob"}));
    let timer = get_schedule(
        "acme-renewal",
        "at(2027-01-15T09:00:00)",
        "Europe/Berlin",
        serde_json::json!({"tenant": "acme", "plan": "pro"}),
    );
    let ran =
        get_schedule("acme-ran", "at(2026-01-15T09:00:00)", "Europe/Berlin", serde_json::json!({"tenant": "acme"}));
    let lines: Vec<String> =
        [first, nudge, trial, timer, ran, report, elsewhere].iter().map(|v| v.to_string()).collect();
    let file = dir.join("export.ndjson");
    std::fs::write(&file, lines.join("\n")).unwrap();
    let out = tickctl(&local, &p, &["--json", "schedules", "import", file.to_str().unwrap(), "--from-scheduler"]);
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["imported"]["added"].as_u64(), Some(4), "{r}");
    assert!(by_name(&r, "bob-elsewhere").unwrap().contains("one target"), "{r}");
    assert!(by_name(&r, "acme-trial").unwrap().contains("DISABLED"), "{r}");
    assert!(
        by_name(&r, "acme-ran").unwrap().contains("has passed"),
        "a one-time schedule Scheduler kept after it ran: {r}"
    );
    let listed = |tenant: &str| json_lines(&ok(&tickctl(&local, &p, &["--json", "schedules", "list", tenant])));
    let acme = listed("acme");
    let find = |all: &[serde_json::Value], n: &str| {
        all.iter().find(|s| s["name"] == n).cloned().unwrap_or_else(|| panic!("{n}: {all:?}"))
    };
    let n = find(&acme, "acme-nudge");
    assert_eq!(
        (n["spec"].as_str(), n["spread_min"].as_u64(), n["paused"].as_bool()),
        (Some("cron 30 9 * * 1-5"), Some(15), Some(false))
    );
    let t = find(&acme, "acme-renewal");
    assert_eq!((t["spec"].as_str(), t["paused"].as_bool()), (Some("at 2027-01-15T09:00:00"), Some(false)));
    assert_eq!(find(&listed("bob"), "bob-report")["spec"], "monthly last 18:00");

    // The oracle: Scheduler's 2-6 (Monday to Friday) at 09:30 in Berlin, read by chrono-tz.
    let next =
        json_lines(&ok(&tickctl(&local, &p, &["--json", "schedules", "next", "acme", "acme-nudge", "--count", "10"])));
    assert_eq!(next.len(), 10);
    for f in &next {
        let at: chrono::DateTime<chrono::Utc> = f["instant"].as_str().unwrap().parse().unwrap();
        let local_at = chrono_tz::Europe::Berlin.from_utc_datetime(&at.naive_utc());
        assert!(local_at.weekday().num_days_from_monday() < 5, "{local_at} is a weekday");
        assert_eq!((local_at.hour(), local_at.minute()), (9, 30), "{local_at}");
    }
    let report =
        json_lines(&ok(&tickctl(&local, &p, &["--json", "schedules", "next", "bob", "bob-report", "--count", "3"])));
    for f in &report {
        let at: chrono::DateTime<chrono::Utc> = f["instant"].as_str().unwrap().parse().unwrap();
        let l = chrono_tz::America::New_York.from_utc_datetime(&at.naive_utc());
        let tomorrow = l.date_naive().succ_opt().unwrap();
        assert!(tomorrow.day() == 1 && l.hour() == 18, "{l} is the month's last day at 18:00");
    }

    // A crontab of the ops tenant's jobs.
    let tab = dir.join("crontab");
    std::fs::write(
        &tab,
        "MAILTO=ops@example.com\n# nightly\n15 2 * * 1-5 /usr/local/bin/backup --all\n@reboot /usr/local/bin/warm\n",
    )
    .unwrap();
    let out = tickctl(
        &local,
        &p,
        &[
            "--json",
            "schedules",
            "import",
            tab.to_str().unwrap(),
            "--from-crontab",
            "--zone",
            "Europe/Berlin",
            "--tenant",
            "ops",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(by_name(&r, "line 4").unwrap().contains("@reboot"), "{r}");
    let ops = listed("ops");
    assert_eq!(ops.len(), 1, "{ops:?}");
    assert_eq!((ops[0]["name"].as_str(), ops[0]["spec"].as_str()), (Some("cron-line-3"), Some("cron 15 2 * * 1-5")));
}
