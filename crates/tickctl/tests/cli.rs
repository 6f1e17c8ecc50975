//! The `tickctl` binary itself, against the local servers (`make test` starts them): the JSON each
//! read command prints, and the exit codes (0 ok, 1 failed, 2 bad usage, 3 audit findings).

use std::process::{Command, Output};

fn prefix() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("cli{}-{nanos:x}", std::process::id())
}

fn tickctl(prefix: &str, args: &[&str]) -> Output {
    tickctl_with(prefix, &[], args)
}

fn tickctl_with(prefix: &str, vars: &[(&str, &str)], args: &[&str]) -> Output {
    assert!(
        std::env::var("AWS_ENDPOINT_URL_DYNAMODB").is_ok(),
        "AWS_ENDPOINT_URL_DYNAMODB is not set: run through `make test` (scripts/with-servers.sh)"
    );
    Command::new(env!("CARGO_BIN_EXE_tickctl"))
        .args(args)
        .env("TICKWORK_TABLE_PREFIX", prefix)
        .env("TICKWORK_ARCHIVE_BUCKET", format!("{prefix}-archive"))
        // The template's fan-out job, as a stack's file names it (`status` refuses without it).
        .env("TICKWORK_FANOUT_JOB", "utc-daily")
        .envs(vars.iter().copied())
        .output()
        .expect("run tickctl")
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "exit {:?}: {}", o.status.code(), String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

/// A sweep deployed under its own job name: `plan` and `pause` name it without being told.
#[test]
fn plan_and_pause_follow_the_sweeps_job_name() {
    let p = prefix();
    let job = [("TICKWORK_PULSE_JOB", "nightly-pulse")];
    assert!(tickctl_with(&p, &job, &["provision"]).status.success());
    assert!(tickctl_with(&p, &job, &["seed", "--tenants", "4", "--zones", "2"]).status.success());
    let plan = json(&tickctl_with(&p, &job, &["--json", "plan", "--at", "2026-03-29T12:00:00Z"]));
    assert_eq!((plan["job"].as_str(), plan["groups"].as_array().map(Vec::len)), (Some("nightly-pulse"), Some(2)));
    assert!(tickctl_with(&p, &job, &["pause", "pulse-sweep"]).status.success());
    let status = json(&tickctl_with(&p, &job, &["--json", "status"]));
    let sweep = status["jobs"].as_array().unwrap().iter().find(|j| j["job"] == "nightly-pulse");
    assert_eq!(sweep.map(|s| s["watermark"]["paused"].clone()), Some(true.into()), "{status}");
}

#[test]
fn the_cli_provisions_seeds_plans_pauses_and_reports_json() {
    let p = prefix();
    let made = json(&tickctl(&p, &["--json", "provision"]));
    assert_eq!(made.as_array().unwrap().len(), 6, "5 tables and the bucket: {made}");
    assert!(tickctl(&p, &["seed", "--tenants", "16", "--zones", "4"]).status.success());

    let plan = json(&tickctl(&p, &["--json", "plan", "--at", "2026-03-29T12:00:00Z"]));
    let groups = plan["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 4);
    assert_eq!(groups.iter().map(|g| g["tenants"].as_u64().unwrap()).sum::<u64>(), 16);
    assert!(groups.iter().all(|g| g["due_now"] == true), "no watermark yet: every group is due");
    assert_eq!(plan["ticks"].as_array().unwrap().len(), 1, "all due now: one tick");

    assert!(tickctl(&p, &["pause", "pulse-sweep", "--reason", "cli test"]).status.success());
    let status = json(&tickctl(&p, &["--json", "status"]));
    let sweep = status["jobs"].as_array().unwrap().iter().find(|j| j["job"] == "pulse-sweep").unwrap();
    assert_eq!(
        (sweep["watermark"]["paused"].clone(), sweep["watermark"]["paused_reason"].clone()),
        (true.into(), "cli test".into())
    );
    assert_eq!(sweep["watermark"]["groups"].as_array().unwrap().len(), 4);
    assert_eq!(json(&tickctl(&p, &["--json", "plan", "--at", "2026-03-29T12:00:00Z"]))["paused"], true);
    assert!(tickctl(&p, &["resume", "pulse-sweep"]).status.success());
    let status = json(&tickctl(&p, &["--json", "status"]));
    assert_eq!(status["jobs"][0]["watermark"]["paused"], false);
    // The queue worker's switch is a marker in each ready shard; every function can be paused.
    assert!(tickctl(&p, &["pause", "queue-worker"]).status.success());
    assert_eq!(json(&tickctl(&p, &["--json", "status"]))["worker_paused"], true);
    assert!(tickctl(&p, &["resume", "queue-worker"]).status.success());
    assert_eq!(json(&tickctl(&p, &["--json", "status"]))["worker_paused"], false);
    for f in ["tenant-fanout", "archiver"] {
        assert!(tickctl(&p, &["pause", f]).status.success(), "{f}");
        assert!(tickctl(&p, &["resume", f]).status.success(), "{f}");
    }
    // An unknown name (the fan-out's old job name, say) is a usage error naming the valid ones.
    let o = tickctl(&p, &["pause", "fanout-daily-summary"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(["pulse-sweep", "tenant-fanout", "queue-worker", "archiver"].iter().all(|f| err.contains(f)), "{err}");

    assert_eq!(json(&tickctl(&p, &["--json", "dead-letters", "list"])), serde_json::json!([]));
    let o = tickctl(&p, &["dead-letters", "retry", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`nope` is not a dead letter"));
}

#[test]
fn exit_codes_name_the_problem() {
    let p = prefix();
    // Bad usage: clap's 2.
    assert_eq!(tickctl(&p, &["plan", "--at"]).status.code(), Some(2));
    assert_eq!(tickctl(&p, &["no-such-command"]).status.code(), Some(2));
    // A bad value: 1, naming it.
    let o = tickctl(&p, &["cost", "--tick", "1x"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`1x` is not a duration"));
    // Degenerate arguments are refused by name, never a panic (a tick of 0 once divided by zero).
    for (args, says) in [
        (&["cost", "--tick", "0s"][..], "--tick must be above 0"),
        (&["cost", "--tick", "2d"][..], "--tick must be 1s to 1d"),
        (&["cost", "--tick", "1h", "--worker-every", "1m"][..], "--worker-every must be at least one --tick"),
    ] {
        let o = tickctl(&p, args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(says), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
    for args in [
        &["cost", "--tenants", "0"][..],
        &["cost", "--workers", "0"],
        &["cost", "--days", "0"],
        &["seed", "--zones", "9"],
    ] {
        assert_eq!(tickctl(&p, args).status.code(), Some(2), "{args:?}: a usage error");
    }
    // Shell completions name the commands.
    let o = tickctl(&p, &["completions", "bash"]);
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("dead-letters"));
    // An environment file overrides the shell's variables: its prefix is the one named.
    let file = std::env::temp_dir().join(format!("{p}.env"));
    std::fs::write(&file, format!("# a deployment\nTICKWORK_TABLE_PREFIX={p}-other\n")).unwrap();
    let o = tickctl(&p, &["--env-file", file.to_str().unwrap(), "status"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&format!("{p}-other-control")),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // `--stack` without its file says how to write it.
    let o = tickctl(&p, &["--stack", "nope", "status"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("make stack-env STACK=nope"));
    let o = tickctl(&p, &["plan", "--at", "yesterday"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--at `yesterday`"));
    // A table that does not exist: 1, naming it.
    let o = tickctl(&p, &["status"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&format!("{p}-control")),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn audit_exits_3_on_a_finding_and_cost_prints_json() {
    let p = prefix();
    let dir = std::env::temp_dir().join(format!("{p}-audit"));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("log.txt");
    // One idle pulse-sweep tick reading 700 items of bookkeeping, as 000_* did.
    let line = serde_json::json!({"message": "tickwork invocation", "level": "INFO", "job": "pulse-sweep",
        "_aws": {"Timestamp": 0, "CloudWatchMetrics": [{"Namespace": "tickwork", "Dimensions": [[]],
        "Metrics": [{"Name": "Paused"}]}]}, "Paused": 0, "read_requests": 700, "write_requests": 0,
        "calls": [{"table": "x-control", "index": null, "op": "GetItem", "requests": 700, "items_read": 700,
        "items_written": 0, "rcu": 350.0, "wcu": 0.0}]});
    std::fs::write(&log, format!("{line}\n")).unwrap();
    let o = tickctl(&p, &["--json", "audit", log.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "{}", String::from_utf8_lossy(&o.stderr));
    let a: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(a["findings"].as_array().unwrap().len(), 2);
    let o = tickctl(&p, &["audit", dir.join("missing.txt").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.txt"));

    let c =
        json(&tickctl(&p, &["--json", "cost", "--tenants", "100", "--workers", "2", "--days", "2", "--zones", "2"]));
    let sweep = c["jobs"].as_array().unwrap().iter().find(|j| j["job"] == "pulse-sweep").unwrap();
    // Two workers on the template's quarter-hour schedule for two days.
    assert_eq!(sweep["invocations"], 2 * 2 * 96);
    // The before design at its own one-minute schedule: far more reads than the quarter-hour sweep.
    assert_eq!(c["before"]["invocations"], 2 * 2 * 1440);
    assert!(c["before"]["reads"].as_u64().unwrap() > 100 * sweep["reads"].as_u64().unwrap());
    // And in dollars: the whole stack's bill, the before design's DynamoDB, the prices used.
    let usd = &c["usd_per_month"];
    assert!(usd["bill"]["lines"].as_array().unwrap().iter().any(|l| l["service"] == "CloudWatch"));
    assert!(usd["before_dynamodb_usd"].as_f64().unwrap() > 0.0);
    assert_eq!(usd["prices"]["ddb_write_million"], 0.625);
    let o = tickctl(&p, &["cost", "--days", "1", "--price", "ddb_write=1"]);
    assert_eq!(o.status.code(), Some(2), "a bad price is a usage error");
    assert!(String::from_utf8_lossy(&o.stderr).contains("no price named `ddb_write`"));
}

/// Ten million tenants are priced from the model at two sizes, each service a line through them
/// (about 8 s with the debug build, 1.3 s with the release one, on this machine), and the largest
/// boundary asked about, a zone group of three million, is swept within a quarter hour with 8
/// shard workers, within DynamoDB's write limits, at the cost it names; and delivered to a handler
/// of 10 ms a unit by the template's 4 drains of 16 calls, its last unit handled within the
/// quarter hour too (3 drains would do).
#[test]
fn cost_answers_for_ten_million_tenants_with_the_boundary_of_three_million() {
    let p = prefix();
    let args = ["--json", "cost", "--tenants", "10000000", "--group-tenants", "3000000", "--shard-workers", "8"];
    let c = json(&tickctl(&p, &args));
    assert_eq!(c["tenants"], 10_000_000);
    assert!(c["usd_per_month"]["tickwork_total"].as_f64().unwrap() > 0.0);
    let b = &c["boundary"];
    assert_eq!((b["input"]["tenants"].as_u64(), b["input"]["workers"].as_u64()), (Some(3_000_000), Some(8)));
    assert!(b["time"]["total_ms"].as_f64().unwrap() < 900_000.0, "{b}");
    assert_eq!(b["time"]["within_limits"], true, "{b}");
    assert!(b["needed"].as_u64().unwrap() <= 8, "{b}");
    assert!(b["burst_usd"].as_f64().unwrap() > 0.0);
    // The figures docs/cost.md prints for this command, at the prices in bill/prices.rs.
    let near = |v: &serde_json::Value, want: f64, tol: f64| (v.as_f64().unwrap() - want).abs() <= tol;
    assert!(near(&c["usd_per_month"]["tickwork_total"], 38.66, 0.005), "{}", c["usd_per_month"]);
    assert!(near(&b["time"]["total_ms"], 38_800.0, 50.0), "{b}");
    assert_eq!((b["needed"].as_u64(), b["time"]["write_units"].as_f64()), (Some(1), Some(81_216.0)), "{b}");
    assert!(near(&b["burst_usd"], 0.0548, 0.00005), "{b}");
    let d = &b["delivery"];
    assert_eq!((d["input"]["drains"].as_u64(), d["input"]["concurrency"].as_u64()), (Some(4), Some(16)), "{d}");
    assert_eq!(d["input"]["handler_ms"], 10.0);
    // Bound by a new on-demand handler table's 4,000 writes a second (3,000,000 units: 750 s).
    assert_eq!(d["input"]["handler_wcu"], 4_000.0);
    assert!(near(&d["time"]["done_ms"], 775_960.0, 1.0), "boundary-to-done: {d}");
    assert!(d["time"]["done_ms"].as_f64().unwrap() < 900_000.0);
    assert_eq!((d["needed"].as_u64(), d["time"]["refunds"].as_u64()), (Some(3), Some(7)), "{d}");
    // The drains ask 6,400 a second of a table that takes 4,000: it bounds them.
    assert_eq!((d["handler_wcu_per_sec"].as_f64(), d["within_limits"].as_bool()), (Some(4_000.0), Some(false)));
    assert_eq!(d["time"]["bound"], "table");
    assert!(near(&d["burst_usd"], 0.01055, 0.00001), "{d}");
    // A table that has seen a boundary serves twice that: the drains bound it (6,400 a second).
    let warm = [&args[..], &["--handler-table-wcu", "8000"]].concat();
    let w = json(&tickctl(&p, &warm));
    assert!(near(&w["boundary"]["delivery"]["time"]["done_ms"], 492_760.0, 1.0), "{w}");
    assert_eq!(w["boundary"]["delivery"]["time"]["bound"], "drains");
    // A function whose reserved concurrency is a new account's 10: 769 units a second.
    let narrow = [&args[..], &["--deliver-to", "lambda", "--target-concurrency", "10"]].concat();
    let n = json(&tickctl(&p, &narrow));
    assert!(n["boundary"]["delivery"]["time"]["done_ms"].as_f64().unwrap() > 3_600_000.0, "{n}");
    assert_eq!(n["boundary"]["delivery"]["time"]["bound"], "target");
    // At the template's defaults (one shard worker, the sweep's 480 s timeout, 4 drains of 16
    // calls), with no other flag, the same zone group is done within the quarter hour: its paging
    // fits one invocation, where in a 300 s one its tail waited for the next tick (908.6 s).
    let c = json(&tickctl(&p, &["--json", "cost", "--tenants", "10000000", "--group-tenants", "3000000"]));
    let (b, d) = (&c["boundary"], &c["boundary"]["delivery"]);
    assert_eq!(b["input"]["workers"].as_u64(), Some(1), "{b}");
    assert!(b["time"]["total_ms"].as_f64().unwrap() < 480_000.0, "one invocation: {b}");
    assert!(d["time"]["done_ms"].as_f64().unwrap() < 900_000.0, "boundary-to-done: {d}");
    // An assumption that cannot be right is refused by name.
    let o = tickctl(&p, &["cost", "--tenants", "10000000", "--latency", "0s"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--latency must be above 0"));
}

/// `cost --schedules`: a fire's units and dollars, tenants sharing a group or each its own; a
/// burst's hand-over and delivery from the sweep's own paging (800 groups of one: 8 shards of a
/// page of 100, at once; a million fires of one group: a thousand member pages);
/// `--deliver-to` prices a target's calls and uses its batch.
#[test]
fn cost_prices_schedules_a_burst_and_a_target() {
    let p = prefix();
    let args = ["--json", "cost", "--tenants", "1000000", "--schedules", "--burst", "800", "--burst-groups", "800"];
    // Rounds of requests counted first: no time for their bytes (`--latency-per-kb-ms 0`).
    let flat = ["--latency", "10ms", "--latency-per-kb-ms", "0"];
    let c = json(&tickctl(&p, &[&args[..], &flat[..]].concat()));
    let near = |v: &serde_json::Value, want: f64, tol: f64| (v.as_f64().unwrap() - want).abs() <= tol;
    let (shared, distinct) = (&c["cost"]["shared"], &c["cost"]["distinct"]);
    assert!(shared["wcu"].as_f64().unwrap() <= 0.05, "the issue's 0.05 a shared fire: {c}");
    // The 2 a distinct fire, and one more: its record deleted once fired (a record left
    // to expire could expire unfired in a long stop, and its group never fire again).
    assert!((2.0..=2.5).contains(&distinct["wcu"].as_f64().unwrap()), "{c}");
    // A million daily fires, 30 days, at $0.625 a million write and $0.125 a million read units,
    // and (distinct) each group's pending record at $0.25 a GB-month.
    assert!(near(&shared["month_usd"], 4.58, 0.005), "{c}");
    assert!(near(&distinct["month_usd"], 49.62, 0.005), "{c}");
    assert!(near(&distinct["storage_usd"], 0.04, 0.005), "{c}");
    assert!(near(&c["cost"]["scheduler_month_usd"], 24.60, 0.005), "{c}");
    let b = &c["burst"];
    assert_eq!((b["time"]["pages"].as_u64(), b["time"]["requests"].as_u64()), (Some(8), Some(922)), "{b}");
    // The tick at their instant, then 13 rounds of requests of 10 ms: the cursors, a shard's first
    // record, its lease, its page (its 100 member Queries 64 at a time: 2 rounds), its successors,
    // its transaction, its deletes and its lease let go, the shards at once, then the earliest
    // records and `sched_next`; but their 1,608 write units take a new on-demand control table
    // 0.40 s, longer.
    assert_eq!(b["time"]["requests_ms"].as_f64(), Some(130.0), "{b}");
    assert!((b["time"]["handover_ms"].as_f64().unwrap() - 402.0).abs() < 1e-6, "{b}");
    assert!(b["done_ms"].as_f64().unwrap() >= b["time"]["handover_ms"].as_f64().unwrap());
    // A million fires of one zone's 08:00 (the default: one group): 12,018 requests, 4,011
    // rounds (a page's tenants read 8 BatchGetItems at once), 40 s; but a new on-demand tenants
    // table serves 12,000 strongly consistent reads a second, and the million tenants take 83 s.
    // Delivered within five minutes either way.
    let m = json(&tickctl(&p, &[&["--json", "cost", "--schedules"][..], &flat[..]].concat()));
    let b = &m["burst"];
    assert_eq!(
        (b["time"]["member_pages"].as_u64(), b["time"]["requests"].as_u64()),
        (Some(1_001), Some(12_018)),
        "{b}"
    );
    assert_eq!(b["time"]["requests_ms"].as_f64(), Some(40_110.0), "{b}");
    assert!((b["time"]["handover_ms"].as_f64().unwrap() - 1e6 / 12.0).abs() < 1e-6, "{b}");
    assert!(b["done_ms"].as_f64().unwrap() < 300_000.0, "{b}");
    // Each request's bytes too, at the default 0.1 ms a kilobyte (36-byte tenant ids): a full
    // page's member Query answers 212 KB, and the requests take 70.7 s; still under the tenants
    // table's reads, which a warmed table lifts.
    let sized = json(&tickctl(&p, &["--json", "cost", "--schedules", "--latency", "10ms"]));
    let t = &sized["burst"]["time"];
    assert!(near(&t["requests_ms"], 70_736.6, 0.1), "{t}");
    assert!((t["handover_ms"].as_f64().unwrap() - 1e6 / 12.0).abs() < 1e-6, "{t}");
    // A million such fires whole, beside the Scheduler's $1.00 a million invocations: the sweep's
    // units $0.153, the drains' $0.003, the handler's million writes $0.625.
    let f = &sized["burst"]["full"];
    assert!(near(&f["total_usd"], 0.781, 0.001) && near(&f["handler_usd"], 0.625, 1e-9), "{f}");
    assert!(near(&f["scheduler_usd"], 1.0, 1e-9), "{f}");
    let warm = json(&tickctl(&p, &["--json", "cost", "--schedules", "--latency", "10ms", "--table-rcu", "40000"]));
    assert!(near(&warm["burst"]["time"]["handover_ms"], 70_736.6, 0.1), "{warm}");
    // A million distinct timers (docs/cost.md's table): on a new on-demand control table its
    // 4,000 write units a second bound the 2.01 million units (two invocations, a wake between);
    // warmed to 12,000, at 50 ms a request and 0.1 ms a kilobyte, the requests take 290.6 s,
    // within five minutes.
    let distinct = ["--json", "cost", "--schedules", "--burst-groups", "1000000"];
    let cold = json(&tickctl(&p, &[&distinct[..], &["--latency", "10ms"]].concat()));
    let t = &cold["burst"]["time"];
    assert_eq!((t["requests"].as_u64(), t["invocations"].as_u64()), (Some(1_100_042), Some(2)), "{t}");
    assert!((t["handover_ms"].as_f64().unwrap() - 562_500.0).abs() < 1e-3, "{t}");
    // A campaign: one one-off group of a million, fixed after its first page of 40 and then paged
    // a thousand a transaction from its start like a recurring group: handed over in the same
    // 83.3 s (the tenants table's reads), its members and definitions cleaned after (2 million
    // plain deletes, the member partition at 1,000 a second, 45 s of each minute), 1,413 s after
    // the instant; $2.04 a million fires whole.
    let campaign = json(&tickctl(&p, &["--json", "cost", "--schedules", "--burst-one-off", "--latency", "10ms"]));
    let t = &campaign["burst"]["time"];
    assert!(near(&t["handover_ms"], 83_333.3, 0.1) && near(&t["cleaned_ms"], 1_413_333.3, 0.1), "{t}");
    assert!(near(&t["member_floor_ms"], 0.0, 1e-9) && near(&t["clean_write_units"], 2_000_000.0, 1e-3), "{t}");
    assert_eq!((t["member_pages"].as_u64(), t["invocations"].as_u64()), (Some(1_002), Some(1)), "{t}");
    assert!(near(&campaign["burst"]["full"]["total_usd"], 2.038, 0.001), "{campaign}");
    // Every fire its own group: its record replaced, $1.65 a million of the sweep's; $2.29 whole.
    assert!(near(&cold["burst"]["full"]["total_usd"], 2.285, 0.001), "{cold}");
    let warm = json(&tickctl(&p, &[&distinct[..], &["--latency", "50ms", "--control-table-wcu", "12000"]].concat()));
    let t = &warm["burst"]["time"];
    assert!(near(&t["handover_ms"], 290_562.5, 0.1) && t["in_flight"].as_u64() == Some(512), "{t}");
    let args = ["--json", "cost", "--tenants", "10000000", "--group-tenants", "3000000", "--shard-workers", "8"];
    for (to, calls, usd) in
        [("lambda", 36_875_000.0, 7.375), ("sqs", 36_875_000.0, 14.75), ("events", 36_875_000.0, 368.75)]
    {
        let c = json(&tickctl(&p, &[&args[..], &["--deliver-to", to]].concat()));
        let t = &c["boundary"]["delivery"]["target"];
        assert_eq!(t["calls"].as_f64(), Some(calls), "{to}: {t}");
        assert!((t["usd"].as_f64().unwrap() - usd).abs() < 0.01, "{to}: {t}");
        assert_eq!(c["boundary"]["delivery"]["input"]["units_per_call"], 10, "{to}");
    }
    let o = tickctl(&p, &["cost", "--deliver-to", "kafka"]);
    assert_eq!(o.status.code(), Some(2), "a value clap refuses");
    assert!(String::from_utf8_lossy(&o.stderr).contains("one of rust, lambda, sqs, sqs-fifo, events"));
}
