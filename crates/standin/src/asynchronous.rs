//! Lambda's asynchronous invocation, as its documentation gives it ("Asynchronous invocation"
//! and "Capturing records of Lambda asynchronous invocations", AWS Lambda Developer Guide): an
//! event whose invocation fails (a function error) is tried again up to `MaximumRetryAttempts`
//! times (two by default), and one that still fails goes to the on-failure destination as an
//! invocation record naming the condition, the attempts, the request and the function's error.
//!
//! Lambda waits a minute before the first retry and two before the second; the stand-in retries
//! at once (what it proves is what happens, not when). What the caller does with the record (an
//! SQS queue, here the local server's) is its own.

use serde_json::{json, Value};

use crate::invoke::Answer;

/// How an event's invocations ended.
#[derive(Debug, Clone)]
pub struct Delivered {
    /// Invocations made (1 + the retries used).
    pub attempts: u32,
    /// The last answer.
    pub answer: Answer,
}

impl Delivered {
    /// It failed every attempt: Lambda writes [`record`] to the on-failure destination.
    pub fn failed(&self) -> bool {
        self.answer.function_error.is_some()
    }
}

/// Invokes through `invoke` until an attempt succeeds or `retries` retries are spent.
pub async fn deliver<F, Fut>(retries: u32, mut invoke: F) -> Delivered
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Answer>,
{
    let mut attempts = 0;
    loop {
        attempts += 1;
        let answer = invoke().await;
        if answer.function_error.is_none() || attempts > retries {
            return Delivered { attempts, answer };
        }
    }
}

/// The invocation record Lambda sends to an on-failure destination for `d` of `request` to
/// `function_arn` at `timestamp` (RFC 3339). Pure.
pub fn record(function_arn: &str, request: &[u8], d: &Delivered, timestamp: &str) -> Value {
    let parse = |b: &[u8]| {
        serde_json::from_slice::<Value>(b).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(b).into()))
    };
    json!({
        "version": "1.0",
        "timestamp": timestamp,
        "requestContext": {
            "requestId": format!("standin-{}", timestamp),
            "functionArn": format!("{function_arn}:$LATEST"),
            "condition": "RetriesExhausted",
            "approximateInvokeCount": d.attempts,
        },
        "requestPayload": parse(request),
        "responseContext": {
            "statusCode": 200,
            "executedVersion": "$LATEST",
            "functionError": d.answer.function_error.clone().unwrap_or_default(),
        },
        "responsePayload": parse(&d.answer.body),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_failing_event_is_tried_one_plus_its_retries_times_and_recorded_as_lambda_does() {
        let mut calls = 0;
        let d = deliver(2, || {
            calls += 1;
            async {
                Answer {
                    body: br#"{"errorType":"Refused","errorMessage":"no"}"#.to_vec(),
                    function_error: Some("Unhandled".into()),
                }
            }
        })
        .await;
        assert_eq!((calls, d.attempts, d.failed()), (3, 3, true));
        let r = record("arn:aws:lambda:us-east-1:1:function:f", br#"{"op":"x"}"#, &d, "2026-12-02T10:00:00Z");
        assert_eq!(r["requestContext"]["condition"], "RetriesExhausted");
        assert_eq!(r["requestContext"]["approximateInvokeCount"], 3);
        assert_eq!(r["requestPayload"]["op"], "x");
        assert_eq!(r["responsePayload"]["errorType"], "Refused");
        let mut n = 0;
        let ok = deliver(2, || {
            n += 1;
            let fail = n == 1;
            async move { Answer { body: b"{}".to_vec(), function_error: fail.then(|| "Unhandled".into()) } }
        })
        .await;
        assert_eq!((ok.attempts, ok.failed()), (2, false), "a retry that succeeds ends it");
    }
}
