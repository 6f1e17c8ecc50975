//! `template.yaml` and the code's table definitions must never disagree: local tables are created
//! from the code, deployed ones from the template.

use std::collections::BTreeSet;

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
    untag(v).as_str().map(str::to_string).or_else(|| untag(v).as_bool().map(|b| b.to_string())).unwrap_or_default()
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
        assert!(
            !text.contains("'*'") && !text.contains("dynamodb:*") && !text.contains("dynamodb:Scan"),
            "{name:?}: no wildcards, no Scan"
        );
    }
}

/// Every `tickwork` metric the dashboard and the alarms read is one the functions emit (a typo
/// would chart or alarm on nothing, silently), and the dashboard body is JSON once substituted.
#[test]
fn dashboard_and_alarms_read_metrics_the_code_emits() {
    let t = template();
    let resources = t["Resources"].as_mapping().expect("Resources");
    let mut source = String::new();
    for krate in ["tickwork", "pulse-sweep", "queue-worker", "archiver", "tenant-fanout"] {
        let dir = format!("{}/../crates/{krate}/src", env!("CARGO_MANIFEST_DIR"));
        for f in std::fs::read_dir(&dir).expect("src dir") {
            source += &std::fs::read_to_string(f.expect("entry").path()).expect("source");
        }
    }
    let emitted = |name: &str| source.contains(&format!("\"{name}\""));
    let mut checked = 0;
    for (_, r) in resources {
        match s(&r["Type"]).as_str() {
            "AWS::CloudWatch::Dashboard" => {
                let sub = untag(&r["Properties"]["DashboardBody"]);
                let body = s(&sub[0]);
                // Replace ${...} with a plain word, as CloudFormation would with a value.
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
                        if namespace == "tickwork" {
                            assert!(emitted(&metric), "dashboard charts `{metric}`, which no function emits");
                            checked += 1;
                        }
                    }
                }
            }
            "AWS::CloudWatch::Alarm" if s(&r["Properties"]["Namespace"]) == "tickwork" => {
                let metric = s(&r["Properties"]["MetricName"]);
                assert!(emitted(&metric), "an alarm watches `{metric}`, which no function emits");
                checked += 1;
            }
            _ => {}
        }
    }
    assert!(checked >= 20, "only {checked} metric references found");
}
