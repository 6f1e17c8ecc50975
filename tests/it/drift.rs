//! The pages held against what they describe, one check for each kind of contradiction a new user
//! found reading the docs beside the template, the Makefile and the code: each check is a pure
//! function from texts to the problems it finds, shown catching the sentence that drifted (its
//! unit test), then held over every page (`README.md`, `docs/*.md`, `examples/targets.yaml`).
//! The kinds `docs.rs` already holds (parameter tables and their defaults, the alarm table, every
//! `make` target and `tickctl` command a page names, the configuration reference) are not repeated.

use std::collections::{BTreeMap, BTreeSet};

use regex_lite::Regex;
use serde_yaml_ng::Value;

use crate::docs::{code_spans, fenced_lines, pages, read, template, untag};

/// A page's name and text.
type Page = (String, String);

/// Every page a user reads, with the example template (its comments are instructions too).
fn all_pages() -> Vec<Page> {
    let root = format!("{}/", crate::docs::root().display());
    let mut out: Vec<Page> =
        pages().into_iter().map(|(p, t)| (p.strip_prefix(&root).map(str::to_string).unwrap_or(p), t)).collect();
    out.push(("examples/targets.yaml".to_string(), read("examples/targets.yaml")));
    out
}

/// The prose of a page: fenced blocks left out, paragraphs split at blank lines. Pure.
fn paragraphs(md: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    for (_, line) in fenced_lines(md).into_iter().filter(|(fenced, _)| !fenced) {
        if line.trim().is_empty() {
            out.push(String::new());
        } else {
            let p = out.last_mut().unwrap();
            p.push_str(line);
            p.push('\n');
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

/// The sentences of a page's prose (a table row is a sentence of its own). Pure.
fn sentences(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    for p in paragraphs(md) {
        for line in p.lines().filter(|l| l.starts_with('|')) {
            out.push(line.to_string());
        }
        let prose: String = p.lines().filter(|l| !l.starts_with('|')).collect::<Vec<_>>().join(" ");
        out.extend(prose.split(". ").map(str::to_string).filter(|s| !s.trim().is_empty()));
    }
    out
}

fn number(word: &str) -> Option<usize> {
    const WORDS: [&str; 21] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
    ];
    let w = word.to_ascii_lowercase();
    WORDS.iter().position(|x| *x == w).or_else(|| w.replace(',', "").parse().ok())
}

/// Kind 1: a parameter's default stated in prose ("`WorkerConcurrency` (default 2)", "the
/// template's `WorkerConcurrency`, 4") that is not the template's. Pure.
fn prose_defaults(pages: &[Page], defaults: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (name, default) in defaults {
        if default.parse::<f64>().is_err() {
            continue;
        }
        let re =
            Regex::new(&format!(r"`?\b{name}\b`?(?: \(default| default| defaults to| is|,)? (\d+(?:\.\d+)?)\b[^=]"))
                .unwrap();
        for (page, text) in pages {
            for s in sentences(text).iter().filter(|s| !s.starts_with('|')) {
                for c in re.captures_iter(&format!("{s} ")) {
                    if &c[1] != default {
                        out.push(format!("{page}: `{name}` {} where the template's default is {default}", &c[1]));
                    }
                }
            }
        }
    }
    out
}

/// Kind 2: how many units a function target receives an Invoke, where the sentence does not name
/// the parameter that changes it, is the template's default. Pure.
fn batch_claims(pages: &[Page], batch: &str) -> Vec<String> {
    let re = Regex::new(r"(\d+) units (?:an|a|per|in an|in one) (?:Invoke|invocation)").unwrap();
    let mut out = Vec::new();
    for (page, text) in pages {
        for s in sentences(text) {
            for c in re.captures_iter(&s) {
                if &c[1] != batch && !s.contains("TargetBatch") {
                    out.push(format!("{page}: \"{} units an Invoke\" where `TargetBatch` defaults to {batch}", &c[1]));
                }
            }
        }
    }
    out
}

/// Kind 3: the number of custom metrics and of alarms a page states is the stack's (the throttle
/// alarms counted on their own where the sentence is about them). Pure.
fn counts(pages: &[Page], metrics: usize, alarms: usize, throttle_alarms: usize) -> Vec<String> {
    let re = Regex::new(r"(?i)\b([a-z]+|\d+) (custom metrics|alarms)\b").unwrap();
    let mut out = Vec::new();
    for (page, text) in pages {
        for s in sentences(text) {
            for c in re.captures_iter(&s) {
                let Some(n) = number(&c[1]) else { continue };
                let want = match &c[2].to_ascii_lowercase()[..] {
                    "custom metrics" => metrics,
                    _ if s.to_ascii_lowercase().contains("throttl") => throttle_alarms,
                    _ => alarms,
                };
                if n != want {
                    out.push(format!("{page}: \"{} {}\" where the stack has {want}", &c[1], &c[2]));
                }
            }
        }
    }
    out
}

/// Kind 5: every place that routes kinds to a function target routes the same kinds (one page
/// routing `pulse` alone sends the schedules' fires to the built-in handler, silently). Pure.
fn target_kinds(pages: &[Page]) -> Vec<String> {
    let re = Regex::new(r#"FunctionTargetKinds=\\?"?([a-z,]+)"#).unwrap();
    let mut seen: BTreeMap<BTreeSet<String>, Vec<String>> = BTreeMap::new();
    for (page, text) in pages {
        for c in re.captures_iter(text) {
            let kinds = c[1].split(',').filter(|k| !k.is_empty()).map(str::to_string).collect();
            seen.entry(kinds).or_default().push(page.clone());
        }
    }
    if seen.len() <= 1 {
        return Vec::new();
    }
    seen.iter()
        .map(|(k, p)| {
            format!("FunctionTargetKinds={} in {}", k.iter().cloned().collect::<Vec<_>>().join(","), p.join(", "))
        })
        .collect()
}

/// The commands of a page's fenced blocks, a line continued with `\` joined to the next: what a
/// reader copies and runs. Pure.
fn commands(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cont = String::new();
    for (_, line) in fenced_lines(md).into_iter().filter(|(fenced, _)| *fenced) {
        let l = line.trim().trim_start_matches("$ ");
        match l.strip_suffix('\\') {
            Some(head) => {
                cont.push_str(head);
                cont.push(' ');
            }
            None => out.push(std::mem::take(&mut cont) + l),
        }
    }
    out
}

/// Kind 6: every `sam deploy` a page gives to run names the environment it deploys
/// (`--config-env`: without it `--stack-name` makes a stack beside samconfig's with the template's
/// live defaults) and passes no `--parameter-overrides` (which replaces the environment's whole
/// list). Prose that warns against either is not a command. Pure.
fn sam_deploys(pages: &[Page]) -> Vec<String> {
    let mut out = Vec::new();
    for (page, text) in pages {
        for cmd in commands(text).iter().filter(|c| c.contains("sam deploy")) {
            if !cmd.contains("--config-env") {
                out.push(format!("{page}: `{cmd}` names no --config-env"));
            }
            if cmd.contains("--parameter-overrides") {
                out.push(format!("{page}: `{cmd}` replaces the environment's parameter list"));
            }
        }
    }
    out
}

/// Kind 7: the README's prerequisites name every system package the Makefile installs and every
/// version it pins (a fresh machine "with the prerequisites" must be enough). Pure.
fn prerequisites(readme: &str, makefile: &str) -> Vec<String> {
    let section: String =
        readme.lines().skip_while(|l| *l != "## Prerequisites").take_while(|l| !l.starts_with("## Deploy")).collect();
    let mut out = Vec::new();
    for line in makefile.lines() {
        if let Some((_, rest)) = line.split_once("--no-install-recommends ") {
            for pkg in rest.split([';', '|']).next().unwrap_or_default().split_whitespace() {
                if !section.contains(pkg.trim_end_matches('\\')) {
                    out.push(format!("README.md's prerequisites do not name `{pkg}`, which `make deps` installs"));
                }
            }
        }
        if let Some((var, v)) = line.split_once(":=") {
            let var = var.trim();
            if var.ends_with("_VERSION") && !var.starts_with("RELEASE") && !section.contains(v.trim()) {
                out.push(format!("README.md's prerequisites do not name {var} {}", v.trim()));
            }
        }
    }
    out
}

/// Kind 8: where `samconfig.toml` sets the region, no page says it comes from the AWS
/// configuration, and the deploy page names it. Pure.
fn regions(pages: &[Page], samconfig: &str) -> Vec<String> {
    let set: BTreeSet<String> = samconfig
        .lines()
        .filter_map(|l| l.trim().strip_prefix("region = "))
        .map(|v| v.trim_matches('"').to_string())
        .collect();
    let mut out = Vec::new();
    if set.is_empty() {
        return out;
    }
    for (page, text) in pages {
        for s in sentences(text) {
            if s.contains("region") && s.contains("from your AWS configuration") {
                out.push(format!("{page}: \"{}\" but samconfig.toml sets the region", s.trim()));
            }
        }
        if page.ends_with("deploy.md") {
            out.extend(set.iter().filter(|r| !text.contains(r.as_str())).map(|r| format!("{page} never names {r}")));
        }
    }
    out
}

/// What each Makefile target runs: its prerequisites and the targets its recipe makes. Pure.
fn runs(makefile: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current = None;
    for line in makefile.lines() {
        if let Some(recipe) = line.strip_prefix('\t') {
            if let (Some(t), Some((_, rest))) = (&current, recipe.split_once("$(MAKE)")) {
                let made = rest.split_whitespace().filter(|w| !w.starts_with('-') && !w.contains('='));
                out.entry(String::clone(t)).or_default().extend(made.take(1).map(str::to_string));
            }
            continue;
        }
        current = None;
        let Some((name, deps)) = line.split_once(':') else { continue };
        if name.contains(' ') || name.contains('=') || name.starts_with(['.', '#', '$']) || deps.starts_with('=') {
            continue;
        }
        let deps = deps.split("##").next().unwrap_or_default();
        out.entry(name.to_string()).or_default().extend(deps.split_whitespace().map(str::to_string));
        current = Some(name.to_string());
    }
    out
}

/// Kind 9: no page asks for a `make` target after one that already runs it. Pure.
fn rerun_targets(pages: &[Page], runs: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let re = Regex::new(r"\bmake ([a-z][a-z-]*)").unwrap();
    let mut out = Vec::new();
    for (page, text) in pages {
        // A fenced block's commands in order, and a sentence telling to run one after another.
        let mut groups: Vec<String> = sentences(text)
            .into_iter()
            .filter(|s| s.contains(" after ") || s.contains(" then "))
            .filter(|s| !s.contains(" runs ") && !s.contains("already"))
            .collect();
        let mut block = String::new();
        let mut fenced = false;
        // A block whose every command carries a `#` comment is a list of what each does, not steps.
        let mut listed = true;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                if fenced && !listed {
                    groups.push(std::mem::take(&mut block));
                }
                block.clear();
                listed = true;
                fenced = !fenced;
            } else if fenced {
                let (cmd, comment) = line.split_once('#').unwrap_or((line, ""));
                listed &= cmd.trim().is_empty() || !comment.trim().is_empty();
                block.push_str(cmd);
                block.push('\n');
            }
        }
        for g in groups {
            let made: Vec<String> = re.captures_iter(&g).map(|c| c[1].to_string()).collect();
            for (i, a) in made.iter().enumerate() {
                for b in &made[i + 1..] {
                    if runs.get(a).is_some_and(|r| r.contains(b)) {
                        out.push(format!("{page}: `make {b}` after `make {a}`, which runs it"));
                    }
                }
            }
        }
    }
    out
}

/// Kind 10: a sentence that sends the reader to test or write their handlers links, among its
/// pages, one for every language the examples have a handler in (not only a Rust page). Pure over
/// the pages and the page reader.
fn handler_links(pages: &[Page], languages: &[String], page_at: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let re = Regex::new(r"\[([^\]]+)\]\(([^)#]+\.md)(?:#[^)]*)?\)").unwrap();
    let mut out = Vec::new();
    for (page, text) in pages {
        let dir = std::path::Path::new(page).parent().map(|p| p.to_path_buf()).unwrap_or_default();
        let sends = |s: &String| {
            let l = s.to_ascii_lowercase();
            l.contains("your handler") && (l.contains("test") || l.contains("write")) && re.is_match(s)
        };
        for s in sentences(text).into_iter().filter(sends) {
            let mut served = String::new();
            for c in re.captures_iter(&s) {
                match page_at(&dir.join(&c[2]).display().to_string()) {
                    Some(body) => served.push_str(&body.to_ascii_lowercase()),
                    None => out.push(format!("{page}: [{}]({}) goes nowhere", &c[1], &c[2])),
                }
            }
            for lang in languages.iter().filter(|l| !served.contains(l.as_str())) {
                let s: String = s.trim().chars().take(60).collect();
                out.push(format!("{page}: \"{s}…\" sends a team to handlers and no page it links names {lang}"));
            }
        }
    }
    out
}

/// Kinds 12 and 13: a transcript (a fenced block opening with `$ command`) is either regenerated
/// (its command is deterministic and `rerun` gives output holding each of its lines in order) or
/// a dated record of a real run (the paragraph before it gives the day it was made). Pure over the
/// page and the rerun.
fn transcripts(page: &str, text: &str, rerun: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let date = Regex::new(r"\b20\d\d-\d\d-\d\d\b").unwrap();
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].trim_start().starts_with("```") {
            i += 1;
            continue;
        }
        let end = i + 1 + lines[i + 1..].iter().position(|l| l.trim_start().starts_with("```")).unwrap_or(0);
        let body = &lines[i + 1..end];
        if let Some(cmd) = body.first().and_then(|l| l.strip_prefix("$ ")) {
            let shown: Vec<&str> =
                body[1..].iter().copied().filter(|l| !l.trim().is_empty() && l.trim() != "...").collect();
            let before =
                lines[..i].iter().rev().skip_while(|l| l.trim().is_empty()).take_while(|l| !l.trim().is_empty());
            let dated = before.clone().any(|l| date.is_match(l));
            match rerun(cmd) {
                Some(now) => {
                    let mut rest = now.lines();
                    for l in &shown {
                        if !rest.any(|n| n.trim_end() == l.trim_end()) {
                            out.push(format!("{page}: `{cmd}` no longer prints \"{l}\""));
                            break;
                        }
                    }
                }
                None if !shown.is_empty() && !dated => {
                    out.push(format!("{page}: the transcript of `{cmd}` is neither regenerated nor dated"))
                }
                None => {}
            }
        }
        i = end + 1;
    }
    out
}

/// Kind 14: nothing an outsider cannot follow: internal issue numbers, commit hashes, sessions.
/// Pure.
fn internal_references(text: &str) -> Vec<String> {
    let res = [
        Regex::new(r"(?i)\bissues? #?\d+\b").unwrap(),
        Regex::new(r"(?:^|[\s(\[])#\d+\b").unwrap(),
        Regex::new(r"(?i)\b(?:stop|session) \d+\b").unwrap(),
        Regex::new(r"\b[0-9a-f]{7,40}\b").unwrap(),
    ];
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.contains("://")) {
        for re in &res {
            for m in re.find_iter(line) {
                let s = m.as_str().trim();
                // A hash has letters and digits; a plain number or word is not one.
                let hex = s.chars().all(|c| c.is_ascii_hexdigit());
                if hex && !(s.chars().any(|c| c.is_ascii_digit()) && s.chars().any(|c| c.is_ascii_alphabetic())) {
                    continue;
                }
                out.push(s.to_string());
            }
        }
    }
    out
}

/// Kind 16: a paragraph that says a figure was measured names what measured it (a command or a
/// test), and does not state a larger figure than the test runs ("… `make test` runs it at
/// 5,000"). Pure.
fn unsourced_measurements(page: &str, text: &str) -> Vec<String> {
    let source =
        Regex::new(r"`(?:make|cargo|tickctl|scripts/)[^`]*`|tests/it/|crates/bench|make bench|make run").unwrap();
    let mut out = Vec::new();
    let paras = paragraphs(text);
    for (i, p) in paras.iter().enumerate() {
        if !Regex::new(r"\bmeasured\b").unwrap().is_match(p) {
            continue;
        }
        let near = [i.checked_sub(1).map(|j| &paras[j]), Some(p)];
        if !near.iter().flatten().any(|q| source.is_match(q)) {
            out.push(format!("{page}: measured, by nothing it names: \"{}…\"", p.chars().take(80).collect::<String>()));
        }
        if p.contains("runs it at") {
            out.push(format!("{page}: a figure worded as measured that the test runs smaller"));
        }
    }
    out
}

/// Kind 17: a sentence saying tickwork replaces or costs less than EventBridge Scheduler says when
/// (distinct schedules cost more than the Scheduler). Pure.
fn scheduler_claims(pages: &[Page]) -> Vec<String> {
    let mut out = Vec::new();
    for (page, text) in pages {
        for s in sentences(text) {
            let claim = s.contains("replace") || s.contains("costs less") || s.contains("cheaper");
            // A claim that names its condition (a size, shared schedules) says when it holds.
            let when = ["below", "above", "share", "distinct", "until", "unless", "fewer", "more than"];
            if s.contains("Scheduler") && claim && !when.iter().any(|w| s.contains(w)) {
                out.push(format!("{page}: \"{}\" says not when it holds", s.trim()));
            }
        }
    }
    out
}

/// The seconds a duration in words is ("about a minute", "~3 min", "62 s"). Pure.
fn seconds(n: &str, unit: &str) -> Option<f64> {
    let n = if n == "a" { 1.0 } else { n.parse::<f64>().ok()? };
    Some(if unit.starts_with("min") { n * 60.0 } else { n })
}

/// Kind 18: every page's time for `make run` is within half of what the benchmarks page measured
/// (`wall time:` in its transcript). Pure.
fn run_durations(pages: &[Page], measured: f64) -> Vec<String> {
    let re = Regex::new(r"(?:about|~|takes|in) ?(a|\d+(?:\.\d+)?) ?(minutes?|min|seconds|s)\b").unwrap();
    let mut out = Vec::new();
    for (page, text) in pages {
        for line in text.lines().filter(|l| l.contains("make run") && !l.contains("make run`]")) {
            let Some(after) = line.split("make run").nth(1) else { continue };
            for c in re.captures_iter(after) {
                let Some(s) = seconds(&c[1], &c[2]) else { continue };
                if !(measured / 1.5..=measured * 1.5).contains(&s) {
                    out.push(format!("{page}: `make run` \"{}\" where the benchmarks measured {measured} s", &c[0]));
                }
            }
        }
    }
    out
}

/// Kind 19: every option a page gives a `tickctl` command is that command's, and the command
/// reference (`docs/tickctl.md`) shows it. Pure over the pages and the options of a command path.
fn tickctl_options(pages: &[Page], options_of: &dyn Fn(&[&str]) -> Option<BTreeSet<String>>) -> Vec<String> {
    let reference: BTreeSet<String> = pages
        .iter()
        .filter(|(p, _)| p.ends_with("docs/tickctl.md"))
        .flat_map(|(_, t)| code_spans(t))
        .flat_map(|s| {
            s.split_whitespace().map(clean).filter(|w| w.starts_with("--")).map(str::to_string).collect::<Vec<_>>()
        })
        .collect();
    let mut out = Vec::new();
    for (page, text) in pages {
        for span in code_spans(text) {
            let words: Vec<&str> = span.split_whitespace().map(clean).collect();
            let Some(at) = words.iter().position(|w| *w == "tickctl" || w.ends_with("/tickctl")) else { continue };
            let path: Vec<&str> = words[at + 1..]
                .iter()
                .copied()
                .take_while(|w| {
                    !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !w.starts_with('-')
                })
                .take(2)
                .collect();
            if path.is_empty() {
                continue;
            }
            let Some(known) = options_of(&path).or_else(|| options_of(&path[..1])) else { continue };
            for flag in words[at + 1..].iter().filter(|w| w.starts_with("--") && w.len() > 2) {
                let flag = flag.split('=').next().unwrap_or_default();
                if !known.contains(flag) {
                    out.push(format!("{page}: `tickctl {}` has no option {flag}", path.join(" ")));
                } else if !reference.contains(flag) {
                    out.push(format!("{page}: `tickctl {} {flag}` is not in docs/tickctl.md", path.join(" ")));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn clean(w: &str) -> &str {
    w.trim_matches(|c| matches!(c, '(' | ')' | ',' | '.' | ';' | ':' | '"' | '\'' | '[' | ']' | '`'))
}

/// Kind 20: every function of the example target template reserves its concurrency, as
/// `docs/targets.md` asks (at least drains × calls). Pure.
fn unreserved_functions(example: &Value) -> Vec<String> {
    example["Resources"]
        .as_mapping()
        .into_iter()
        .flatten()
        .filter(|(_, r)| r["Type"].as_str() == Some("AWS::Serverless::Function"))
        .filter(|(_, r)| r["Properties"]["ReservedConcurrentExecutions"].is_null())
        .map(|(n, _)| format!("examples/targets.yaml: {} reserves no concurrency", n.as_str().unwrap_or_default()))
        .collect()
}

// ---- the facts the checks are held to ----

fn parameter_defaults() -> BTreeMap<String, String> {
    let t = template();
    t["Parameters"]
        .as_mapping()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let d = match untag(&v["Default"]) {
                Value::String(s) => s.clone(),
                other => serde_yaml_ng::to_string(other).unwrap().trim().to_string(),
            };
            (k.as_str().unwrap().to_string(), d)
        })
        .collect()
}

/// The options `tickctl <path> --help` lists.
fn options_of(path: &[&str]) -> Option<BTreeSet<String>> {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_tickctl-cli")).args(path).arg("--help").output().ok()?;
    if !o.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    Some(
        text.lines()
            .filter(|l| l.starts_with("  "))
            .flat_map(|l| {
                l.split_whitespace()
                    .map(|w| w.trim_end_matches(','))
                    .filter(|w| w.starts_with("--"))
                    .map(str::to_string)
                    .take(1)
            })
            .collect(),
    )
}

fn assert_none(what: &str, problems: Vec<String>) {
    assert!(problems.is_empty(), "{what}:\n  {}", problems.join("\n  "));
}

fn one(page: &str, text: &str) -> Vec<Page> {
    vec![(page.to_string(), text.to_string())]
}

#[test]
fn prose_states_each_parameters_default_as_the_template_does() {
    let defaults = parameter_defaults();
    assert_eq!(defaults["WorkerConcurrency"], "4");
    let drifted = one("docs/deploy.md", "Each drain is one of `WorkerConcurrency` (default 2) slots.\n");
    assert_eq!(prose_defaults(&drifted, &defaults).len(), 1);
    assert!(prose_defaults(&one("x", "set `WorkerConcurrency=8` for more\n"), &defaults).is_empty());
    assert_none("prose defaults", prose_defaults(&all_pages(), &defaults));
}

#[test]
fn units_an_invoke_are_the_target_batchs_default() {
    let batch = parameter_defaults()["TargetBatch"].clone();
    let drifted = one("README.md", "It receives up to 100 units an Invoke.\n");
    assert_eq!(batch_claims(&drifted, &batch).len(), 1);
    assert!(batch_claims(&one("x", "up to 100 units an Invoke with `TargetBatch` raised.\n"), &batch).is_empty());
    assert_none("units an Invoke", batch_claims(&all_pages(), &batch));
}

/// The alarms deployed with the template's defaults, and those only `ThrottleAlarms` deploys.
fn alarm_counts() -> (usize, usize) {
    let on = crate::idle_day::deployed_resources(&[], "AWS::CloudWatch::Alarm");
    let throttle = crate::idle_day::deployed_resources(&["ThrottleAlarms=true"], "AWS::CloudWatch::Alarm");
    (on.len(), throttle.len() - on.len())
}

#[test]
fn the_metrics_and_alarms_counted_are_the_stacks() {
    let metrics = tickwork::meter::METRICS.len();
    let (alarms, throttle) = alarm_counts();
    assert!(alarms > 10 && throttle > 0, "{alarms} {throttle}");
    let drifted = one("docs/operations.md", "- **Four custom metrics**, in the namespace.\n");
    assert_eq!(counts(&drifted, metrics, alarms, throttle).len(), 1);
    let drifted = one("docs/operations.md", "Thirteen alarms watch it.\n");
    assert_eq!(counts(&drifted, metrics, alarms, throttle).len(), 1);
    assert_none("counts", counts(&all_pages(), metrics, alarms, throttle));
}

/// The names a page's alarm list gives (the bullet that opens `**<N> alarms**:`), against the
/// alarms the template deploys at its defaults: each deployed alarm named, none named that it
/// lacks. Why: the operations page listed its alarms without `QueueLagAlarm`, and a count that
/// agrees says nothing of the names. Pure.
fn alarm_list(pages: &[Page], deployed: &BTreeSet<String>) -> Vec<String> {
    let mut problems = Vec::new();
    for (page, text) in pages {
        let mut lines = text.lines().skip_while(|l| !(l.starts_with("- **") && l.contains(" alarms**:")));
        let Some(first) = lines.next() else { continue };
        let mut list = first.to_string();
        list.extend(lines.take_while(|l| l.starts_with("  ")).map(|l| format!(" {l}")));
        // Up to the throttle alarms, which a parameter adds.
        let list = list.split("With `ThrottleAlarms").next().unwrap_or_default();
        let named: BTreeSet<String> =
            list.split('`').skip(1).step_by(2).filter(|n| n.ends_with("Alarm")).map(str::to_string).collect();
        for missing in deployed.difference(&named) {
            problems.push(format!("{page}: its alarm list leaves out `{missing}`"));
        }
        for extra in named.difference(deployed) {
            problems.push(format!("{page}: its alarm list names `{extra}`, which the template does not deploy"));
        }
    }
    problems
}

#[test]
fn the_alarm_list_names_every_alarm_the_stack_deploys() {
    let deployed = crate::idle_day::deployed_resources(&[], "AWS::CloudWatch::Alarm");
    assert!(deployed.contains("QueueLagAlarm"), "{deployed:?}");
    let listed: Vec<String> = deployed.iter().filter(|a| *a != "QueueLagAlarm").map(|a| format!("`{a}`")).collect();
    let drifted = one("docs/operations.md", &format!("- **Thirteen alarms**: {}.\n", listed.join(", ")));
    assert_eq!(alarm_list(&drifted, &deployed), ["docs/operations.md: its alarm list leaves out `QueueLagAlarm`"]);
    let pages = all_pages();
    assert!(pages.iter().any(|(_, t)| t.contains(" alarms**:")), "the operations page lists its alarms");
    assert_none("alarm list", alarm_list(&pages, &deployed));
}

#[test]
fn every_page_routes_the_same_kinds_to_a_function_target() {
    let mut drifted = one("README.md", "add `FunctionTargetKinds=pulse` to it\n");
    drifted.extend(one("docs/targets.md", "FunctionTargetKinds=\\\"pulse,sched\\\"\n"));
    assert_eq!(target_kinds(&drifted).len(), 2);
    let pages = all_pages();
    assert!(pages.iter().filter(|(_, t)| t.contains("FunctionTargetKinds=")).count() >= 3);
    assert_none("target kinds", target_kinds(&pages));
}

#[test]
fn every_sam_deploy_names_its_environment() {
    let drifted = one("docs/targets.md", "```\nsam deploy --stack-name tickwork --parameter-overrides A=b\n```\n");
    assert_eq!(sam_deploys(&drifted).len(), 2);
    let continued = one("docs/deploy.md", "```sh\nsam deploy --template-file t.yaml \\\n  --stack-name x\n```\n");
    assert_eq!(sam_deploys(&continued).len(), 1, "a continued line is one command");
    let warning = one("docs/targets.md", "Do not pass `--parameter-overrides` to `sam deploy`.\n");
    assert!(sam_deploys(&warning).is_empty());
    assert_none("sam deploy", sam_deploys(&all_pages()));
}

#[test]
fn the_prerequisites_name_what_make_installs() {
    let makefile = read("Makefile");
    let drifted = "## Prerequisites\n\n| Rust | 1.85 |\n\n## Deploy: dry run first\n";
    assert!(prerequisites(drifted, &makefile).len() >= 5, "{:?}", prerequisites(drifted, &makefile));
    assert_none("prerequisites", prerequisites(&read("README.md"), &makefile));
}

#[test]
fn the_region_is_the_one_samconfig_sets() {
    let samconfig = read("samconfig.toml");
    let drifted = one(
        "docs/deploy.md",
        "Credentials and the region come from your AWS configuration unless the file sets them.\n",
    );
    assert_eq!(regions(&drifted, &samconfig).len(), 2, "the claim, and the region never named");
    assert_none("regions", regions(&all_pages(), &samconfig));
}

#[test]
fn no_page_asks_for_a_target_after_one_that_runs_it() {
    let runs = runs(&read("Makefile"));
    assert!(runs["deploy"].contains("stack-env"), "{:?}", runs.get("deploy"));
    assert!(runs["test"].contains("deps"), "{:?}", runs.get("test"));
    let drifted = one("docs/deploy.md", "```sh\nmake deploy ENV=dev\nmake stack-env ENV=dev\n```\n");
    assert_eq!(rerun_targets(&drifted, &runs).len(), 1);
    let listed = one("docs/operations.md", "```sh\nmake deploy ENV=dev  # deploy\nmake stack-env  # outputs\n```\n");
    assert!(rerun_targets(&listed, &runs).is_empty(), "a list of targets is not a sequence");
    assert_none("targets run twice", rerun_targets(&all_pages(), &runs));
}

#[test]
fn a_link_about_handlers_serves_every_example_language() {
    let languages: Vec<String> = std::fs::read_dir(crate::docs::root().join("examples"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix("-handler").map(str::to_string))
        .collect();
    assert!(languages.len() >= 2, "{languages:?}");
    let page_at = |p: &str| std::fs::read_to_string(crate::docs::root().join(p)).ok();
    let drifted = one("README.md", "Test your handlers locally first ([your own job](docs/own-job.md)).\n");
    assert!(!handler_links(&drifted, &languages, &page_at).is_empty(), "own-job.md is Rust-only");
    assert_none("handler links", handler_links(&all_pages(), &languages, &page_at));
}

/// Reruns a transcript's command when it is deterministic: `tickctl cost`, the model.
fn rerun(cmd: &str) -> Option<String> {
    let args = cmd.strip_prefix("tickctl cost")?;
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_tickctl-cli"))
        .arg("cost")
        .args(args.split_whitespace())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "tickctl cost{args}: {}", String::from_utf8_lossy(&o.stderr));
    Some(String::from_utf8_lossy(&o.stdout).to_string())
}

#[test]
fn every_transcript_is_regenerated_or_dated() {
    let stale = "```\n$ make watch\n...\nready: local-shard-7\n```\n";
    assert_eq!(transcripts("docs/local-servers.md", stale, &|_| None).len(), 1);
    let stale = "```\n$ tickctl cost --tenants 10\n  8 queue shards\n```\n";
    assert_eq!(transcripts("docs/cost.md", stale, &|_| Some("1 queue shard\n".into())).len(), 1);
    let dated = "A run made on 2026-12-01:\n\n```\n$ make run\nwall time: 1 s\n```\n";
    assert!(transcripts("docs/benchmarks.md", dated, &|_| None).is_empty());
    let mut problems = Vec::new();
    let reran = std::cell::Cell::new(0);
    for (page, text) in all_pages() {
        problems.extend(transcripts(&page, &text, &|cmd| {
            let out = rerun(cmd);
            reran.set(reran.get() + usize::from(out.is_some()));
            out
        }));
    }
    assert!(reran.get() >= 1, "{} transcripts regenerated", reran.get());
    assert_none("transcripts", problems);
}

#[test]
fn no_page_cites_an_internal_issue_a_commit_or_a_session() {
    for s in ["(issue 32)", "see #14 for why", "fixed in 2e75b22", "since stop 36"] {
        assert_eq!(internal_references(s).len(), 1, "{s}");
    }
    for s in ["1,000 tenants", "a 2,000-unit item", "the `0001` zone", "cafe", "https://github.com/x/y/issues/3"] {
        assert!(internal_references(s).is_empty(), "{s}");
    }
    let mut found = Vec::new();
    for (page, text) in all_pages() {
        found.extend(internal_references(&text).into_iter().map(|r| format!("{page}: {r}")));
    }
    assert_none("internal references", found);
}

#[test]
fn every_measured_figure_names_what_measured_it() {
    let drifted = "An idle tick with 100,000 schedules is one read (measured; `make test` runs it at 5,000).\n";
    assert_eq!(unsourced_measurements("docs/schedules.md", drifted).len(), 1);
    assert_eq!(unsourced_measurements("docs/x.md", "It is fast (measured).\n").len(), 1);
    let mut found = Vec::new();
    for (page, text) in all_pages() {
        found.extend(unsourced_measurements(&page, &text));
    }
    assert_none("measurements", found);
}

#[test]
fn a_comparison_with_the_scheduler_says_when_it_holds() {
    let drifted = one("docs/schedules.md", "This replaces one EventBridge Scheduler schedule per tenant.\n");
    assert_eq!(scheduler_claims(&drifted).len(), 1);
    let held = one("README.md", "below half a million tenants one Scheduler schedule per tenant costs less.\n");
    assert!(scheduler_claims(&held).is_empty());
    assert_none("Scheduler claims", scheduler_claims(&all_pages()));
}

#[test]
fn every_time_given_for_make_run_is_the_measured_one() {
    let bench = read("docs/benchmarks.md");
    let wall = bench.lines().find_map(|l| l.strip_prefix("wall time: ")).expect("make run's wall time");
    let measured: f64 = wall.trim_end_matches(" s").parse().unwrap();
    let drifted = one("README.md", "make run     # the pulse sweep (~3 min)\n");
    assert_eq!(run_durations(&drifted, 62.0).len(), 1);
    assert_none("make run's time", run_durations(&all_pages(), measured));
}

#[test]
fn every_tickctl_option_a_page_gives_is_its_commands_and_in_the_reference() {
    let drifted = one(
        "docs/runbook.md",
        "run `tickctl invoke queue-worker --now` and `tickctl tenants add x --owed-for 2026-01-01`\n",
    );
    let problems = tickctl_options(&drifted, &options_of);
    assert!(problems.iter().any(|p| p.contains("--owed-for")), "{problems:?}");
    let mut shown = drifted.clone();
    shown.extend(one("docs/tickctl.md", "| `invoke FUNCTION [--now TIME]` | run one handler |\n"));
    assert!(
        !tickctl_options(&shown, &options_of).iter().any(|p| p.contains("--now")),
        "a bracketed option is in the reference"
    );
    assert_none("tickctl options", tickctl_options(&all_pages(), &options_of));
}

#[test]
fn the_example_targets_reserve_their_concurrency() {
    let drifted: Value = serde_yaml_ng::from_str(
        "Resources:\n  H:\n    Type: AWS::Serverless::Function\n    Properties:\n      Runtime: python3.12\n",
    )
    .unwrap();
    assert_eq!(unreserved_functions(&drifted).len(), 1);
    let example: Value = serde_yaml_ng::from_str(&read("examples/targets.yaml")).unwrap();
    assert_none("reserved concurrency", unreserved_functions(&example));
}

/// The due-shard count and the fire concurrency the schedules and cost pages give are the code's
/// (`DUE_SHARDS`, `TICKWORK_PULSE_FIRE_CONCURRENCY`'s default): both moved when the shards came to
/// fire at once, and a page left at the old figures would describe a sweep that is not deployed.
#[test]
fn the_due_shards_and_fire_concurrency_the_docs_give_are_the_codes() {
    let flat = |page: &str| read(page).split_whitespace().collect::<Vec<_>>().join(" ");
    let (schedules, cost) = (flat("docs/schedules.md"), flat("docs/cost.md"));
    let n = tickwork::schedules::DUE_SHARDS;
    let fc =
        pulse_sweep::PulseConfig::from_env(&tickwork::config::Env::from_pairs([]), std::time::Duration::from_secs(1))
            .unwrap()
            .fire_concurrency;
    for (page, text, want) in [
        ("schedules.md", &schedules, format!("each of the {n} due shards")),
        ("schedules.md", &schedules, format!("the first pages of {fc} groups at once in each shard")),
        ("schedules.md", &schedules, format!("one of {n}), counted in its transaction")),
        ("cost.md", &cost, format!("the {n} due shards at once")),
        ("cost.md", &cost, format!("first member page {fc} at a time")),
        ("cost.md", &cost, format!("{fc} in each of {n} shards")),
    ] {
        assert!(text.contains(&want), "docs/{page} does not say `{want}`");
    }
}
