//! Lambda's event source mapping for a DynamoDB stream, standing in for it where a function's
//! correctness rests on the stream (the sweep's `ScheduleWrites` event): the table's stream read
//! from its start (`TRIM_HORIZON`), each record held against the mapping's filter pattern, and
//! what passes handed to the function in batches shaped as Lambda delivers them (`Records`, each
//! with `eventName`, `eventSource`, `eventSourceARN` and `dynamodb` with `Keys` and `NewImage` in
//! DynamoDB's JSON). The position moves past a batch only once the function returned it without
//! error, as a mapping that retries until success does ("Lambda event source mappings", DynamoDB:
//! a failed batch is retried until it succeeds or its records expire). Records the filter drops
//! are passed over, as Lambda drops them ("Lambda event filtering").
//!
//! The filter patterns understood are the ones the template uses: objects of fields, each an array
//! of allowed strings, or a `[{"prefix": "..."}]`.

use std::collections::HashMap;

use anyhow::{bail, Context, Result};
use aws_sdk_dynamodbstreams::types::{AttributeValue, Record, ShardIteratorType};
use serde_json::{json, Value};
use tokio::sync::Mutex;

/// One table's stream and a mapping's position in it.
pub struct StreamMapping {
    client: aws_sdk_dynamodbstreams::Client,
    table: String,
    filters: Vec<Value>,
    batch: usize,
    /// The stream's ARN, and each shard's last sequence number handed over.
    state: Mutex<(Option<String>, HashMap<String, String>)>,
}

impl StreamMapping {
    /// A mapping of `table`'s stream with the filter `patterns` (JSON text, as in the template's
    /// `FilterCriteria`; none: every record) and at most `batch` records an invocation.
    pub fn new(sdk: &aws_config::SdkConfig, table: &str, patterns: &[&str], batch: usize) -> Result<Self> {
        let filters = patterns
            .iter()
            .map(|p| serde_json::from_str(p).with_context(|| format!("filter `{p}`")))
            .collect::<Result<_>>()?;
        Ok(Self {
            client: aws_sdk_dynamodbstreams::Client::new(sdk),
            table: table.to_string(),
            filters,
            batch: batch.max(1),
            state: Mutex::new((None, HashMap::new())),
        })
    }

    /// Hands every record written since the last call to `function`, a batch at a time; returns
    /// how many were handed over. A batch `function` fails stops the call with its error, and is
    /// handed over again at the next.
    pub async fn pump<F, Fut, E>(&self, mut function: F) -> Result<usize>
    where
        F: FnMut(Value) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<(), E>>,
        E: std::fmt::Display,
    {
        let mut state = self.state.lock().await;
        if state.0.is_none() {
            let listed = self.client.list_streams().table_name(&self.table).send().await.context("ListStreams")?;
            let Some(arn) = listed.streams().first().and_then(|s| s.stream_arn()) else {
                bail!("the table `{}` has no stream: the mapping has nothing to read", self.table)
            };
            state.0 = Some(arn.to_string());
        }
        let arn = state.0.clone().unwrap_or_default();
        let described = self.client.describe_stream().stream_arn(&arn).send().await.context("DescribeStream")?;
        let shards: Vec<String> = described
            .stream_description()
            .map(|d| d.shards().iter().filter_map(|s| s.shard_id().map(str::to_string)).collect())
            .unwrap_or_default();
        let mut handed = 0;
        for shard in shards {
            let mut req = self.client.get_shard_iterator().stream_arn(&arn).shard_id(&shard);
            req = match state.1.get(&shard) {
                Some(seq) => req.shard_iterator_type(ShardIteratorType::AfterSequenceNumber).sequence_number(seq),
                None => req.shard_iterator_type(ShardIteratorType::TrimHorizon),
            };
            let mut iterator = req.send().await.context("GetShardIterator")?.shard_iterator().map(str::to_string);
            while let Some(it) = iterator.take() {
                let out = self
                    .client
                    .get_records()
                    .shard_iterator(it)
                    .limit(self.batch as i32)
                    .send()
                    .await
                    .context("GetRecords")?;
                let records = out.records();
                let Some(last) = records.last().and_then(|r| r.dynamodb()).and_then(|d| d.sequence_number()) else {
                    break;
                };
                let last = last.to_string();
                let passed: Vec<Value> =
                    records.iter().map(|r| record_json(r, &arn)).filter(|r| self.passes(r)).collect();
                if !passed.is_empty() {
                    let n = passed.len();
                    if let Err(e) = function(json!({ "Records": passed })).await {
                        bail!("the function failed a batch of {n} records (handed over again at the next pump): {e}");
                    }
                    handed += n;
                }
                state.1.insert(shard.clone(), last);
                iterator = out.next_shard_iterator().map(str::to_string);
            }
        }
        Ok(handed)
    }

    fn passes(&self, record: &Value) -> bool {
        self.filters.is_empty() || self.filters.iter().any(|f| matches(f, record))
    }
}

/// Whether `event` matches the filter `pattern` (the subset the template uses).
pub fn matches(pattern: &Value, event: &Value) -> bool {
    match pattern {
        Value::Object(fields) => fields.iter().all(|(k, p)| event.get(k).is_some_and(|v| matches(p, v))),
        Value::Array(allowed) => allowed.iter().any(|a| match a {
            Value::Object(o) => match o.get("prefix").and_then(Value::as_str) {
                Some(pre) => event.as_str().is_some_and(|s| s.starts_with(pre)),
                None => false,
            },
            other => other == event,
        }),
        _ => false,
    }
}

fn record_json(r: &Record, arn: &str) -> Value {
    let d = r.dynamodb();
    let map = |m: Option<&HashMap<String, AttributeValue>>| -> Value {
        m.map(|m| Value::Object(m.iter().map(|(k, v)| (k.clone(), attr_json(v))).collect())).unwrap_or(Value::Null)
    };
    let mut body = json!({
        "Keys": map(d.and_then(|d| d.keys())),
        "SequenceNumber": d.and_then(|d| d.sequence_number()),
    });
    if let Some(img) = d.and_then(|d| d.new_image()) {
        body["NewImage"] = map(Some(img));
    }
    json!({
        "eventID": r.event_id(),
        "eventName": r.event_name().map(|n| n.as_str()),
        "eventSource": "aws:dynamodb",
        "eventSourceARN": arn,
        "dynamodb": body,
    })
}

/// An attribute value in DynamoDB's JSON (the types the control table's items hold).
fn attr_json(v: &AttributeValue) -> Value {
    match v {
        AttributeValue::S(s) => json!({ "S": s }),
        AttributeValue::N(n) => json!({ "N": n }),
        AttributeValue::Bool(b) => json!({ "BOOL": b }),
        AttributeValue::Null(_) => json!({ "NULL": true }),
        AttributeValue::Ss(v) => json!({ "SS": v }),
        AttributeValue::Ns(v) => json!({ "NS": v }),
        AttributeValue::L(v) => json!({ "L": v.iter().map(attr_json).collect::<Vec<_>>() }),
        AttributeValue::M(m) => {
            json!({ "M": m.iter().map(|(k, v)| (k.clone(), attr_json(v))).collect::<serde_json::Map<_, _>>() })
        }
        other => json!({ "unsupported": format!("{other:?}") }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_passes_the_templates_patterns_as_lambda_reads_them() {
        let p: Value =
            serde_json::from_str(r#"{"eventName": ["INSERT"], "dynamodb": {"NewImage": {"by": {"S": ["writer"]}}}}"#)
                .unwrap();
        let rec = |name: &str, by: Option<&str>| {
            let mut img = json!({"pk": {"S": "sdue#j#0"}});
            if let Some(b) = by {
                img["by"] = json!({"S": b});
            }
            json!({"eventName": name, "dynamodb": {"NewImage": img}})
        };
        assert!(matches(&p, &rec("INSERT", Some("writer"))));
        assert!(!matches(&p, &rec("MODIFY", Some("writer"))), "an update");
        assert!(!matches(&p, &rec("INSERT", None)), "unmarked");
        assert!(!matches(&p, &rec("INSERT", Some("sweep"))));
        let prefix: Value =
            serde_json::from_str(r#"{"dynamodb": {"NewImage": {"pk": {"S": [{"prefix": "sdue#"}]}}}}"#).unwrap();
        assert!(matches(&prefix, &rec("INSERT", None)));
        assert!(!matches(&prefix, &json!({"dynamodb": {"NewImage": {"pk": {"S": "wm#j"}}}})));
    }
}
