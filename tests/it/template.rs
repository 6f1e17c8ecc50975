//! `template.yaml` and the code's table definitions must never disagree: local tables are created
//! from the code, deployed ones from the template.

use std::collections::{BTreeMap, BTreeSet};

use serde_yaml_ng::Value;
use tickwork::capacity::Projection;
use tickwork::schema::{KeyAttr, ScalarType, TableDef};

fn template() -> Value {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml")).expect("template.yaml");
    serde_yaml_ng::from_str(&text).expect("template.yaml parses")
}

fn untag(v: &Value) -> &Value {
    match v {
        Value::Tagged(t) => &t.value,
        other => other,
    }
}

fn s(v: &Value) -> String {
    let v = untag(v);
    v.as_str()
        .map(str::to_string)
        .or_else(|| v.as_bool().map(|b| b.to_string()))
        .or_else(|| v.as_u64().map(|n| n.to_string()))
        .or_else(|| v.as_i64().map(|n| n.to_string()))
        .unwrap_or_default()
}

fn keys(schema: &Value) -> (String, Option<String>) {
    let mut hash = String::new();
    let mut range = None;
    for k in schema.as_sequence().expect("KeySchema list") {
        match s(&k["KeyType"]).as_str() {
            "HASH" => hash = s(&k["AttributeName"]),
            "RANGE" => range = Some(s(&k["AttributeName"])),
            other => panic!("key type {other}"),
        }
    }
    (hash, range)
}

fn ty(k: &KeyAttr) -> &'static str {
    match k.ty {
        ScalarType::S => "S",
        ScalarType::N => "N",
    }
}

fn find<'a>(resources: &'a serde_yaml_ng::Mapping, logical: &str) -> &'a Value {
    let want = format!("${{AWS::StackName}}-{logical}");
    resources
        .values()
        .find(|r| s(&r["Type"]) == "AWS::DynamoDB::Table" && s(&r["Properties"]["TableName"]) == want)
        .unwrap_or_else(|| panic!("template.yaml has no table `{want}`"))
}

fn check(def: &TableDef, props: &Value) {
    let name = def.logical;
    assert_eq!(s(&props["BillingMode"]), "PAY_PER_REQUEST", "{name}: on-demand");
    assert_eq!(s(&props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"]), "true", "{name}: PITR");
    assert_eq!(
        keys(&props["KeySchema"]),
        (def.pk.name.to_string(), def.sk.as_ref().map(|k| k.name.to_string())),
        "{name}: key"
    );
    // Attribute definitions: exactly the key attributes of the table and its indexes, with types.
    let mut want: BTreeSet<(String, String)> = BTreeSet::new();
    let mut add = |k: &KeyAttr| {
        want.insert((k.name.to_string(), ty(k).to_string()));
    };
    add(&def.pk);
    def.sk.iter().for_each(&mut add);
    for g in &def.gsis {
        add(&g.pk);
        g.sk.iter().for_each(&mut add);
    }
    let got: BTreeSet<(String, String)> = props["AttributeDefinitions"]
        .as_sequence()
        .expect("AttributeDefinitions")
        .iter()
        .map(|a| (s(&a["AttributeName"]), s(&a["AttributeType"])))
        .collect();
    assert_eq!(got, want, "{name}: attribute definitions");
    // GSIs: names, keys, projections.
    let gsis = props["GlobalSecondaryIndexes"].as_sequence().cloned().unwrap_or_default();
    assert_eq!(gsis.len(), def.gsis.len(), "{name}: GSI count");
    for g in &def.gsis {
        let t = gsis
            .iter()
            .find(|x| s(&x["IndexName"]) == g.name)
            .unwrap_or_else(|| panic!("{name}: GSI {} missing", g.name));
        assert_eq!(
            keys(&t["KeySchema"]),
            (g.pk.name.to_string(), g.sk.as_ref().map(|k| k.name.to_string())),
            "{name}.{}",
            g.name
        );
        let p = &t["Projection"];
        match &g.projection {
            Projection::All => assert_eq!(s(&p["ProjectionType"]), "ALL", "{name}.{}", g.name),
            Projection::KeysOnly => assert_eq!(s(&p["ProjectionType"]), "KEYS_ONLY", "{name}.{}", g.name),
            Projection::Include(attrs) => {
                assert_eq!(s(&p["ProjectionType"]), "INCLUDE", "{name}.{}", g.name);
                let got: BTreeSet<String> = p["NonKeyAttributes"].as_sequence().unwrap().iter().map(s).collect();
                assert_eq!(got, attrs.iter().cloned().collect(), "{name}.{} projected attributes", g.name);
            }
        }
    }
    // TTL.
    match def.ttl {
        Some(attr) => {
            assert_eq!(s(&props["TimeToLiveSpecification"]["AttributeName"]), attr, "{name}: TTL attribute");
            assert_eq!(s(&props["TimeToLiveSpecification"]["Enabled"]), "true", "{name}: TTL enabled");
        }
        None => assert!(props.get("TimeToLiveSpecification").is_none(), "{name}: no TTL in code, none in the template"),
    }
}

#[test]
fn template_tables_match_the_code() {
    let t = template();
    let resources = t["Resources"].as_mapping().expect("Resources");
    let defs = tickctl::all_tables();
    for def in &defs {
        check(def, &find(resources, def.logical)["Properties"]);
    }
    let tables = resources.values().filter(|r| s(&r["Type"]) == "AWS::DynamoDB::Table").count();
    assert_eq!(tables, defs.len(), "every template table is declared in code");
}

#[test]
fn every_function_has_a_sample_event_and_a_scoped_policy() {
    let t = template();
    let resources = t["Resources"].as_mapping().unwrap();
    for (name, r) in resources {
        if s(&r["Type"]) != "AWS::Serverless::Function" {
            continue;
        }
        let code = s(&r["Properties"]["CodeUri"]);
        let function = code.trim_start_matches("crates/");
        let event = format!("{}/../events/{function}.json", env!("CARGO_MANIFEST_DIR"));
        assert!(std::path::Path::new(&event).exists(), "{name:?}: no sample event {event}");
        assert_eq!(s(&r["Metadata"]["BuildMethod"]), "rust-cargolambda", "{name:?}");
        let text = serde_yaml_ng::to_string(&r["Properties"]["Policies"]).unwrap();
        assert!(!text.contains("'*'") && !text.contains("dynamodb:*"), "{name:?}: no wildcards");
        // No function scans, but the control function's `tenants.list`: a caller's own page of
        // the whole tenants table, one page an invocation (the by-shard index holds only active
        // tenants), never on a tick's path.
        let scans = text.matches("dynamodb:Scan").count();
        let allowed = usize::from(s(name) == "ControlFunction");
        assert_eq!(scans, allowed, "{name:?}: Scan only in the control function's tenants statement");
    }
}

/// Every custom metric the dashboard and the alarms read is one of the closed set the code emits
/// ([`tickwork::meter::METRICS`]), in the stack's own namespace (a typo would chart or alarm on
/// nothing, silently; another stack's namespace would mix two stacks' alarms), and the dashboard
/// body is JSON once substituted.
#[test]
fn dashboard_and_alarms_read_metrics_the_code_emits() {
    let t = template();
    let resources = t["Resources"].as_mapping().expect("Resources");
    let mut source = String::new();
    for krate in ["pulse-sweep", "queue-worker", "archiver", "tenant-fanout", "tickwork-lambda"] {
        let dir = format!("{}/../crates/{krate}/src", env!("CARGO_MANIFEST_DIR"));
        for f in std::fs::read_dir(&dir).expect("src dir") {
            let path = f.expect("entry").path();
            // A module of its own directory (`targets/`) emits no metric line.
            if path.is_file() {
                source += &std::fs::read_to_string(path).expect("source");
            }
        }
    }
    // A metric is emitted when a report's `metrics()` names it (`("GroupsDue", ...)`).
    let emitted = |name: &str| tickwork::meter::METRICS.contains(&name) && source.contains(&format!("(\"{name}\","));
    let ours = "tickwork/${AWS::StackName}";
    let mut checked = 0;
    for (_, r) in resources {
        match s(&r["Type"]).as_str() {
            "AWS::CloudWatch::Dashboard" => {
                let sub = untag(&r["Properties"]["DashboardBody"]);
                let body = s(&sub[0]).replace("${Namespace}", "tickwork/stack");
                // Replace the other ${...} with a plain word, as CloudFormation would with a value.
                let mut plain = String::new();
                let mut rest = body.as_str();
                while let Some(i) = rest.find("${") {
                    plain += &rest[..i];
                    let j = rest[i..].find('}').expect("closing brace") + i;
                    plain += "x";
                    rest = &rest[j + 1..];
                }
                plain += rest;
                let v: serde_json::Value = serde_json::from_str(&plain).expect("dashboard body is JSON");
                for w in v["widgets"].as_array().expect("widgets") {
                    let mut namespace = String::new();
                    let mut metric = String::new();
                    for m in w["properties"]["metrics"].as_array().expect("metrics") {
                        let m = m.as_array().expect("metric row");
                        if m[0] != "..." {
                            if m[0] != "." {
                                namespace = m[0].as_str().unwrap().to_string();
                            }
                            if m[1] != "." {
                                metric = m[1].as_str().unwrap().to_string();
                            }
                        }
                        assert!(
                            namespace.starts_with("AWS/") || namespace == "tickwork/stack",
                            "dashboard reads namespace `{namespace}`"
                        );
                        if namespace == "tickwork/stack" {
                            assert!(emitted(&metric), "dashboard charts `{metric}`, which no function emits");
                            checked += 1;
                        }
                    }
                }
            }
            "AWS::CloudWatch::Alarm" => {
                let ns = s(&r["Properties"]["Namespace"]);
                if ns.starts_with("AWS/") || r["Properties"].get("Metrics").is_some() {
                    continue;
                }
                assert_eq!(ns, ours, "custom metrics live in the stack's namespace");
                let metric = s(&r["Properties"]["MetricName"]);
                assert!(emitted(&metric), "an alarm watches `{metric}`, which no function emits");
                checked += 1;
            }
            _ => {}
        }
    }
    assert!(checked >= 9, "only {checked} metric references found");
}

/// The template's parameter defaults and literals, resolved as CloudFormation would for a stack
/// named `stack` (enough for the settings the functions read).
fn resolve(v: &Value, params: &serde_yaml_ng::Mapping) -> String {
    let sub = |text: &str| {
        let mut out = text.replace("${AWS::StackName}", "stack");
        for (k, p) in params {
            out = out.replace(&format!("${{{}}}", s(k)), &s(&p["Default"]));
        }
        out
    };
    match v {
        Value::Tagged(t) if t.tag == "!Ref" => {
            let name = s(&t.value);
            match params.get(name.as_str()) {
                Some(p) => s(&p["Default"]),
                None if name == "AWS::StackName" => "stack".into(),
                None => format!("{}-resource", name.to_lowercase()),
            }
        }
        Value::Tagged(t) if t.tag == "!Sub" => sub(&s(&t.value)),
        Value::Number(n) => n.to_string(),
        other => s(other),
    }
}

/// Each function's environment as deployed: the Globals' variables, then its own.
fn function_env(t: &Value, function: &Value) -> Vec<(String, String)> {
    let params = t["Parameters"].as_mapping().unwrap();
    let mut vars = Vec::new();
    for source in
        [&t["Globals"]["Function"]["Environment"]["Variables"], &function["Properties"]["Environment"]["Variables"]]
    {
        for (k, v) in source.as_mapping().into_iter().flatten() {
            vars.retain(|(name, _): &(String, String)| name != &s(k));
            vars.push((s(k), resolve(v, params)));
        }
    }
    vars.push(("AWS_REGION".into(), "us-east-1".into()));
    vars
}

/// `rate(N minute[s])`, or `cron(0/N * * * ? *)` (every N minutes on the hour's multiples of N) →
/// seconds between firings.
fn rate_secs(expr: &str) -> u64 {
    if let Some(c) = expr.trim().strip_prefix("cron(0/").and_then(|r| r.strip_suffix(" * * * ? *)")) {
        let n: u64 = c.parse().expect("cron(0/N * * * ? *)");
        assert_eq!(60 % n, 0, "every {n} minutes divides the hour");
        return n * 60;
    }
    let inner = expr.trim().strip_prefix("rate(").and_then(|r| r.strip_suffix(')')).expect("a rate() expression");
    let (n, unit) = inner.split_once(' ').expect("`rate(N unit)`");
    let n: u64 = n.parse().expect("a number");
    n * match unit.trim_end_matches('s') {
        "minute" => 60,
        "hour" => 3600,
        "day" => 86_400,
        other => panic!("unit {other}"),
    }
}

/// Per function, template and code agree: `Timeout` < lease TTL < the interval its schedule fires
/// at, the declared timeout equals `Timeout`, the asynchronous event age is one interval, the
/// template sets the interval and lease itself (the code's defaults, made for one-minute local
/// runs, do not reach a deployment), and the function's whole configuration, as the template sets
/// it, is accepted at start-up.
#[test]
fn template_and_code_settings_agree() {
    use std::time::Duration;
    let t = template();
    let resources = t["Resources"].as_mapping().unwrap();
    let fn_of = |name: &str| resources.get(name).unwrap_or_else(|| panic!("no {name}"));
    let mut checked = 0;
    for (name, interval_var, lease_var) in [
        ("PulseSweepFunction", Some("TICKWORK_PULSE_INTERVAL_SECS"), Some("TICKWORK_PULSE_LEASE_SECS")),
        ("TenantFanoutFunction", Some("TICKWORK_FANOUT_INTERVAL_SECS"), Some("TICKWORK_FANOUT_LEASE_SECS")),
        ("ArchiverFunction", Some("TICKWORK_ARCHIVE_INTERVAL_SECS"), Some("TICKWORK_ARCHIVE_LEASE_SECS")),
        ("QueueWorkerFunction", Some("TICKWORK_WORKER_INTERVAL_SECS"), None),
    ] {
        let f = fn_of(name);
        let props = &f["Properties"];
        let timeout: u64 = s(&props["Timeout"]).parse().expect("Timeout");
        let env = function_env(&t, f);
        let get = |var: &str| env.iter().find(|(k, _)| k == var).map(|(_, v)| v.clone());
        let schedule = props["Events"]
            .as_mapping()
            .unwrap()
            .values()
            .find(|e| s(&e["Type"]) == "Schedule")
            .unwrap_or_else(|| panic!("{name}: no schedule"));
        let rate = rate_secs(&s(&schedule["Properties"]["Schedule"]));
        let interval: u64 = get(interval_var.unwrap()).expect("interval variable").parse().unwrap();
        assert_eq!(interval, rate, "{name}: the interval the code guards with is the schedule's");
        assert_eq!(get("TICKWORK_FUNCTION_TIMEOUT_SECS"), Some(timeout.to_string()), "{name}: declared timeout");
        if name == "PulseSweepFunction" {
            assert_eq!(timeout, pulse_sweep::config::DEPLOYED_TIMEOUT_SECS, "what tickctl cost models a boundary with");
        }
        assert_eq!(
            s(&props["EventInvokeConfig"]["MaximumEventAgeInSeconds"]),
            interval.to_string(),
            "{name}: event age"
        );
        assert_eq!(s(&props["EventInvokeConfig"]["MaximumRetryAttempts"]), "0", "{name}: the next tick retries");
        if let Some(lease_var) = lease_var {
            let lease: u64 = get(lease_var).expect("lease variable").parse().unwrap();
            assert!(
                timeout < lease && lease < interval,
                "{name}: Timeout {timeout} < lease {lease} < interval {interval}"
            );
        }
        // The whole configuration, as deployed, is accepted at start-up.
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let e = tickwork::config::Env::from_pairs(pairs);
        let core = tickwork::config::CoreConfig::from_env(&e).expect("core settings");
        assert_eq!(core.function_timeout, Some(Duration::from_secs(timeout)));
        assert_eq!(core.metrics_namespace, "tickwork/stack");
        let accepted = match name {
            "PulseSweepFunction" => pulse_sweep::PulseConfig::from_core(&e, &core).map(|_| ()),
            "TenantFanoutFunction" => tenant_fanout::FanoutConfig::from_core(&e, &core).map(|_| ()),
            "ArchiverFunction" => archiver::ArchiverConfig::from_core(&e, &core).map(|_| ()),
            _ => tickwork::queue::QueueConfig::from_env(&e)
                .and_then(|q| queue_worker::WorkerConfig::from_core(&e, &core, &q).map(|_| ()))
                .and_then(|()| queue_worker::targets::function::function_batch(&e).map(|_| ())),
        };
        accepted.unwrap_or_else(|err| panic!("{name}: the template's settings are refused: {err}"));
        checked += 1;
    }
    assert_eq!(checked, 4);
    // The code's defaults are what a deployment without the template's values would run with.
    let d = pulse_sweep::PulseConfig::from_env(&tickwork::config::Env::from_pairs([]), Duration::from_secs(1)).unwrap();
    assert_eq!((d.lease.interval, d.lease.ttl), (Duration::from_secs(60), Duration::from_secs(50)));
    let d =
        tenant_fanout::FanoutConfig::from_env(&tickwork::config::Env::from_pairs([]), Duration::from_secs(1)).unwrap();
    assert_eq!((d.lease.interval, d.lease.ttl), (Duration::from_secs(300), Duration::from_secs(290)));
}

/// The delivery model's picture of the worker ([`tickctl::delivery::TEMPLATE_WORKER`]) is the
/// template's: its timeout, its handler calls at once, its drains.
#[test]
fn the_delivery_model_prices_the_worker_the_template_deploys() {
    let t = template();
    let (timeout, concurrency, drains) = tickctl::delivery::TEMPLATE_WORKER;
    let w = &t["Resources"]["QueueWorkerFunction"]["Properties"];
    assert_eq!(s(&w["Timeout"]), timeout.to_string());
    let env = function_env(&t, &t["Resources"]["QueueWorkerFunction"]);
    let get = |var: &str| env.iter().find(|(k, _)| k == var).map(|(_, v)| v.clone());
    assert_eq!(get("TICKWORK_WORKER_CONCURRENCY").as_deref(), Some(concurrency));
    assert_eq!(get("TICKWORK_WORKER_DRAINS").as_deref(), Some(drains), "WorkerConcurrency's default");
    assert_eq!(s(&t["Parameters"]["WorkerConcurrency"]["Default"]), drains);
}

/// The bill's picture of the stack ([`tickctl::bill::Stack::default`]) is the template's: every
/// alarm priced (the single-metric ones always deployed; the metric-math throttle alarms behind
/// `ThrottleAlarms`, off by default, each reading its metrics), the functions' memory, the log
/// retention, the dashboard off by default.
#[test]
fn the_bill_prices_the_stack_the_template_deploys() {
    let t = template();
    let stack = tickctl::bill::Stack::default();
    let params = &t["Parameters"];
    let (mut single, mut math, mut math_metrics) = (0u32, 0u32, BTreeSet::new());
    for (name, r) in t["Resources"].as_mapping().unwrap() {
        if s(&r["Type"]) != "AWS::CloudWatch::Alarm" {
            continue;
        }
        match r["Properties"].get("Metrics") {
            None => {
                // Behind no condition, or an optional part's (deployed by default, as the bill's
                // default stack has it).
                let c = s(&r["Condition"]);
                assert!(
                    ["", "HasFanout", "HasArchiver"].contains(&c.as_str()),
                    "{}: a single-metric alarm behind {c}",
                    s(name)
                );
                single += 1;
            }
            Some(m) => {
                let c = s(&r["Condition"]);
                assert!(["HasThrottleAlarms", "ThrottleAlarmsOnArchiver"].contains(&c.as_str()), "{}: {c}", s(name));
                math += 1;
                let read = m.as_sequence().unwrap().iter().filter(|q| q.get("MetricStat").is_some()).count();
                math_metrics.insert(read as u32);
            }
        }
    }
    assert_eq!(single, stack.single_metric_alarms, "single-metric alarms");
    assert_eq!(s(&params["ThrottleAlarms"]["Default"]), "false");
    assert_eq!(stack.math_alarms.0, 0, "no metric-math alarm by default");
    assert_eq!((math, math_metrics.into_iter().collect::<Vec<_>>()), (10, vec![stack.math_alarms.1]));
    assert_eq!(s(&t["Globals"]["Function"]["MemorySize"]), stack.memory_mb.to_string());
    assert_eq!(s(&params["LogRetentionDays"]["Default"]), stack.log_retention_days.to_string());
    assert_eq!(s(&params["CreateDashboard"]["Default"]) == "true", stack.dashboard);
}

/// `samconfig.toml`'s environments deploy this template: every parameter they override exists,
/// `dev` is a dry run, and each names its own stack (`make deploy ENV=...`).
#[test]
fn samconfig_environments_name_parameters_the_template_has() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cfg: toml::Table = std::fs::read_to_string(root.join("samconfig.toml")).unwrap().parse().unwrap();
    let t = template();
    let params = t["Parameters"].as_mapping().unwrap();
    let mut stacks = std::collections::BTreeSet::new();
    for env in ["dev", "prod"] {
        let deploy = &cfg[env]["deploy"]["parameters"];
        assert!(stacks.insert(deploy["stack_name"].as_str().unwrap().to_string()), "{env}: a stack of its own");
        let overrides = deploy["parameter_overrides"].as_str().unwrap();
        let mut set = BTreeMap::new();
        for pair in overrides.split_whitespace() {
            let (k, v) = pair.split_once('=').unwrap_or_else(|| panic!("{env}: `{pair}` is not Name=value"));
            let p = params.get(k).unwrap_or_else(|| panic!("{env}: no parameter `{k}` in template.yaml"));
            let v = v.trim_matches('"');
            if let Some(allowed) = p.get("AllowedValues").and_then(|a| a.as_sequence()) {
                assert!(allowed.iter().any(|a| s(a) == v), "{env}: {k}={v} is not one of {allowed:?}");
            }
            set.insert(k.to_string(), v.to_string());
        }
        assert_eq!(set.get("DryRun").map(String::as_str), Some(if env == "dev" { "true" } else { "false" }), "{env}");
        assert!(deploy["capabilities"].as_str().unwrap().contains("CAPABILITY_IAM"), "{env}: the template makes roles");
    }
}

/// `make stack-env` turns the stack's outputs into the variables the functions get: run on the
/// outputs this template declares (a stand-in for `sam list stack-outputs`), it writes each one,
/// every name a declared setting; an output missing from the template fails it, naming it.
#[test]
fn stack_env_writes_the_functions_settings_from_the_template_outputs() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let t = template();
    let outputs: Vec<String> = t["Outputs"].as_mapping().unwrap().keys().map(s).collect();
    let dir = std::env::temp_dir().join(tickwork_tests::unique("stackenv"));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |keys: &[&String]| {
        let list: Vec<serde_json::Value> =
            keys.iter().map(|k| serde_json::json!({"OutputKey": k, "OutputValue": format!("v-{k}")})).collect();
        let fake = dir.join("sam");
        std::fs::write(&fake, format!("#!/bin/sh\necho '{}'\n", serde_json::Value::Array(list))).unwrap();
        std::process::Command::new("chmod").arg("+x").arg(&fake).status().unwrap();
        std::process::Command::new(root.join("scripts/stack-env.sh"))
            .arg(&fake)
            .arg("demo-stack")
            .env("TICKWORK_STACKS_DIR", &dir)
            .current_dir(&root)
            .output()
            .unwrap()
    };
    let o = run(&outputs.iter().collect::<Vec<_>>());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(dir.join("demo-stack.env")).unwrap();
    let declared: Vec<&str> = tickwork::env::VARS.iter().map(|v| v.name).collect();
    let vars: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).map(|l| l.split('=').next().unwrap()).collect();
    assert!(vars.contains(&"TICKWORK_TABLE_PREFIX") && vars.contains(&"TICKWORK_TENANT_SHARDS"), "{text}");
    for v in &vars {
        assert!(declared.contains(v) || *v == "AWS_REGION", "`{v}` is not a setting tickctl reads");
    }
    // Each variable from the output that holds it.
    for (var, output) in [
        ("TICKWORK_TABLE_PREFIX", "TablePrefix"),
        ("TICKWORK_TENANT_SHARDS", "TenantShards"),
        ("TICKWORK_QUEUE_SHARDS", "QueueShards"),
        ("TICKWORK_CHANGE_SHARDS", "ChangeShards"),
        ("TICKWORK_ARCHIVE_BUCKET", "ArchiveBucketName"),
        ("AWS_REGION", "Region"),
    ] {
        assert!(text.lines().any(|l| l == format!("{var}=v-{output}")), "{var} from {output}: {text}");
    }
    for (var, output) in [("TICKWORK_STACK_PARTS", "Parts"), ("TICKWORK_STACK_VERSION", "Version")] {
        assert!(text.lines().any(|l| l == format!("{var}=v-{output}")), "{var} from {output}: {text}");
    }
    let without: Vec<&String> = outputs.iter().filter(|k| *k != "QueueShards").collect();
    let o = run(&without);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("QueueShards"));
}

/// The stack says which release it is: the `Version` output is the workspace's version and the
/// time zone database its functions decide with, as `tickctl status` and the release notes show.
/// The control function is updated after the sweep, so that nothing it writes is newer than
/// what the sweep reads (a definition the sweep cannot read is set aside until repaired).
#[test]
fn the_control_function_is_updated_after_the_sweep() {
    let t = template();
    assert_eq!(s(&t["Resources"]["ControlFunction"]["DependsOn"]), "PulseSweepFunction");
}

#[test]
fn the_version_output_is_the_release_and_its_time_zone_database() {
    let t = template();
    let want = format!("{}+tzdb.{}", tickwork::release::VERSION, tickwork::release::tzdb());
    assert_eq!(s(&t["Outputs"]["Version"]["Value"]), want, "template.yaml's Version output");
}

/// The combinations of the optional parts a team deploys. Each is linted as CloudFormation would
/// resolve it: a resource left in that references one switched off fails cfn-lint (W1001, "Ref to
/// resource that may not be available"), as it would fail the deploy.
pub const COMBINATIONS: [&[&str]; 4] = [
    &[],
    &["Fanout=false"],
    &["Archiver=false"],
    &["Fanout=false", "Archiver=false", "PulseGrains=day", "ThrottleAlarms=true", "CreateDashboard=true"],
];

/// The template with each parameter of `set` given as its default: what checkov (which reads
/// defaults, not deployment values) sees of that deployment. Pure on the text.
pub fn with_defaults(template: &str, set: &[&str]) -> String {
    let mut out = String::new();
    let mut current: Option<String> = None;
    let mut in_params = false;
    for line in template.lines() {
        if !line.starts_with(' ') && !line.is_empty() {
            in_params = line == "Parameters:";
            current = None;
        }
        if in_params && line.starts_with("  ") && !line.starts_with("   ") {
            current = Some(line.trim().trim_end_matches(':').to_string());
        }
        let over = current.as_deref().and_then(|p| set.iter().find_map(|kv| kv.strip_prefix(&format!("{p}="))));
        match over {
            Some(v) if line.trim_start().starts_with("Default:") => out.push_str(&format!("    Default: \"{v}\"\n")),
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

#[test]
fn a_parameter_given_as_its_default_changes_that_line_only() {
    let text = "Parameters:\n  Fanout:\n    Type: String\n    Default: \"true\"\n  Other:\n    Default: x\nResources:\n  Fanout:\n    Default: y\n";
    let got = with_defaults(text, &["Fanout=false"]);
    assert_eq!(got, text.replacen("Default: \"true\"", "Default: \"false\"", 1));
}

/// cfn-lint (the SAM CLI's, which `sam validate --lint` runs) and checkov hold for every
/// combination of parts the docs offer: the fan-out off, the archiver off, one grain.
#[test]
fn the_template_lints_clean_with_each_part_switched_off() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cfn_lint = root.join(".tools/sam/bin/cfn-lint");
    let checkov = root.join(".tools/checkov/bin/checkov");
    for tool in [&cfn_lint, &checkov] {
        assert!(tool.exists(), "{} is missing: `make test` installs it (make lint)", tool.display());
    }
    let text = std::fs::read_to_string(root.join("template.yaml")).unwrap();
    let dir = std::env::temp_dir().join(tickwork_tests::unique("combos"));
    std::fs::create_dir_all(&dir).unwrap();
    for set in COMBINATIONS.iter().skip(1) {
        let mut cmd = std::process::Command::new(&cfn_lint);
        cmd.arg("template.yaml").current_dir(&root);
        if !set.is_empty() {
            cmd.arg("--parameters").args(set.iter());
        }
        let o = cmd.output().unwrap();
        assert!(
            o.status.success(),
            "cfn-lint with {set:?}:\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let copy = dir.join(format!("template-{}.yaml", set.join("-").replace(['=', ','], "_")));
        std::fs::write(&copy, with_defaults(&text, set)).unwrap();
        let o = std::process::Command::new(&checkov)
            .args(["--framework", "cloudformation", "--compact", "--quiet", "--skip-download", "-f"])
            .arg(&copy)
            .output()
            .unwrap();
        assert!(o.status.success(), "checkov with {set:?}:\n{}", String::from_utf8_lossy(&o.stdout));
    }
}

/// The deploy names the concurrency a function target needs: the worker's drains times its
/// handler calls at once, the figure the template deploys (`TICKWORK_WORKER_CONCURRENCY`), since
/// below it the target throttles and its units wait (docs/targets.md).
#[test]
fn the_deploy_output_names_the_concurrency_a_function_target_needs() {
    let t = template();
    let out = &t["Outputs"]["FunctionTargetConcurrency"];
    assert_eq!(s(&out["Condition"]), "HasFunctionTarget");
    let worker = &t["Resources"]["QueueWorkerFunction"];
    let env = function_env(&t, worker);
    let calls = env.iter().find(|(k, _)| k == "TICKWORK_WORKER_CONCURRENCY").map(|(_, v)| v.clone()).unwrap();
    let text = s(&out["Value"]);
    assert!(
        text.contains("${WorkerConcurrency} drains x ") && text.contains(&format!(" {calls} handler calls")),
        "{text}"
    );
}

/// The sweep's `ScheduleWrites` mapping is what keeps schedule writers off the state item
/// (`tickwork::schedules::lowering`): the control table streams new images (the filter reads the
/// record's mark), the mapping passes writers' inserts alone with the filter the code and the
/// stand-in use, reads from the stream's start, and never drops a batch (a dropped one could
/// leave a record unfired while `sched_next` stays later: Lambda's defaults for a stream are to
/// retry until the records expire, stated here so no edit turns them off unseen).
#[test]
fn the_schedule_writes_mapping_loses_no_insert() {
    let t = template();
    let res = t["Resources"].as_mapping().unwrap();
    let control = find(res, "control");
    assert_eq!(s(&control["Properties"]["StreamSpecification"]["StreamViewType"]), "NEW_IMAGE");
    assert_eq!(tickwork::schema::control_table().stream, Some("NEW_IMAGE"), "the local tables have the same stream");
    let sweep = &res[&Value::from("PulseSweepFunction")];
    let m = &sweep["Properties"]["Events"]["ScheduleWrites"];
    assert_eq!(s(&m["Type"]), "DynamoDB");
    let p = &m["Properties"];
    assert!(serde_yaml_ng::to_string(&p["Stream"]).unwrap().contains("ControlTable.StreamArn"), "{:?}", p["Stream"]);
    assert_eq!(s(&p["StartingPosition"]), "TRIM_HORIZON");
    assert_eq!((s(&p["MaximumRetryAttempts"]), s(&p["MaximumRecordAgeInSeconds"])), ("-1".into(), "-1".into()));
    let filters = p["FilterCriteria"]["Filters"].as_sequence().unwrap();
    assert_eq!(filters.len(), 1);
    assert_eq!(s(&filters[0]["Pattern"]), pulse_sweep::lowering::FILTER);
}
