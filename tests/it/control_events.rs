//! The no-code path from a team's own events: the template's EventBridge rule turns a
//! `UserSignedUp` into a `tenants.add` through its input transformer, Lambda delivers it
//! asynchronously (at least once, retried on a function error), and what fails for good lands on
//! the on-failure queue, which `tickctl control-failures` lists. The transformer, the retries and
//! the destination record are applied here as EventBridge's and Lambda's documentation give them
//! (`tickwork_tests::eventbridge`, `lambda_standin::asynchronous`), to the real control binary
//! and the local DynamoDB and SQS servers.

use std::collections::BTreeMap;

use lambda_standin::asynchronous::{deliver, record, Delivered};
use serde_yaml_ng::Value as Yaml;
use tickwork_tests::eventbridge::transform;
use tickwork_tests::{unique, Local};

use crate::binary::{ok, tickctl, tickctl_command};
use crate::control::{everything, start};

/// A value of the template, a `!Ref` of a parameter resolved to the parameter's default.
fn resolved(t: &Yaml, v: &Yaml) -> String {
    match v {
        Yaml::Tagged(tag) if tag.tag == "!Ref" => {
            let name = tag.value.as_str().unwrap();
            t["Parameters"][name]["Default"].as_str().unwrap_or_else(|| panic!("no default for {name}")).to_string()
        }
        Yaml::Tagged(tag) => resolved(t, &tag.value),
        other => other.as_str().map(str::to_string).unwrap_or_else(|| serde_yaml_ng::to_string(other).unwrap()),
    }
}

/// The deployed rule's transformer (its paths and template, with the parameters' defaults) and
/// the control function's retries for an asynchronous invocation.
fn the_rule() -> (BTreeMap<String, String>, String, u32) {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml")).unwrap();
    let t: Yaml = serde_yaml_ng::from_str(&text).unwrap();
    let it = &t["Resources"]["ControlEventRule"]["Properties"]["Targets"][0]["InputTransformer"];
    let paths = it["InputPathsMap"]
        .as_mapping()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.as_str().unwrap().to_string(), resolved(&t, v)))
        .collect();
    let retries = t["Resources"]["ControlFunction"]["Properties"]["EventInvokeConfig"]["MaximumRetryAttempts"]
        .as_u64()
        .expect("the control function's retries are set in the template") as u32;
    (paths, resolved(&t, &it["InputTemplate"]), retries)
}

fn signup(id: serde_json::Value, zone: &str) -> serde_json::Value {
    serde_json::json!({
        "version": "0", "id": unique("ev"), "detail-type": "UserSignedUp", "source": "app.signup",
        "account": "123456789012", "time": "2026-12-02T10:00:00Z", "region": "us-east-1", "resources": [],
        "detail": {"tenant_id": id, "zone": zone, "plan": "pro"}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signup_delivered_twice_adds_its_tenant_once_and_a_refused_event_lands_on_the_failure_queue_with_its_reason()
{
    let local = Local::new().await;
    let p = unique("ctle");
    ok(&tickctl(&local, &p, &["provision"]));
    let stack = start(&local, &p).await;
    let (paths, template, retries) = the_rule();
    assert_eq!(retries, 2, "Lambda's default, said in the template");
    let sqs = aws_sdk_sqs::Client::new(&local.sdk);
    let url = sqs
        .create_queue()
        .queue_name(format!("{p}-control-failures"))
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_string();
    let arn = format!("arn:aws:lambda:us-east-1:123456789012:function:{p}-control");
    let event = |e: &serde_json::Value| {
        let input = transform(e, &paths, &template);
        let (function, sqs, url, arn) = (stack.function.clone(), sqs.clone(), url.clone(), arn.clone());
        async move {
            let d: Delivered = deliver(retries, || function.invoke(input.clone().into_bytes())).await;
            if d.failed() {
                let r = record(&arn, input.as_bytes(), &d, &jiff::Timestamp::now().to_string());
                sqs.send_message().queue_url(&url).message_body(r.to_string()).send().await.unwrap();
            }
            d
        }
    };
    let body = |d: &Delivered| serde_json::from_slice::<serde_json::Value>(&d.answer.body).unwrap();

    // At least once: the same event twice adds the tenant once.
    let e = signup("acme".into(), "Europe/Berlin");
    let (first, again) = (event(&e).await, event(&e).await);
    assert!(!first.failed() && !again.failed(), "{:?}", body(&first));
    assert_eq!((first.attempts, again.attempts), (1, 1));
    assert_eq!(body(&first)["result"]["entries"][0]["outcome"], "added");
    assert_eq!(body(&again)["result"]["entries"][0]["outcome"], "unchanged");
    let listed = ok(&tickctl(&local, &p, &["--json", "tenants", "list"]));
    assert_eq!(listed.lines().count(), 1, "one tenant: {listed}");
    assert!(listed.contains("\"acme\"") && listed.contains("Europe/Berlin"), "{listed}");

    // Refused events write nothing, fail (so Lambda retries them, then gives up) and are recorded.
    let before = everything(&local, &p).await;
    let unknown_zone = event(&signup("bob".into(), "Mars/Olympus_Mons")).await;
    let no_id = event(&signup(serde_json::Value::Null, "UTC")).await;
    assert!(unknown_zone.failed() && no_id.failed());
    assert_eq!((unknown_zone.attempts, no_id.attempts), (retries + 1, retries + 1));
    assert_eq!(everything(&local, &p).await, before, "a refused event writes nothing");

    let list = || {
        let out = tickctl_command(&local, &p)
            .env("AWS_ENDPOINT_URL_SQS", &local.endpoint)
            .env("TICKWORK_CONTROL_FAILURES_URL", &url)
            .args(["--json", "control-failures"])
            .output()
            .unwrap();
        serde_json::from_str::<serde_json::Value>(&ok(&out)).unwrap()
    };
    let failures = list();
    let failures = failures.as_array().unwrap();
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert_eq!(list().as_array().unwrap().len(), 2, "listing leaves them there, visible to the next listing");
    let reason = |needle: &str| {
        failures
            .iter()
            .find(|f| f["request"].as_str().unwrap().contains(needle))
            .unwrap_or_else(|| panic!("{needle}: {failures:?}"))
    };
    let zone = reason("Mars/Olympus_Mons");
    assert_eq!((zone["error_type"].as_str(), zone["attempts"].as_u64()), (Some("Refused"), Some(3)));
    let refusal: serde_json::Value = serde_json::from_str(zone["error"].as_str().unwrap()).unwrap();
    assert_eq!((refusal["type"].as_str(), refusal["field"].as_str()), (Some("UnknownZone"), Some("tenants[0].zone")));
    let id = reason("\"id\":null");
    let refusal: serde_json::Value = serde_json::from_str(id["error"].as_str().unwrap()).unwrap();
    assert_eq!((refusal["type"].as_str(), refusal["field"].as_str()), (Some("InvalidField"), Some("tenants[0].id")));
}
