//! What a target receives and what its answer means. Pure.
//!
//! - **A unit's body** (every target): `{"key", "kind", "tenant", "attempt", "payload"}` as JSON.
//!   `key` is the unit's idempotency key: a unit can be delivered again (a retried batch, a
//!   worker that died after the call), so a handler deduplicates on it (`docs/targets.md`).
//! - **A Lambda target** gets the units in the shape of an SQS event, `{"Records": [...]}`, each
//!   record's `messageId` the unit key and `body` the unit — what teams already handle, with
//!   Powertools' batch processors or by hand — and answers with the partial-batch response they
//!   already return, read here by the rules Lambda applies to an SQS event source ([`failures`]).
//! - **SQS and EventBridge** take 10 entries a request ([`chunks`]).

use std::collections::BTreeSet;

use md5::Md5;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tickwork::queue::Job;

/// Entries in one `SendMessageBatch` or `PutEvents` at most (SQS API reference,
/// "SendMessageBatch": "You can send up to 10 messages"; EventBridge API reference, "PutEvents":
/// Entries, "Maximum number of 10 items").
pub const MAX_ENTRIES: usize = 10;

/// Bytes of all entries of one `SendMessageBatch` or `PutEvents` at most: 256 KiB (SQS
/// Developer Guide, "Amazon SQS message quotas": "the sum of all individual message lengths" in a
/// batch; EventBridge User Guide, "Amazon EventBridge quotas": PutEvents "total entry size must be
/// less than 256 KB"). Kept at the older, lower SQS figure, which every queue accepts.
pub const MAX_REQUEST_BYTES: usize = 256 * 1024;

/// Bytes of one synchronous Invoke's payload at most: 6 MB (Lambda Developer Guide, "Lambda
/// quotas": invocation payload, synchronous). A batch that would exceed it is sent as several.
pub const MAX_INVOKE_BYTES: usize = 6 * 1024 * 1024;

/// A unit's body: what every target delivers for it.
pub fn unit_body(job: &Job) -> String {
    let payload: Value = serde_json::from_str(&job.payload).unwrap_or_else(|_| Value::String(job.payload.clone()));
    json!({
        "key": job.id,
        "kind": job.kind,
        "tenant": job.tenant,
        "attempt": job.attempts,
        "payload": payload,
    })
    .to_string()
}

/// Units as an SQS event (Lambda Developer Guide, "Using Lambda with Amazon SQS": the example
/// event): `messageId` and `receiptHandle` the unit key, `body` the unit, `md5OfBody` its MD5 as
/// SQS computes it, the kind and tenant as string message attributes. `source` names where the
/// units come from (`eventSourceARN`).
pub fn sqs_event(jobs: &[Job], source: &str, region: &str, now_ms: i64) -> Value {
    let records: Vec<Value> = jobs
        .iter()
        .map(|j| {
            let body = unit_body(j);
            let md5: String = Md5::digest(body.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
            json!({
                "messageId": j.id,
                "receiptHandle": j.id,
                "body": body,
                "attributes": {
                    "ApproximateReceiveCount": j.attempts.to_string(),
                    "SentTimestamp": now_ms.to_string(),
                    "SenderId": "tickwork",
                    "ApproximateFirstReceiveTimestamp": now_ms.to_string(),
                },
                "messageAttributes": {
                    "kind": {"stringValue": j.kind, "dataType": "String"},
                    "tenant": {"stringValue": j.tenant.clone().unwrap_or_default(), "dataType": "String"},
                },
                "md5OfBody": md5,
                "eventSource": "aws:sqs",
                "eventSourceARN": source,
                "awsRegion": region,
            })
        })
        .collect();
    json!({ "Records": records })
}

/// The keys a function's answer lists as failed; `Err` when the whole batch failed.
///
/// Lambda's rules for an SQS batch with `ReportBatchItemFailures` (Lambda Developer Guide,
/// "Reporting batch item failures for Lambda functions with an Amazon SQS trigger"): a complete
/// success when the function returns an empty or null `batchItemFailures` list, or an empty or
/// null response; a complete failure when it returns invalid JSON, an empty or null
/// `itemIdentifier`, an item without that key, or an identifier that is not in the batch.
pub fn failures(answer: &[u8], keys: &[String]) -> Result<BTreeSet<String>, String> {
    let text = std::str::from_utf8(answer).map_err(|_| "the answer is not UTF-8".to_string())?.trim();
    if text.is_empty() {
        return Ok(BTreeSet::new());
    }
    let v: Value = serde_json::from_str(text).map_err(|e| format!("the answer is not JSON: {e}"))?;
    let list = match &v {
        Value::Null => return Ok(BTreeSet::new()),
        Value::Object(m) => match m.get("batchItemFailures") {
            None | Some(Value::Null) => return Ok(BTreeSet::new()),
            Some(Value::Array(a)) => a,
            Some(other) => return Err(format!("batchItemFailures is not a list: {other}")),
        },
        // A string holding the partial-batch response (a Python handler returning
        // `json.dumps({...})`, a TypeScript one `JSON.stringify(...)`) would read as complete
        // success and drop the failures it lists: refused as a failure of the whole call.
        Value::String(s) if double_encoded(s) => {
            return Err("the answer is a JSON string holding the batch response (encoded twice): return the object itself, not its JSON text".into())
        }
        // Anything else a handler returns (a string, a number) says nothing about items: success,
        // as for any response without the key.
        _ => return Ok(BTreeSet::new()),
    };
    let known: BTreeSet<&str> = keys.iter().map(String::as_str).collect();
    let mut failed = BTreeSet::new();
    for item in list {
        let id = item.get("itemIdentifier").and_then(Value::as_str).filter(|s| !s.is_empty());
        match id {
            None => return Err(format!("a batchItemFailures entry without an itemIdentifier: {item}")),
            Some(id) if !known.contains(id) => {
                return Err(format!("itemIdentifier `{id}` is not in the batch"));
            }
            Some(id) => {
                failed.insert(id.to_string());
            }
        }
    }
    Ok(failed)
}

/// Whether a string answer is the partial-batch response encoded a second time. Pure.
fn double_encoded(s: &str) -> bool {
    serde_json::from_str::<Value>(s).is_ok_and(|v| v.get("batchItemFailures").is_some())
}

/// A FIFO message's deduplication id from its unit key: the SHA-256 of the key in hex, 64
/// characters (at most 128 alphanumerics and punctuation, SQS API reference,
/// "MessageDeduplicationId"), the same whenever the unit is sent again, so SQS drops a resend
/// within its five-minute deduplication interval.
pub fn dedup_id(key: &str) -> String {
    hex(&Sha256::digest(key.as_bytes()))
}

/// A FIFO message's group id: the tenant, so one tenant's units are ordered and different
/// tenants' run in parallel; hashed when the tenant id does not fit the group id's rule (1 to 128
/// alphanumerics and punctuation, SQS API reference, "MessageGroupId").
pub fn group_id(tenant: &str) -> String {
    let fits = !tenant.is_empty() && tenant.len() <= 128 && tenant.bytes().all(|b| b.is_ascii_graphic());
    if fits {
        tenant.to_string()
    } else {
        hex(&Sha256::digest(tenant.as_bytes()))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The id of a batch request's `i`-th entry (unique within the request: SQS API reference,
/// "SendMessageBatchRequestEntry": Id).
pub fn entry_id(i: usize) -> String {
    format!("u{i}")
}

/// How each of `n` entries of a `SendMessageBatch` ended, from its answer: the ids reported
/// sent, and those reported failed with why. An entry reported in neither list is not known to
/// be sent, and goes back as failed too; an id that names no entry is ignored. Pure.
pub fn entry_ends(n: usize, sent: &[&str], failed: &[(&str, String)]) -> Vec<Result<(), String>> {
    (0..n)
        .map(|i| {
            let id = entry_id(i);
            match failed.iter().find(|(f, _)| *f == id) {
                Some((_, why)) => Err(why.clone()),
                None if sent.contains(&id.as_str()) => Ok(()),
                None => Err(format!("entry {id} was reported neither sent nor failed")),
            }
        })
        .collect()
}

/// How each of `n` entries of a `PutEvents` ended: its results are in the request's order, one
/// each (EventBridge API reference, "PutEvents": Entries), an error code on a failed one. A
/// missing result is a failure. Pure.
pub fn positional_ends(n: usize, errors: &[Option<String>]) -> Vec<Result<(), String>> {
    (0..n)
        .map(|i| match errors.get(i) {
            None => Err(format!("no result for entry {i}")),
            Some(None) => Ok(()),
            Some(Some(why)) => Err(why.clone()),
        })
        .collect()
}

/// A batch's units as entries of a queue or a bus: their bodies, and the index ranges of the
/// requests they go in (10 entries and [`MAX_REQUEST_BYTES`] a request at most). `overhead` is
/// what an entry counts beside its body (attributes, source, detail-type).
pub fn requests(jobs: &[Job], overhead: impl Fn(&Job) -> usize) -> (Vec<String>, Vec<std::ops::Range<usize>>) {
    let bodies: Vec<String> = jobs.iter().map(unit_body).collect();
    let sizes: Vec<usize> = jobs.iter().zip(&bodies).map(|(j, b)| b.len() + overhead(j)).collect();
    let ranges = chunks(&sizes, MAX_ENTRIES, MAX_REQUEST_BYTES);
    (bodies, ranges)
}

/// Entries of `sizes` bytes in requests of at most `max_entries` and `max_bytes`: index ranges.
/// An entry larger than `max_bytes` goes alone (the service refuses it, and says so for it alone).
pub fn chunks(sizes: &[usize], max_entries: usize, max_bytes: usize) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, &s) in sizes.iter().enumerate() {
        if i > start && (i - start == max_entries || bytes + s > max_bytes) {
            out.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes += s;
    }
    if start < sizes.len() {
        out.push(start..sizes.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: &str) -> Job {
        let payload = r#"{"grain":"month","period":"2026-11","tenant":"t1"}"#;
        Job { tenant: Some("t1".into()), attempts: 2, ..Job::unclaimed(id, "pulse", payload) }
    }

    #[test]
    fn a_record_carries_the_key_as_its_message_id_and_the_unit_as_its_body() {
        let e = sqs_event(&[job("pulse#t1#month#2026-11")], "tickwork:pulse", "eu-west-1", 5);
        let r = &e["Records"][0];
        assert_eq!(r["messageId"], "pulse#t1#month#2026-11");
        let body: Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
        assert_eq!(body["key"], "pulse#t1#month#2026-11");
        assert_eq!(body["payload"]["period"], "2026-11");
        assert_eq!(body["attempt"], 2);
        // md5 of the body as SQS computes it (hex of the UTF-8 bytes).
        let md5: String =
            Md5::digest(r["body"].as_str().unwrap().as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(r["md5OfBody"], md5);
        assert_eq!(r["attributes"]["ApproximateReceiveCount"], "2");
    }

    #[test]
    fn the_partial_batch_answer_is_read_by_lambdas_rules() {
        let keys = vec!["a".to_string(), "b".to_string()];
        for ok in ["", "null", "{}", r#"{"batchItemFailures":[]}"#, r#"{"batchItemFailures":null}"#, "\"done\""] {
            assert_eq!(failures(ok.as_bytes(), &keys), Ok(BTreeSet::new()), "{ok}");
        }
        let f = failures(br#"{"batchItemFailures":[{"itemIdentifier":"b"}]}"#, &keys).unwrap();
        assert_eq!(f, BTreeSet::from(["b".to_string()]));
        for whole in [
            "{not json",
            r#"{"batchItemFailures":[{"itemIdentifier":""}]}"#,
            r#"{"batchItemFailures":[{"itemIdentifier":null}]}"#,
            r#"{"batchItemFailures":[{"id":"a"}]}"#,
            r#"{"batchItemFailures":[{"itemIdentifier":"c"}]}"#,
            r#"{"batchItemFailures":"a"}"#,
        ] {
            assert!(failures(whole.as_bytes(), &keys).is_err(), "{whole}");
        }
        // `json.dumps(...)` returned from Python: the JSON text of the answer, as a string.
        let twice = serde_json::to_string(r#"{"batchItemFailures":[{"itemIdentifier":"b"}]}"#).unwrap();
        let e = failures(twice.as_bytes(), &keys).unwrap_err();
        assert!(e.contains("encoded twice"), "{e}");
        let twice_empty = serde_json::to_string(r#"{"batchItemFailures":[]}"#).unwrap();
        assert!(failures(twice_empty.as_bytes(), &keys).is_err(), "refused whatever it lists");
    }

    #[test]
    fn fifo_ids_are_stable_and_within_their_rules() {
        assert_eq!(dedup_id("pulse#t1#month#2026-11"), dedup_id("pulse#t1#month#2026-11"));
        assert_ne!(dedup_id("pulse#t1#month#2026-11"), dedup_id("pulse#t1#month#2026-12"));
        assert_eq!(dedup_id("k").len(), 64);
        assert_eq!(group_id("acme-1"), "acme-1");
        let long = "x".repeat(129);
        assert_eq!(group_id(&long).len(), 64);
        assert_eq!(group_id("a b").len(), 64, "a space is not punctuation");
    }

    #[test]
    fn each_entry_ends_as_its_answer_says_and_an_unreported_one_is_not_sent() {
        let ends = entry_ends(4, &["u0", "u2"], &[("u1", "InternalError".into()), ("u9", "stray".into())]);
        assert_eq!(ends[0], Ok(()));
        assert_eq!(ends[1], Err("InternalError".into()));
        assert_eq!(ends[2], Ok(()));
        assert!(ends[3].as_ref().unwrap_err().contains("neither sent nor failed"));
        let ends = positional_ends(3, &[None, Some("ThrottlingException".into())]);
        assert_eq!(ends, vec![Ok(()), Err("ThrottlingException".into()), Err("no result for entry 2".into())]);
    }

    #[test]
    fn chunks_keep_to_ten_entries_and_the_byte_limit() {
        assert_eq!(chunks(&[1; 25], 10, 1000), vec![0..10, 10..20, 20..25]);
        assert_eq!(chunks(&[400, 400, 400], 10, 1000), vec![0..2, 2..3]);
        assert_eq!(chunks(&[2000, 1], 10, 1000), vec![0..1, 1..2], "an oversized entry goes alone");
        assert!(chunks(&[], 10, 1000).is_empty());
    }
}
