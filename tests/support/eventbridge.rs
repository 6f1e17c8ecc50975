//! EventBridge's input transformer, as its API reference documents it ("InputTransformer",
//! Amazon EventBridge API Reference), so a test delivers a team's event to a target the way a
//! rule would: each `InputPathsMap` value is a JSON path in dot notation into the event, and each
//! `<name>` of `InputTemplate` is replaced by what it names — as JSON where it stands outside
//! quotes (a string keeps its quotes), as bare text inside a quoted string.
//!
//! A path that names nothing in the event is taken as `null` here (outside quotes) or the empty
//! string (inside): the reference does not say, and a test built on it checks only what follows
//! either reading (the control function refuses a tenant without an id).

use std::collections::BTreeMap;

use serde_json::Value;

/// The value at `path` (`$.detail.tenant_id`) of `event`, if any.
pub fn at<'a>(event: &'a Value, path: &str) -> Option<&'a Value> {
    let rest = path.strip_prefix('$')?;
    if rest.is_empty() {
        return Some(event);
    }
    rest.strip_prefix('.')?.split('.').try_fold(event, |v, key| v.get(key))
}

/// The target's input for `event`. Pure.
pub fn transform(event: &Value, paths: &BTreeMap<String, String>, template: &str) -> String {
    let mut out = String::with_capacity(template.len());
    let mut in_string = false;
    let mut chars = template.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if in_string => {
                out.push(c);
                if let Some((_, n)) = chars.next() {
                    out.push(n);
                }
            }
            '"' => {
                in_string = !in_string;
                out.push(c);
            }
            '<' => {
                let name_end = template[i + 1..].find('>').map(|e| i + 1 + e);
                match name_end.and_then(|e| paths.get(&template[i + 1..e]).map(|p| (e, p))) {
                    Some((e, path)) => {
                        let v = at(event, path);
                        if in_string {
                            match v {
                                Some(Value::String(s)) => out.push_str(s),
                                Some(other) => out.push_str(&other.to_string()),
                                None => {}
                            }
                        } else {
                            out.push_str(&v.cloned().unwrap_or(Value::Null).to_string());
                        }
                        while chars.peek().is_some_and(|(j, _)| *j <= e) {
                            chars.next();
                        }
                    }
                    None => out.push(c),
                }
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_json_outside_quotes_and_text_inside() {
        let event = serde_json::json!({"detail-type": "UserSignedUp", "detail": {"tenant_id": "acme", "zone": "Europe/Berlin", "n": 3}});
        let paths = BTreeMap::from([
            ("id".to_string(), "$.detail.tenant_id".to_string()),
            ("zone".to_string(), "$.detail.zone".to_string()),
            ("n".to_string(), "$.detail.n".to_string()),
            ("gone".to_string(), "$.detail.nothing".to_string()),
        ]);
        let t = r#"{"op": "tenants.add", "tenants": [{"id": <id>, "zone": <zone>}], "note": "<id> is \"<n>\"", "x": <gone>, "lt": "a<b"}"#;
        let v: Value = serde_json::from_str(&transform(&event, &paths, t)).unwrap();
        assert_eq!(v["tenants"][0], serde_json::json!({"id": "acme", "zone": "Europe/Berlin"}));
        assert_eq!(v["note"], "acme is \"3\"");
        assert_eq!(v["x"], Value::Null);
        assert_eq!(v["lt"], "a<b", "a `<` that opens no placeholder stays");
        assert_eq!(at(&event, "$.detail-type"), Some(&Value::String("UserSignedUp".into())));
        assert_eq!(at(&event, "$"), Some(&event));
    }
}
