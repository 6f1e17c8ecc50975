//! The control function as a team's service reaches it: the real binary behind the local
//! Runtime and Invoke API stand-ins, over the local DynamoDB server, driven by the Python client
//! under a real CPython (boto3) and the TypeScript client under a real Node.js
//! (`@aws-sdk/client-lambda`). Then the real sweep fires what they set, and the queue holds
//! exactly the units an independent oracle (chrono-tz) expects.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::TimeZone as _;
use lambda_standin::invoke::InvokeApi;
use lambda_standin::runtime::Function;
use tickwork::budget::Unlimited;
use tickwork_lambda::Tick;
use tickwork_sim::queued_units;
use tickwork_tests::{unique, Local};

use crate::binary::{ok, tickctl};

/// The function name the clients invoke (the stand-in serves any).
const FUNCTION: &str = "tickwork-control";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository").to_path_buf()
}

/// The control binary of stack `prefix`, behind the Invoke API.
pub(crate) struct Stack {
    pub(crate) function: Arc<Function>,
    pub(crate) api: InvokeApi,
}

pub(crate) async fn start(local: &Local, prefix: &str) -> Stack {
    let env = [
        ("AWS_ENDPOINT_URL_DYNAMODB", local.endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
        ("TICKWORK_TABLE_PREFIX", prefix),
        ("TICKWORK_CAPACITY_SOURCE", "estimate"),
    ];
    // The template's 30 s is for DynamoDB's latency; here every request waits its turn at a moto
    // that `make test`'s chaos seeds share, and a `schedules.put` ran past 30 s twice on
    // 2026-12-03 (22 s for the whole scenario alone). 90 s, so the check is of the answers.
    let f = Function::start(env!("CARGO_BIN_EXE_lambda-control"), &[], repo(), &env, Duration::from_secs(90))
        .await
        .expect("the control function starts");
    let f = Arc::new(f);
    let api = InvokeApi::start(f.handler()).await.expect("the Invoke API");
    Stack { function: f, api }
}

#[derive(Debug, Clone, Copy)]
enum Client {
    Python,
    TypeScript,
}

/// Runs `scenario` of the client's script against `stack`; its JSON document.
async fn run(client: Client, stack: &Stack, scenario: &str, extra: &[(&str, &str)]) -> serde_json::Value {
    let repo = repo();
    let mut c = match client {
        Client::Python => {
            let py = repo.join(".tools/python-client/bin/python");
            assert!(py.exists(), "the Python client is not installed: run `make deps`");
            let mut c = tokio::process::Command::new(py);
            c.arg(repo.join("clients/python/tests/scenario.py"));
            c
        }
        Client::TypeScript => {
            let dir = repo.join("clients/typescript");
            assert!(
                dir.join("node_modules/@aws-sdk/client-lambda").exists(),
                "the TypeScript client is not installed: run `make deps`"
            );
            let mut c = tokio::process::Command::new("node");
            c.arg(dir.join("test/scenario.mjs")).current_dir(dir);
            c
        }
    };
    c.arg(scenario)
        .env("TICKWORK_CONTROL_ENDPOINT", stack.api.endpoint())
        .env("TICKWORK_CONTROL_FUNCTION", FUNCTION)
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("AWS_ENDPOINT_URL_LAMBDA");
    for (k, v) in extra {
        c.env(k, v);
    }
    let out = c.output().await.expect("the client runs");
    assert!(
        out.status.success(),
        "{client:?} {scenario}: exit {:?}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{client:?} {scenario}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

const ZONES: [&str; 6] = ["Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Sydney", "Asia/Kolkata", "UTC"];

fn key(at: chrono::DateTime<chrono_tz::Tz>) -> String {
    at.format("%Y-%m-%dT%H:%M:%S%:z").to_string()
}

/// Every local 08:00 of `zone` after `from_ms` and at or before `to_ms`, by chrono-tz (none of
/// the zones has a DST change in the window the test uses, so 08:00 is one instant each day).
fn daily_0800(zone: &str, from_ms: i64, to_ms: i64) -> Vec<String> {
    let tz: chrono_tz::Tz = zone.parse().unwrap();
    let start = tz.timestamp_millis_opt(from_ms).unwrap().date_naive();
    (0..4)
        .filter_map(|d| {
            let day = start + chrono::Days::new(d);
            let at = tz.from_local_datetime(&day.and_hms_opt(8, 0, 0).unwrap()).single()?;
            let ms = at.timestamp_millis();
            (ms > from_ms && ms <= to_ms).then(|| key(at))
        })
        .collect()
}

/// Adds 100 tenants in six zones, a daily schedule and a one-off timer for each, moves one,
/// suspends one and cancels one timer, all through `client`; then the real sweep fires them, and
/// the queue holds exactly the oracle's units, each once. `explain` agrees with the tables.
async fn lifecycle(client: Client) {
    let local = Local::new().await;
    let p = unique("ctl");
    ok(&tickctl(&local, &p, &["provision"]));
    let stack = start(&local, &p).await;
    let t0 = jiff::Timestamp::now().as_millisecond();
    let at_ms = (t0 / 60_000 + 120) * 60_000;
    let at = jiff::Timestamp::from_millisecond(at_ms).unwrap().to_string();
    // A timer within the hour too: its writer counts it on its due shard's cursor.
    let soon_ms = (t0 / 60_000 + 30) * 60_000;
    let soon = jiff::Timestamp::from_millisecond(soon_ms).unwrap().to_string();
    let r =
        run(client, &stack, "lifecycle", &[("TICKWORK_TIMER_AT", at.as_str()), ("TICKWORK_SOON_AT", soon.as_str())])
            .await;
    let t1 = jiff::Timestamp::now().as_millisecond();
    let outcomes =
        |k: &str| r[k].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(outcomes("added"), vec!["added"; 100], "{r}");
    assert_eq!(outcomes("again"), vec!["unchanged"; 100], "a repeat changes nothing");
    assert_eq!(outcomes("daily"), vec!["added"; 100]);
    assert_eq!(outcomes("timers"), vec!["added"; 100]);
    assert_eq!(r["refused"], serde_json::json!([]));
    assert_eq!(r["moved"]["zone"], "Asia/Tokyo");
    assert_eq!(r["suspended"]["outcome"], "changed");
    assert_eq!(r["cancelled"]["outcome"], "removed");
    assert_eq!((&r["soon"]["outcome"], &r["resumed"]["outcome"]), (&"added".into(), &"changed".into()));
    assert_eq!(r["removed"]["outcome"], "removed");
    assert_eq!(r["listed"].as_array().unwrap().len(), 99, "the listing followed its cursor to the end");
    assert!(r["next"][0]["occurrence"].as_str().unwrap().ends_with("T08:00:00+09:00"), "in Tokyo now: {r}");

    // Two days of event time later, one tick fires everything due.
    let sweep_at = t1 + 2 * 86_400_000;
    let deps = local.stack_sweep(&p, &[], None);
    local.clock.set(sweep_at);
    tickwork_tests::streams::settle(&local, &deps).await;
    pulse_sweep::run(&deps, &Tick::parse(&Tick::envelope(sweep_at, false)).unwrap(), &Unlimited, "w").await.unwrap();

    let mut want = BTreeSet::new();
    for i in 0..100 {
        let id = format!("t{i:03}");
        if id == "t002" || id == "t005" {
            continue; // suspended, removed: nothing fires
        }
        let zone = if id == "t001" { "Asia/Tokyo" } else { ZONES[i % ZONES.len()] };
        // Owed from when it was put: an 08:00 inside the seconds the script ran would be ambiguous.
        for k in daily_0800(zone, t1, sweep_at) {
            want.insert((id.clone(), "nudge".to_string(), k));
        }
        assert!(daily_0800(zone, t0, t1).is_empty(), "an 08:00 fell inside the script's run; run again");
        let tz: chrono_tz::Tz = zone.parse().unwrap();
        if id != "t003" {
            want.insert((id.clone(), "call".to_string(), key(tz.timestamp_millis_opt(at_ms).unwrap())));
        }
        if id == "t004" {
            want.insert((id.clone(), "soon".to_string(), key(tz.timestamp_millis_opt(soon_ms).unwrap())));
        }
    }
    let mut got = BTreeSet::new();
    for (k, n) in queued_units(&local.db, &format!("{p}-queue")).await.unwrap() {
        if let ["sched", t, name, occ] = k.split('#').collect::<Vec<_>>()[..] {
            assert_eq!(n, 1, "{k} queued {n} times");
            got.insert((t.to_string(), name.to_string(), occ.to_string()));
        }
    }
    // Each unit carries the payload its schedule or timer was given: the daily one shared by every
    // tenant, each timer its tenant's own (a group of its own), the one set without none.
    let mut payloads = 0;
    for u in tickwork_sim::queued(&local.db, &format!("{p}-queue")).await.unwrap() {
        let v: serde_json::Value = serde_json::from_str(&u.payload).unwrap();
        let n: usize = u.tenant.trim_start_matches('t').parse().unwrap();
        let want = match v["name"].as_str() {
            Some("nudge") => serde_json::json!({"kind": "summary"}),
            Some("call") => serde_json::json!({"reason": "call", "n": n}),
            Some("soon") => serde_json::Value::Null,
            _ => continue,
        };
        assert_eq!(v["payload"], want, "{}: {v}", u.key);
        payloads += usize::from(!want.is_null());
    }
    assert!(payloads >= 2 * 95, "every fire checked: {payloads}");
    let missing: Vec<_> = want.difference(&got).collect();
    let extra: Vec<_> = got.difference(&want).collect();
    assert!(missing.is_empty() && extra.is_empty(), "missing {missing:?}\nextra {extra:?}");

    // `explain`, asked after the fire, agrees with the tables and the queue.
    let cdeps = control::Deps::new(
        local.fresh_db(),
        local.clock(),
        &pulse_sweep::Tables {
            control: format!("{p}-control"),
            tenants: format!("{p}-tenants"),
            queue: format!("{p}-queue"),
        },
        8,
        "pulse-sweep".into(),
        deps.cfg.policy,
    );
    let explain = |id: &str| {
        let cdeps = cdeps.clone();
        let id = id.to_string();
        async move {
            let a = control::handle(&cdeps, serde_json::json!({"op": "tenants.explain", "id": id})).await.unwrap();
            serde_json::to_value(a).unwrap()["result"].clone()
        }
    };
    let moved = explain("t001").await;
    assert_eq!(moved["tenant"]["zone"], "Asia/Tokyo");
    let names: Vec<&str> =
        moved["schedules"].as_array().unwrap().iter().map(|s| s["schedule"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["nudge"], "the fired timer is gone: {moved}");
    let next = moved["schedules"][0]["next"][0]["occurrence"].as_str().unwrap().to_string();
    let last_fired = got.iter().filter(|(t, n, _)| t == "t001" && n == "nudge").map(|(_, _, o)| o.clone()).max();
    assert!(next.ends_with("+09:00") && Some(&next) > last_fired.as_ref(), "{next} after {last_fired:?}");
    let suspended = explain("t002").await;
    assert_eq!(suspended["tenant"]["status"], "suspended");
    assert!(suspended["findings"][0].as_str().unwrap().starts_with("suspended"), "{suspended}");
    let cancelled = explain("t003").await;
    assert_eq!(cancelled["schedules"].as_array().unwrap().len(), 1, "only the nudge: {cancelled}");

    // `tickctl tenants explain` gives the function's answer (both at the wall clock here).
    let wall = control::Deps { clock: std::sync::Arc::new(tickwork::clock::SystemClock), ..cdeps.clone() };
    let by_tickctl: serde_json::Value =
        serde_json::from_str(&ok(&tickctl(&local, &p, &["--json", "tenants", "explain", "t001"]))).unwrap();
    let a = control::handle(&wall, serde_json::json!({"op": "tenants.explain", "id": "t001"})).await.unwrap();
    let by_function = serde_json::to_value(a).unwrap()["result"].clone();
    for part in ["tenant", "sweep", "calendar", "findings"] {
        assert_eq!(by_tickctl[part], by_function[part], "{part}");
    }
    let names = |v: &serde_json::Value| {
        v["schedules"].as_array().unwrap().iter().map(|s| s["schedule"].clone()).collect::<Vec<_>>()
    };
    assert_eq!(names(&by_tickctl), names(&by_function));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sets_tenants_schedules_and_timers_and_the_sweep_fires_exactly_them() {
    lifecycle(Client::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sets_tenants_schedules_and_timers_and_the_sweep_fires_exactly_them() {
    lifecycle(Client::TypeScript).await;
}

/// Every item of the stack's three tables, printed in a stable order: a full read to compare.
pub(crate) async fn everything(local: &Local, prefix: &str) -> Vec<String> {
    let mut all = Vec::new();
    for t in ["control", "tenants", "queue"] {
        for item in tickwork_sim::scan_all(&local.db, &format!("{prefix}-{t}")).await.unwrap() {
            let sorted: std::collections::BTreeMap<_, _> = item.into_iter().collect();
            all.push(format!("{t}: {sorted:?}"));
        }
    }
    all.sort();
    all
}

/// Each refusal, sent through `client`: the typed error names its type and field, and the tables
/// are as they were, item for item.
async fn refusals(client: Client) {
    let local = Local::new().await;
    let p = unique("ctlr");
    ok(&tickctl(&local, &p, &["provision"]));
    let stack = start(&local, &p).await;
    let setup = run(client, &stack, "setup", &[]).await;
    assert_eq!(setup["tenant"]["zone"], "Europe/Berlin");
    let before = everything(&local, &p).await;
    let r = run(client, &stack, "refusals", &[]).await;
    let after = everything(&local, &p).await;
    assert_eq!(before, after, "a refusal wrote nothing");
    for (case, ty, field, index) in [
        ("unknown zone", "UnknownZone", Some("tenants[0].zone"), Some(0)),
        ("added again in another zone", "Conflict", Some("tenants[0].zone"), Some(0)),
        ("over-long id", "TooLarge", Some("tenants[0].id"), Some(0)),
        ("owed_from not a date", "InvalidField", Some("tenants[0].owed_from"), Some(0)),
        ("batch over its limit", "TooLarge", Some("tenants"), None),
        ("invalid spec", "InvalidSpec", Some("schedules[0].spec"), Some(0)),
        ("invalid spread", "InvalidSpec", Some("schedules[0].spread_min"), Some(0)),
        ("schedule of no tenant", "NoSuchTenant", Some("schedules[0].tenant"), Some(0)),
        ("no such tenant", "NoSuchTenant", Some("id"), None),
        ("no such schedule", "NoSuchSchedule", Some("name"), None),
        ("timer over a recurring schedule", "Conflict", Some("name"), None),
        ("cancel of a recurring schedule", "Conflict", Some("name"), None),
        ("move to an unknown zone", "UnknownZone", Some("zone"), None),
        ("unknown operation", "UnknownOperation", Some("op"), None),
        ("no op", "Malformed", Some("op"), None),
        ("not an object", "Malformed", None, None),
        ("field of the wrong type", "InvalidField", Some("id"), None),
        ("unknown field", "InvalidField", Some("colour"), None),
        ("entry field of the wrong type", "InvalidField", Some("tenants[1].zone"), Some(1)),
        ("cursor not ours", "InvalidField", Some("cursor"), None),
    ] {
        let got = &r[case];
        assert_eq!(got["raised"], ty, "{client:?} {case}: {got}");
        assert_eq!(got["type"], ty, "{case}");
        assert_eq!(got["field"].as_str(), field, "{case}: {got}");
        assert_eq!(got["index"].as_u64(), index.map(|i: u64| i), "{case}: {got}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_through_python_names_its_field_and_writes_nothing() {
    refusals(Client::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_through_typescript_names_its_field_and_writes_nothing() {
    refusals(Client::TypeScript).await;
}

/// The schema committed under `docs/control/` is the one the types generate (`TICKWORK_BLESS=1`
/// writes it anew).
#[test]
fn the_committed_schema_is_the_code_s() {
    for (file, schema) in
        [("request.schema.json", control::schema::request()), ("answer.schema.json", control::schema::answer())]
    {
        let path = repo().join("docs/control").join(file);
        let text = control::schema::text(&schema);
        if std::env::var("TICKWORK_BLESS").as_deref() == Ok("1") {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &text).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(committed == text, "docs/control/{file} is not the types' schema: run TICKWORK_BLESS=1 cargo test -p tickwork-tests --test it control::the_committed_schema");
    }
}
