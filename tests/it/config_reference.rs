//! The configuration reference is complete: every variable the code reads is declared once in
//! `tickwork::env` and listed in `docs/configuration.md`.

use std::collections::BTreeSet;

/// Variables the tooling reads that are not settings of a deployment, or that it sets for a
/// client (`make dev` names the control function).
const TOOLING: [&str; 4] =
    ["TICKWORK_BENCH_BIN_DIR", "TICKWORK_DYNALITE_ENDPOINT", "TICKWORK_STACKS_DIR", "TICKWORK_CONTROL_FUNCTION"];

fn sources(dir: &std::path::Path, out: &mut String) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            *out += &std::fs::read_to_string(&p).unwrap();
        }
    }
}

#[test]
fn every_variable_the_code_reads_is_declared_and_documented() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut code = String::new();
    for krate in std::fs::read_dir(root.join("crates")).unwrap() {
        sources(&krate.unwrap().path().join("src"), &mut code);
    }
    let declared: BTreeSet<&str> = tickwork::env::VARS.iter().map(|v| v.name).collect();
    let mut used = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("\"TICKWORK_") {
        let tail = &rest[i + 1..];
        let end = tail.find('"').unwrap();
        if end > "TICKWORK_".len() {
            used.insert(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    for v in &used {
        assert!(
            declared.contains(v.as_str()) || TOOLING.contains(&v.as_str()),
            "`{v}` is read but not declared in tickwork::env"
        );
    }
    let doc = std::fs::read_to_string(root.join("docs/configuration.md")).unwrap();
    for v in &declared {
        assert!(doc.contains(&format!("`{v}`")), "`{v}` is missing from docs/configuration.md");
    }
    assert!(declared.len() >= 40);
}
