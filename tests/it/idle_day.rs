//! An idle day of the whole stack, by the meter: all four functions on the template's schedules
//! (the sweep every quarter hour, the fan-out, the archiver and the worker's safety poll hourly;
//! the worker's stream signal never fires, nothing being enqueued), no tenant, no change row,
//! nothing queued. The first simulated day puts every state item in place; the second is counted.
use std::time::Duration;

use tickwork::budget::Unlimited;
use tickwork::changes::changes_table;
use tickwork::config::Env;
use tickwork::queue::{queue_table, Queue, QueueConfig};
use tickwork::tenants::tenants_table;
use tickwork_lambda::Tick;
use tickwork_tests::{unique, Local};

const DAY: i64 = 86_400_000;
const START: i64 = 1_795_910_400_000; // 2026-11-29T00:00Z

fn tick(ms: i64) -> Tick {
    Tick::parse(&Tick::envelope(ms, false)).unwrap()
}

/// The schedules and settings this test assumes, as the template has them.
#[test]
fn the_template_schedules_are_the_ones_counted() {
    let t = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml")).unwrap();
    for want in [
        "Schedule: cron(0/15 * * * ? *)",
        "TICKWORK_PULSE_INTERVAL_SECS: \"900\"",
        "TICKWORK_FANOUT_INTERVAL_SECS: \"3600\"",
        "TICKWORK_ARCHIVE_INTERVAL_SECS: \"3600\"",
        "TICKWORK_WORKER_INTERVAL_SECS: \"3600\"",
        "TICKWORK_ARCHIVE_PROBE_EVERY_SECS: \"86400\"",
        "Pattern: '{\"eventName\": [\"INSERT\"]}'",
    ] {
        assert!(t.contains(want), "template.yaml no longer has `{want}`");
    }
    assert_eq!(t.matches("Schedule: rate(1 hour)").count(), 3, "fan-out, archiver, worker safety poll");
    let shards = t.split("QueueShards:").nth(1).unwrap();
    assert!(shards.trim_start().starts_with("Type: Number\n    Default: 1\n"), "one queue shard by default");
}

/// The functions `template.yaml` deploys with the parameters `set` (`Fanout=false`): every
/// `AWS::Serverless::Function` whose `Condition`, when it has one, holds. Conditions are evaluated
/// as CloudFormation does for the forms the switches use (`!Equals [!Ref P, "v"]`, `!And`, `!Not`,
/// `!Condition`), from the parameters' defaults with `set` over them.
pub fn deployed_functions(set: &[&str]) -> std::collections::BTreeSet<String> {
    deployed_resources(set, "AWS::Serverless::Function")
}

/// The template's resources of one type that a deploy with these parameter overrides creates (a
/// resource whose `Condition` is false is left out), as CloudFormation evaluates the conditions.
pub fn deployed_resources(set: &[&str], kind: &str) -> std::collections::BTreeSet<String> {
    use serde_yaml_ng::Value;
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml")).unwrap();
    let t: Value = serde_yaml_ng::from_str(&text).unwrap();
    let untag = |v: &Value| -> (String, Value) {
        match v {
            Value::Tagged(tg) => (tg.tag.to_string(), tg.value.clone()),
            other => (String::new(), other.clone()),
        }
    };
    let param = |name: &str| -> String {
        set.iter()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")).map(str::to_string))
            .unwrap_or_else(|| t["Parameters"][name]["Default"].as_str().map(str::to_string).unwrap_or_default())
    };
    fn eval(
        v: &Value,
        t: &Value,
        untag: &dyn Fn(&Value) -> (String, Value),
        param: &dyn Fn(&str) -> String,
    ) -> Result<String, String> {
        let (tag, inner) = untag(v);
        let list = || inner.as_sequence().cloned().unwrap_or_default();
        Ok(match tag.as_str() {
            "!Ref" => param(inner.as_str().unwrap()),
            "!Equals" => {
                let l = list();
                (eval(&l[0], t, untag, param)? == eval(&l[1], t, untag, param)?).to_string()
            }
            "!Not" => (eval(&list()[0], t, untag, param)? != "true").to_string(),
            "!And" | "!Or" => {
                let held = list().iter().map(|c| eval(c, t, untag, param)).collect::<Result<Vec<_>, _>>()?;
                let held = held.iter().map(|c| c == "true");
                (if tag == "!And" { held.clone().all(|c| c) } else { held.clone().any(|c| c) }).to_string()
            }
            "!Condition" => eval(&t["Conditions"][inner.as_str().unwrap()], t, untag, param)?,
            "" => inner.as_str().map(str::to_string).ok_or_else(|| format!("{inner:?}"))?,
            other => return Err(format!("condition form {other} is not evaluated here")),
        })
    }
    let mut out = std::collections::BTreeSet::new();
    for (name, r) in t["Resources"].as_mapping().unwrap() {
        if r["Type"].as_str() != Some(kind) {
            continue;
        }
        let on = match r["Condition"].as_str() {
            None => true,
            Some(c) => eval(&t["Conditions"][c], &t, &untag, &param).unwrap() == "true",
        };
        if on {
            out.insert(name.as_str().unwrap().to_string());
        }
    }
    out
}

#[test]
fn the_switches_leave_out_their_functions_only() {
    let all = deployed_functions(&[]);
    let names =
        ["ArchiverFunction", "ControlFunction", "PulseSweepFunction", "QueueWorkerFunction", "TenantFanoutFunction"];
    assert_eq!(all, names.iter().map(|s| s.to_string()).collect());
    let off = deployed_functions(&["Fanout=false"]);
    assert_eq!(off, all.iter().filter(|f| *f != "TenantFanoutFunction").cloned().collect());
    let off = deployed_functions(&["Archiver=false", "Fanout=false"]);
    assert_eq!(off.len(), 3, "{off:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_day_of_the_whole_stack_is_at_most_200_requests() {
    let all = idle_day(&[]).await;
    // An idle sweep tick is one read; the fan-out's ticks are one read each but the one of its
    // day's window (empty here); the archiver probes its shards once a day; the worker's safety
    // poll is one Query. The bill prices these very figures.
    assert_eq!(all, tickctl::bill::IDLE_DAY_REQUESTS.to_vec(), "requests of an idle day, by function");
    assert!(all.iter().map(|(_, n)| n).sum::<u64>() <= 200, "an idle day: {all:?}");
}

/// A stack deployed with `Fanout=false` (the functions the template then deploys, and no other)
/// idles at fewer requests a day than the whole stack: the fan-out's hourly ticks are gone, and
/// nothing else reads more for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_fan_out_off_an_idle_day_is_fewer_requests() {
    let all = idle_day(&[]).await;
    let off = idle_day(&["Fanout=false"]).await;
    let total = |v: &[(&str, u64)]| v.iter().map(|(_, n)| n).sum::<u64>();
    println!("idle day: whole stack {} requests, fan-out off {}", total(&all), total(&off));
    assert!(total(&off) < total(&all), "{off:?} against {all:?}");
    let fanout = all.iter().find(|(f, _)| *f == "tenant-fanout").unwrap().1;
    assert_eq!(total(&off), total(&all) - fanout, "only the fan-out's requests go: {off:?} against {all:?}");
    assert!(!off.iter().any(|(f, _)| *f == "tenant-fanout"));
}

/// The second of two idle days of the functions the template deploys with `set`, by the meter:
/// requests by function, in the order of [`tickctl::bill::IDLE_DAY_REQUESTS`].
async fn idle_day(set: &[&str]) -> Vec<(&'static str, u64)> {
    let deployed = deployed_functions(set);
    let on = |f: &str| deployed.contains(f);
    let local = Local::new().await;
    local.clock.set(START);
    let control = local.control().await;
    let tenants = local.table(&tenants_table()).await;
    let queue = local.table(&queue_table()).await;
    let changes = local.table(&changes_table()).await;
    let bucket = unique("idle").to_lowercase();
    let s3 = archiver::s3_client(&local.sdk);
    s3.create_bucket().bucket(&bucket).send().await.unwrap();
    // The declared clock-skew bound.
    let skew = Duration::from_secs(1);

    let sweep_cfg = pulse_sweep::PulseConfig::from_env(
        &Env::from_pairs([("TICKWORK_PULSE_INTERVAL_SECS", "900"), ("TICKWORK_PULSE_LEASE_SECS", "600")]),
        skew,
    )
    .unwrap();
    let sweep_tables = pulse_sweep::Tables { control: control.clone(), tenants: tenants.clone(), queue: queue.clone() };
    let qcfg = QueueConfig { shards: 1, ..Default::default() };
    let sweep = pulse_sweep::Deps::new(local.fresh_db(), local.clock(), sweep_cfg, sweep_tables, 8, qcfg.clone())
        .resolve_shards()
        .await
        .expect("shard registry");

    let fan_cfg = tenant_fanout::FanoutConfig::from_env(
        &Env::from_pairs([("TICKWORK_FANOUT_INTERVAL_SECS", "3600"), ("TICKWORK_FANOUT_LEASE_SECS", "600")]),
        skew,
    )
    .unwrap();
    let fan_tables = tenant_fanout::Tables { control: control.clone(), tenants: tenants.clone(), queue: queue.clone() };
    let fanout = tenant_fanout::Deps::new(local.fresh_db(), local.clock(), fan_cfg, &fan_tables, 8, qcfg.clone())
        .resolve_shards()
        .await
        .expect("shard registry");

    let arch_cfg = archiver::ArchiverConfig::from_env(
        &Env::from_pairs([
            ("TICKWORK_ARCHIVE_BUCKET", bucket.as_str()),
            ("TICKWORK_ARCHIVE_INTERVAL_SECS", "3600"),
            ("TICKWORK_ARCHIVE_LEASE_SECS", "600"),
            ("TICKWORK_ARCHIVE_PROBE_EVERY_SECS", "86400"),
        ]),
        skew,
    )
    .unwrap();
    let arch = archiver::Deps::new(local.fresh_db(), s3, local.clock(), arch_cfg, &control, changes);

    let worker_db = local.fresh_db();
    let shards = tickwork::shard::ShardRegistry::new(worker_db.clone(), &control)
        .resolve("queue", 1)
        .await
        .expect("shard registry");
    let q = Queue::new(worker_db.clone(), &queue, qcfg, local.clock()).with_poll_shards(shards);
    let handlers = queue_worker::summary::registry(worker_db.clone(), &unique("summaries"), local.clock());
    let wcfg = queue_worker::WorkerConfig::default();

    let mut counted = [0u64; 4];
    for day in 0..2 {
        for m in [sweep.db.meter(), fanout.db.meter(), arch.db.meter(), worker_db.meter()] {
            m.reset();
        }
        for quarter in 0..96 {
            let t = START + day * DAY + quarter * 900_000;
            local.clock.set(t);
            assert!(on("PulseSweepFunction") && on("QueueWorkerFunction"), "{deployed:?}");
            pulse_sweep::run(&sweep, &tick(t), &Unlimited, "sweep").await.unwrap();
            if quarter % 4 == 0 {
                if on("TenantFanoutFunction") {
                    tenant_fanout::run(&fanout, &tick(t), &Unlimited, "fanout").await.unwrap();
                }
                if on("ArchiverFunction") {
                    archiver::run(&arch, &tick(t), &Unlimited, "archiver").await.unwrap();
                }
                queue_worker::drain(&q, &handlers, "worker", &Unlimited, &wcfg).await.unwrap();
            }
        }
        counted = [
            sweep.db.meter().total().requests,
            fanout.db.meter().total().requests,
            arch.db.meter().total().requests,
            worker_db.meter().total().requests,
        ];
        println!(
            "day {}: pulse sweep {}, tenant fan-out {}, archiver {}, queue worker {}: {} requests",
            day + 1,
            counted[0],
            counted[1],
            counted[2],
            counted[3],
            counted.iter().sum::<u64>()
        );
    }
    let by_function: Vec<(&'static str, u64)> = ["pulse-sweep", "tenant-fanout", "archiver", "queue-worker"]
        .into_iter()
        .zip(counted)
        .zip(["PulseSweepFunction", "TenantFanoutFunction", "ArchiverFunction", "QueueWorkerFunction"])
        .filter(|(_, logical)| on(logical))
        .map(|(f, _)| f)
        .collect();
    if on("ArchiverFunction") {
        let (_, rru, wru) = tickctl::bill::ARCHIVER_IDLE_DAY;
        let a = arch.db.meter().total();
        assert_eq!((a.rcu, a.wcu), (rru, wru), "the archiver's idle day in units");
    }
    by_function
}
