//! `tickctl control-failures`: what the control function failed for good, from its on-failure
//! queue.
//!
//! Lambda writes an invocation record there for an asynchronous invocation that failed after its
//! retries (or grew too old), in the shape its documentation gives ("Capturing records of Lambda
//! asynchronous invocations", AWS Lambda Developer Guide): `timestamp`,
//! `requestContext.{condition, approximateInvokeCount}`, `requestPayload` (the event as the
//! function got it) and `responsePayload.{errorType, errorMessage}`. A refused event's message is
//! the refusal itself (`"on_refusal": "fail"`).
//!
//! SQS has no cursor: the listing receives with no visibility timeout (a message stays visible,
//! so a listing run again at once sees it too) and keeps each message once by its id, until two
//! long polls in a row bring nothing new or it has `--max`. SQS samples its servers, so a large
//! queue's listing is best effort; the count of its messages is SQS's own
//! (`ApproximateNumberOfMessages`).

use anyhow::{Context, Result};
use serde::Serialize;
use tickwork::config::Env;
use tickwork_lambda::Base;

use crate::render::{json, table};

/// One failed invocation, as shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// When Lambda gave up (RFC 3339).
    pub at: String,
    /// Why it gave up: `RetriesExhausted`, `EventAgeExceeded`.
    pub condition: String,
    /// Invocations made.
    pub attempts: u64,
    /// The request as the function got it.
    pub request: String,
    /// The error's type (`Refused`, `TableNotFound`, …).
    pub error_type: String,
    /// The error's message (a refusal's JSON for `Refused`).
    pub error: String,
}

/// A destination record read; one that is not one is shown as its text, never dropped. Pure.
pub fn failure(body: &str) -> Failure {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
        return Failure {
            at: String::new(),
            condition: "unreadable".into(),
            attempts: 0,
            request: body.to_string(),
            error_type: String::new(),
            error: "not a Lambda invocation record".into(),
        };
    };
    let s = |p: &str| v.pointer(p).and_then(|x| x.as_str()).unwrap_or_default().to_string();
    if v.get("requestContext").is_none() {
        // The rule's own dead letter: the event EventBridge could not deliver, its error in the
        // message's attributes (ERROR_CODE, ERROR_MESSAGE).
        return Failure {
            at: String::new(),
            condition: "undelivered by EventBridge".into(),
            attempts: 0,
            request: body.to_string(),
            error_type: String::new(),
            error: String::new(),
        };
    }
    Failure {
        at: s("/timestamp"),
        condition: s("/requestContext/condition"),
        attempts: v.pointer("/requestContext/approximateInvokeCount").and_then(|x| x.as_u64()).unwrap_or(0),
        request: v.get("requestPayload").map(|p| p.to_string()).unwrap_or_default(),
        error_type: s("/responsePayload/errorType"),
        error: s("/responsePayload/errorMessage"),
    }
}

pub async fn run(base: &Base, env: &Env, as_json: bool, max: usize) -> Result<()> {
    let url = env.get(tickwork::env::CONTROL_FAILURES_URL).with_context(|| {
        format!(
            "{} is not set: the stack's ControlFailuresQueueUrl output (make stack-env writes it)",
            tickwork::env::CONTROL_FAILURES_URL
        )
    })?;
    let sqs = aws_sdk_sqs::Client::new(&base.sdk);
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut idle = 0;
    while out.len() < max && idle < 2 {
        let got = sqs
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(10)
            .visibility_timeout(0)
            .message_attribute_names("All")
            .wait_time_seconds(1)
            .send()
            .await
            .with_context(|| format!("receiving from {url}"))?;
        let before = out.len();
        for m in got.messages() {
            if out.len() < max && seen.insert(m.message_id().unwrap_or_default().to_string()) {
                let mut f = failure(m.body().unwrap_or_default());
                let attr = |k: &str| {
                    m.message_attributes().and_then(|a| a.get(k)).and_then(|v| v.string_value()).map(str::to_string)
                };
                if let (Some(code), Some(message)) = (attr("ERROR_CODE"), attr("ERROR_MESSAGE")) {
                    (f.error_type, f.error) = (code, message);
                }
                out.push(f);
            }
        }
        idle = if out.len() == before { idle + 1 } else { 0 };
    }
    if as_json {
        return json(&out);
    }
    let mut t = table(&["at", "condition", "attempts", "error", "request"]);
    for f in &out {
        t.add_row(vec![
            f.at.clone(),
            f.condition.clone(),
            f.attempts.to_string(),
            format!("{}: {}", f.error_type, f.error),
            f.request.clone(),
        ]);
    }
    println!("{t}\n{} failed event(s)", out.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_destination_record_reads_as_lambda_documents_it_and_anything_else_is_kept_as_text() {
        let body = serde_json::json!({
            "version": "1.0",
            "timestamp": "2026-12-02T10:00:00.000Z",
            "requestContext": {"requestId": "r", "functionArn": "arn:f", "condition": "RetriesExhausted", "approximateInvokeCount": 3},
            "requestPayload": {"op": "tenants.add"},
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
            "responsePayload": {"errorType": "Refused", "errorMessage": "{\"type\":\"UnknownZone\"}"}
        })
        .to_string();
        let f = failure(&body);
        assert_eq!((f.condition.as_str(), f.attempts, f.error_type.as_str()), ("RetriesExhausted", 3, "Refused"));
        assert_eq!((f.at.as_str(), f.request.as_str()), ("2026-12-02T10:00:00.000Z", r#"{"op":"tenants.add"}"#));
        assert!(f.error.contains("UnknownZone"));
        let odd = failure("not json");
        assert_eq!((odd.condition.as_str(), odd.request.as_str()), ("unreadable", "not json"));
    }
}
