//! A DynamoDB Streams event as Lambda's event source mapping delivers it: the records, once the
//! event is shown to come from the one table's stream the function is wired to.

use serde_json::Value;

use crate::BadEvent;

/// The records of a stream event from `table`'s stream. `None` when the event is not a stream
/// event (it has no `Records`); an error naming the field when it claims to be one and is not (no
/// record, another source, another table's stream wired in by mistake).
pub fn records_of<'a>(event: &'a Value, table: &str) -> Option<Result<&'a [Value], BadEvent>> {
    let records = event.as_object()?.get("Records")?;
    let Some(records) = records.as_array() else {
        return Some(Err(BadEvent("`Records` must be an array of stream records".into())));
    };
    if records.is_empty() {
        return Some(Err(BadEvent("`Records` is empty: a stream event carries at least one record".into())));
    }
    let ours = format!(":table/{table}/stream/");
    for (i, r) in records.iter().enumerate() {
        match r.get("eventSource").and_then(Value::as_str) {
            Some("aws:dynamodb") => {}
            Some(other) => {
                return Some(Err(BadEvent(format!(
                    "`Records[{i}].eventSource` is `{other}`; this function reads the stream of the table `{table}` (`aws:dynamodb`)"
                ))))
            }
            None => return Some(Err(BadEvent(format!("`Records[{i}].eventSource` is missing")))),
        }
        if let Some(arn) = r.get("eventSourceARN").and_then(Value::as_str) {
            if !arn.contains(&ours) {
                return Some(Err(BadEvent(format!(
                    "`Records[{i}].eventSourceARN` is `{arn}`, not the stream of the table `{table}`"
                ))));
            }
        }
    }
    Some(Ok(records))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_tables_stream_is_read() {
        let arn = "arn:aws:dynamodb:us-east-1:123456789012:table/app-control/stream/2026-11-30T00:00:00.000";
        let ev = serde_json::json!({"Records": [{"eventSource": "aws:dynamodb", "eventSourceARN": arn}]});
        assert_eq!(records_of(&ev, "app-control").unwrap().unwrap().len(), 1);
        let e = records_of(&ev, "app-queue").unwrap().unwrap_err().to_string();
        assert!(e.contains("not the stream of the table `app-queue`"), "{e}");
        assert!(records_of(&serde_json::json!({"time": "x"}), "app-control").is_none(), "not a stream event");
        let e = records_of(&serde_json::json!({"Records": []}), "t").unwrap().unwrap_err().to_string();
        assert!(e.contains("is empty"), "{e}");
        let e = records_of(&serde_json::json!({"Records": [{"eventSource": "aws:sqs"}]}), "t").unwrap().unwrap_err();
        assert!(e.to_string().contains("`aws:sqs`"), "{e}");
    }
}
