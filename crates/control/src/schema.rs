//! The JSON Schema of every request and answer, generated from the Rust types (schemars), so a
//! team generates its own types in its language (`datamodel-code-generator`, `quicktype`,
//! `json-schema-to-typescript`) from a contract that cannot drift from the code:
//! `docs/control/request.schema.json` and `docs/control/answer.schema.json` are held equal to
//! [`request`] and [`answer`] by a test (`tests/it/control.rs`).

/// The schema of a request ([`crate::request::Request`]).
pub fn request() -> serde_json::Value {
    let mut s = serde_json::to_value(schemars::schema_for!(crate::request::Request)).expect("a schema serialises");
    s["title"] = "tickwork control request".into();
    // Every operation takes `on_refusal` beside its own fields (read before them,
    // [`crate::request::on_refusal`]).
    let on_refusal = serde_json::json!({
        "description": "`answer` (the default): a refusal is an answer with `ok: false`. `fail`: it is a function error carrying the refusal, for an event delivered asynchronously, so that it reaches the on-failure destination.",
        "enum": ["answer", "fail"],
        "type": "string"
    });
    for variant in s["oneOf"].as_array_mut().into_iter().flatten() {
        if let Some(props) = variant["properties"].as_object_mut() {
            props.insert("on_refusal".into(), on_refusal.clone());
        }
    }
    s
}

/// The schema of an answer ([`crate::answer::Answer`]).
pub fn answer() -> serde_json::Value {
    let mut s = serde_json::to_value(schemars::schema_for!(crate::answer::Answer)).expect("a schema serialises");
    s["title"] = "tickwork control answer".into();
    s
}

/// A schema as committed: pretty JSON with a final newline.
pub fn text(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).expect("a schema prints") + "\n"
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_request_schema_names_every_operation() {
        let text = super::text(&super::request());
        for op in crate::request::OPS {
            assert!(text.contains(&format!("\"{op}\"")), "{op} is in the schema");
        }
        let answer = super::text(&super::answer());
        for t in ["NoSuchTenant", "UnknownZone", "Throttled", "InvalidField", "retryable", "cursor"] {
            assert!(answer.contains(t), "{t} is in the answer's schema");
        }
    }
}
