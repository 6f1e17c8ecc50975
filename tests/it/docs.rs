//! The docs held to the code: the configuration reference is generated from `tickwork::env`'s
//! declarations and every bound it states is the one its readers enforce; the runbook's alarm
//! table is `template.yaml`'s alarms; every `make` target and `tickctl` command a page names
//! exists. `DOCS_UPDATE=1` rewrites the configuration reference's table from the declarations.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_yaml_ng::Value;
use tickwork::config::Env;
use tickwork::env::{ConfigError, VARS};

pub(crate) fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub(crate) fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// One row of the configuration reference, from a declaration and what the template sets it to
/// (`stack`; a variable the template leaves unset runs at the code's default). Pure.
fn row(v: &tickwork::env::Var, stack: &BTreeMap<String, String>) -> String {
    let set = stack.get(v.name).map(String::as_str).unwrap_or("not set (the default)");
    format!("| `{}` | {} | {set} | {} | {} |", v.name, v.default, v.read_by, v.doc)
}

/// What the template sets each variable to, in a reader's words, function by function: the
/// Globals under each function's own variables, a parameter shown with its default. A variable
/// every function gets the same value of is one value; otherwise each value names its functions.
/// (The reference showed only the code's defaults, which are not what a deployed stack runs:
/// queue shards 8 against 1, visibility 120 against 330, the sweep's interval 60 against 900.)
/// Pure over the template.
fn stack_values(t: &Value) -> BTreeMap<String, String> {
    let render = |v: &Value| -> String {
        match v {
            Value::Tagged(tg) => {
                let inner = tg.value.as_str().unwrap_or_default();
                match tg.tag.to_string().as_str() {
                    "!Ref" if inner == "AWS::StackName" => "the stack's name".to_string(),
                    "!Ref" if !t["Parameters"][inner].is_null() => {
                        let d = match untag(&t["Parameters"][inner]["Default"]) {
                            Value::String(s) if s.is_empty() => "empty".to_string(),
                            Value::String(s) => s.clone(),
                            other => serde_yaml_ng::to_string(other).unwrap().trim().to_string(),
                        };
                        format!("`{inner}` ({d})")
                    }
                    "!Ref" => format!("`{inner}`'s name"),
                    "!Sub" => format!("`{inner}`"),
                    "!GetAtt" => format!("`{inner}`"),
                    _ => "set from the parameters".to_string(),
                }
            }
            Value::String(s) if s.is_empty() => "empty".to_string(),
            Value::String(s) => s.clone(),
            other => serde_yaml_ng::to_string(other).unwrap().trim().to_string(),
        }
    };
    let globals = t["Globals"]["Function"]["Environment"]["Variables"].as_mapping().cloned().unwrap_or_default();
    let mut per: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let mut functions = 0;
    for (_, r) in t["Resources"].as_mapping().unwrap() {
        if r["Type"].as_str() != Some("AWS::Serverless::Function") {
            continue;
        }
        functions += 1;
        let name = r["Properties"]["CodeUri"].as_str().unwrap_or_default().trim_start_matches("crates/").to_string();
        let mut vars = globals.clone();
        for (k, v) in r["Properties"]["Environment"]["Variables"].as_mapping().into_iter().flatten() {
            vars.insert(k.clone(), v.clone());
        }
        for (k, v) in &vars {
            per.entry(k.as_str().unwrap().to_string()).or_default().entry(render(v)).or_default().push(name.clone());
        }
    }
    per.into_iter()
        .map(|(var, values)| {
            let text = match values.iter().next() {
                Some((v, fns)) if values.len() == 1 && fns.len() == functions => v.clone(),
                _ => values.iter().map(|(v, fns)| format!("{v} ({})", fns.join(", "))).collect::<Vec<_>>().join("; "),
            };
            (var, text)
        })
        .collect()
}

#[test]
fn the_stack_column_is_each_functions_value() {
    let t: Value = serde_yaml_ng::from_str(
        "Parameters:\n  Shards:\n    Default: 1\nGlobals:\n  Function:\n    Environment:\n      Variables:\n        A: !Ref Shards\n        B: \"120\"\nResources:\n  S:\n    Type: AWS::Serverless::Function\n    Properties:\n      CodeUri: crates/sweep\n  W:\n    Type: AWS::Serverless::Function\n    Properties:\n      CodeUri: crates/worker\n      Environment:\n        Variables:\n          B: \"330\"\n",
    )
    .unwrap();
    let v = stack_values(&t);
    assert_eq!(v["A"], "`Shards` (1)", "a parameter with its default, the same for every function");
    assert_eq!(v["B"], "120 (sweep); 330 (worker)", "a function's own value over the Globals, named");
}

#[test]
fn the_configuration_reference_is_generated_from_the_declarations() {
    let path = "docs/configuration.md";
    let doc = read(path);
    let stack = stack_values(&template());
    let want: Vec<String> = VARS.iter().map(|v| row(v, &stack)).collect();
    let lines: Vec<&str> = doc.lines().collect();
    let first = lines.iter().position(|l| l.starts_with("| `TICKWORK_")).expect("the table");
    let end = first + lines[first..].iter().take_while(|l| l.starts_with("| `TICKWORK_")).count();
    let have: Vec<String> = lines[first..end].iter().map(|l| l.to_string()).collect();
    if have != want && std::env::var("DOCS_UPDATE").is_ok_and(|v| v == "1") {
        let mut out: Vec<String> = lines[..first].iter().map(|l| l.to_string()).collect();
        out.extend(want.iter().cloned());
        out.extend(lines[end..].iter().map(|l| l.to_string()));
        std::fs::write(root().join(path), out.join("\n") + "\n").unwrap();
        return;
    }
    for (h, w) in have.iter().zip(&want) {
        assert_eq!(h, w, "{path} differs from crates/tickwork/src/env.rs (DOCS_UPDATE=1 rewrites the table)");
    }
    assert_eq!(have.len(), want.len(), "{path} lists {} variables, env.rs declares {}", have.len(), want.len());
}

/// Everything function `f` reads at start-up, as it reads it.
fn reads(f: &str, env: &Env) -> Result<(), ConfigError> {
    let skew = Duration::from_secs(1);
    tickwork::config::CoreConfig::from_env(env)?;
    match f {
        "pulse-sweep" => {
            pulse_sweep::PulseConfig::from_env(env, skew)?;
            tickwork::config::tenant_shards(env)?;
            tickwork::queue::QueueConfig::from_env(env)?;
        }
        "tenant-fanout" => {
            tenant_fanout::FanoutConfig::from_env(env, skew)?;
            tickwork::config::tenant_shards(env)?;
            tickwork::queue::QueueConfig::from_env(env)?;
        }
        "queue-worker" => {
            queue_worker::WorkerConfig::from_env(env)?;
            tickwork::queue::QueueConfig::from_env(env)?;
            queue_worker::targets::function::function_batch(env)?;
        }
        "archiver" => {
            archiver::ArchiverConfig::from_env(env, skew)?;
        }
        other => panic!("no reader `{other}`"),
    }
    Ok(())
}

/// `(lo, hi)` of a declaration's doc that states `(lo..=hi)` or `(lo..=hi s`. Pure.
fn bounds(doc: &str) -> Option<(u64, u64)> {
    let i = doc.find("..=")?;
    let lo: String =
        doc[..i].chars().rev().take_while(char::is_ascii_digit).collect::<Vec<_>>().into_iter().rev().collect();
    let hi: String = doc[i + 3..].chars().take_while(char::is_ascii_digit).collect();
    Some((lo.parse().ok()?, hi.parse().ok()?))
}

/// Every `lo..=hi` a declaration states is what each function that reads it accepts and refuses:
/// `hi` and `lo` pass, `hi + 1` and `lo - 1` are refused naming the variable. (The archiver's
/// page size was documented up to 1,000 and refused above 500.)
#[test]
fn every_bound_the_reference_states_is_its_readers_bound() {
    let functions = ["pulse-sweep", "tenant-fanout", "queue-worker", "archiver"];
    let base = [("TICKWORK_ARCHIVE_BUCKET", "b")];
    let mut checked = 0;
    for v in VARS {
        let Some((lo, hi)) = bounds(v.doc) else { continue };
        let readers: Vec<&str> = if v.read_by == "all" { functions.to_vec() } else { v.read_by.split(", ").collect() };
        let named = |value: u64, f: &str| {
            let value = value.to_string();
            let env = Env::from_pairs(base.iter().copied().chain([(v.name, value.as_str())]));
            match reads(f, &env) {
                Ok(()) => None,
                Err(e) => Some(e.var == v.name),
            }
        };
        for f in &readers {
            assert_ne!(named(hi, f), Some(true), "{} = {hi} (its stated maximum) is refused by {f}", v.name);
            assert_eq!(
                named(hi + 1, f),
                Some(true),
                "{} = {} (above its stated maximum) is not refused by {f}",
                v.name,
                hi + 1
            );
            assert_ne!(named(lo, f), Some(true), "{} = {lo} (its stated minimum) is refused by {f}", v.name);
            if lo > 0 {
                assert_eq!(
                    named(lo - 1, f),
                    Some(true),
                    "{} = {} (below its stated minimum) is not refused by {f}",
                    v.name,
                    lo - 1
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "{checked} bounds checked");
}

pub(crate) fn template() -> Value {
    serde_yaml_ng::from_str(&read("template.yaml")).unwrap()
}

pub(crate) fn untag(v: &Value) -> &Value {
    match v {
        Value::Tagged(t) => &t.value,
        other => other,
    }
}

/// Every `MetricName` under `v`.
fn metric_names(v: &Value, out: &mut BTreeSet<String>) {
    match untag(v) {
        Value::Mapping(m) => {
            for (k, x) in m {
                if k.as_str() == Some("MetricName") {
                    if let Some(s) = untag(x).as_str() {
                        out.insert(s.to_string());
                    }
                }
                metric_names(x, out);
            }
        }
        Value::Sequence(s) => s.iter().for_each(|x| metric_names(x, out)),
        _ => {}
    }
}

/// A period in the runbook's words. Pure.
fn period(secs: u64) -> String {
    if secs % 3600 == 0 {
        format!("{} h", secs / 3600)
    } else {
        format!("{} min", secs / 60)
    }
}

/// Every alarm of the template has its row in the runbook's table (by name, `<Fn>` standing for a
/// function and `*` for anything), the row names its metric and states its window (period ×
/// evaluation periods, or the parameter that sets them), and says when missing data breaches.
#[test]
fn the_runbooks_alarm_table_is_the_templates() {
    let runbook = read("docs/runbook.md");
    let rows: Vec<Vec<String>> = runbook
        .lines()
        .skip_while(|l| !l.starts_with("| alarm |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect())
        .collect();
    assert!(rows.len() >= 9, "the runbook's alarm table: {rows:?}");
    let matches = |pattern: &str, name: &str| {
        let p = pattern.split('`').nth(1).unwrap_or_default();
        let (head, tail) = match (p.split_once("<Fn>"), p.split_once('*')) {
            (Some((h, t)), _) | (_, Some((h, t))) => (h, t),
            _ => return p == name,
        };
        name.starts_with(head) && name.ends_with(tail) && name.len() > head.len() + tail.len()
    };
    let t = template();
    let resources = untag(&t["Resources"]).as_mapping().unwrap();
    let mut seen = BTreeMap::new();
    for (name, r) in resources {
        if untag(&r["Type"]).as_str() != Some("AWS::CloudWatch::Alarm") {
            continue;
        }
        let name = name.as_str().unwrap();
        let p = &r["Properties"];
        let row =
            rows.iter().find(|row| matches(&row[0], name)).unwrap_or_else(|| panic!("{name}: no row in the runbook"));
        let mut metrics = BTreeSet::new();
        metric_names(p, &mut metrics);
        for m in &metrics {
            assert!(row[1].contains(m.as_str()), "{name}: its row does not name the metric {m}: {}", row[1]);
        }
        let secs = untag(&p["Period"]).as_u64().or_else(|| {
            untag(&p["Metrics"])
                .as_sequence()
                .and_then(|s| s.iter().find_map(|m| untag(&m["MetricStat"]["Period"]).as_u64()))
        });
        let secs = secs.unwrap_or_else(|| panic!("{name}: no period"));
        let evals = match &p["EvaluationPeriods"] {
            Value::Tagged(t) => format!("`{}`", t.value.as_str().unwrap()),
            v => untag(v).as_u64().unwrap().to_string(),
        };
        let window = format!("{} × {evals}", period(secs));
        // As a whole: `5 min × 1` is not inside `15 min × 1`.
        let whole = row[2].match_indices(&window).any(|(i, _)| !row[2][..i].ends_with(|c: char| c.is_ascii_digit()));
        assert!(whole, "{name}: the runbook's window is `{}`, the template's {window}", row[2]);
        let breaching = untag(&p["TreatMissingData"]).as_str() == Some("breaching");
        assert_eq!(
            row[3].contains("missing data breaches"),
            breaching,
            "{name}: missing data in the runbook: {}",
            row[3]
        );
        *seen.entry(row[0].clone()).or_insert(0) += 1;
    }
    for row in &rows {
        assert!(seen.contains_key(&row[0]), "the runbook's {} is no alarm of the template", row[0]);
    }
}

/// A page's lines, each with whether it is inside a fenced block; the fence lines themselves
/// left out. Pure: the one walk every docs check that tells code from prose makes.
pub(crate) fn fenced_lines(md: &str) -> Vec<(bool, &str)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else {
            out.push((fenced, line));
        }
    }
    out
}

/// Text a reader would type: inline code spans and fenced blocks. Pure.
pub(crate) fn code_spans(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (fenced, line) in fenced_lines(md) {
        if fenced {
            out.push(line.to_string());
        } else {
            out.extend(line.split('`').skip(1).step_by(2).map(str::to_string));
        }
    }
    out
}

pub(crate) fn pages() -> Vec<(String, String)> {
    let mut out = vec![("README.md".to_string(), read("README.md"))];
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            out.push((p.display().to_string(), std::fs::read_to_string(&p).unwrap()));
        }
    }
    out
}

/// The Makefile's targets, and the prefixes of its pattern rules (`invoke-%`).
fn make_targets() -> (BTreeSet<String>, Vec<String>) {
    let mut targets = BTreeSet::new();
    let mut patterns = Vec::new();
    for l in read("Makefile").lines() {
        // A static pattern rule (`$(addprefix invoke-,$(FUNCTIONS)): invoke-%: ...`).
        patterns.extend(l.split_whitespace().filter_map(|t| t.strip_suffix("%:")).map(str::to_string));
        let Some((name, _)) = l.split_once(':') else { continue };
        if name.is_empty() || name.starts_with(['\t', ' ', '.', '#']) || name.contains('=') || name.contains(' ') {
            continue;
        }
        match name.strip_suffix('%') {
            Some(p) => patterns.push(p.to_string()),
            None => {
                targets.insert(name.to_string());
            }
        }
    }
    (targets, patterns)
}

/// The sections `make bench BENCH=…` takes: the bench's own list (`SECTIONS` in its `main.rs`,
/// which refuses any other).
fn bench_sections() -> BTreeSet<String> {
    let src = read("crates/bench/src/main.rs");
    let at = src.find("pub const SECTIONS").expect("the bench's SECTIONS");
    let list = src[at..].split_once("=").expect("a list").1.split_once("];").expect("its end").0;
    let out: BTreeSet<String> = list.split('"').skip(1).step_by(2).map(str::to_string).collect();
    assert!(out.contains("burst") && out.contains("scale"), "{out:?}");
    out
}

/// What is wrong with the words of a `make` command after `make` (up to a shell separator), when
/// anything is: each is a target (or a pattern's) or a `VAR=value`, and `BENCH` names the bench's
/// sections. Why: a page headed `make bench scale` (make then builds a target `scale`, which does
/// not exist) where the command is `make bench BENCH=scale`. Pure.
fn make_arguments_problem(
    words: &[&str],
    targets: &BTreeSet<String>,
    patterns: &[String],
    bench: &BTreeSet<String>,
) -> Option<String> {
    for w in words.iter().take_while(|w| !matches!(**w, "#" | "&&" | "||" | ";" | "|" | ">" | "2>&1" | "…")) {
        if let Some((var, value)) = w.split_once('=') {
            // A placeholder (`BENCH=<section>`) stands for any.
            let placeholder = value.starts_with('<') || value.contains('$');
            // The Makefile hands `$(BENCH)` to the bench as one argument: one section.
            if var == "BENCH" && !placeholder && !bench.contains(value) {
                return Some(format!("`{w}` names no bench section (they are {bench:?})"));
            }
            continue;
        }
        if !(targets.contains(*w) || patterns.iter().any(|p| w.starts_with(p.as_str()))) {
            return Some(format!("`{w}` after `make` is no target of the Makefile (a setting is `NAME=value`)"));
        }
    }
    None
}

#[test]
fn a_make_command_with_a_word_that_is_no_target_or_a_bench_section_that_is_none_is_named() {
    let targets: BTreeSet<String> = ["bench", "test", "chaos"].map(String::from).into();
    let bench: BTreeSet<String> = ["scale", "burst"].map(String::from).into();
    let check = |cmd: &str| {
        let words: Vec<&str> = cmd.split_whitespace().collect();
        make_arguments_problem(&words, &targets, &["invoke-".to_string()], &bench)
    };
    assert_eq!(check("bench BENCH=scale"), None);
    assert_eq!(check("chaos SEED=39"), None);
    assert_eq!(check("bench BENCH=<section>"), None, "a placeholder");
    assert_eq!(check("test # then"), None);
    assert!(check("bench scale").unwrap().contains("`scale` after `make` is no target"), "the drifted heading");
    assert!(check("bench BENCH=scales").unwrap().contains("no bench section"));
    assert!(check("bench BENCH=scale,burst").is_some(), "one argument, which the bench refuses");
}

/// The subcommands `tickctl <path> --help` lists.
fn subcommands(path: &[&str]) -> Option<BTreeSet<String>> {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_tickctl-cli")).args(path).arg("--help").output().unwrap();
    if !o.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    Some(
        text.lines()
            .skip_while(|l| !l.starts_with("Commands:"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .filter(|c| c != "help")
            .collect(),
    )
}

/// Every `make <target>` and `tickctl <command> [<subcommand>]` a page shows a reader exists.
#[test]
fn every_make_target_and_tickctl_command_a_page_names_exists() {
    let (targets, patterns) = make_targets();
    let bench = bench_sections();
    assert!(targets.contains("test") && targets.contains("run"), "{targets:?}");
    let top = subcommands(&[]).expect("tickctl --help");
    let mut checked = 0;
    for (page, md) in pages() {
        for span in code_spans(&md) {
            let words: Vec<&str> =
                span.split_whitespace().map(|w| w.trim_end_matches([')', ',', '.', ';', ':', '"', '\''])).collect();
            for (i, w) in words.iter().enumerate() {
                let next = words.get(i + 1).copied().unwrap_or_default();
                if *w == "make" && next.starts_with(|c: char| c.is_ascii_lowercase()) && !next.contains('=') {
                    let known = targets.contains(next) || patterns.iter().any(|p| next.starts_with(p.as_str()));
                    assert!(known, "{page}: `make {next}` is no target of the Makefile");
                    if let Some(problem) = make_arguments_problem(&words[i + 1..], &targets, &patterns, &bench) {
                        panic!("{page}: `{span}`: {problem}");
                    }
                    checked += 1;
                }
                if *w == "tickctl" || w.ends_with("/tickctl") {
                    // Skip the global options (and the values of those that take one).
                    let mut j = i + 1;
                    while let Some(o) = words.get(j).filter(|o| o.starts_with('-')) {
                        j += if matches!(*o, "--stack" | "--env-file") { 2 } else { 1 };
                    }
                    let Some(cmd) = words.get(j).filter(|c| c.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
                    else {
                        continue;
                    };
                    if cmd.is_empty() || *cmd == "-" {
                        continue;
                    }
                    assert!(top.contains(*cmd), "{page}: `tickctl {cmd}` is no command of tickctl");
                    if let (Some(subs), Some(sub)) = (subcommands(&[cmd]), words.get(j + 1)) {
                        if !subs.is_empty()
                            && !sub.is_empty()
                            && sub.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                        {
                            assert!(subs.contains(*sub), "{page}: `tickctl {cmd} {sub}` is no command of tickctl");
                        }
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 30, "{checked} names checked");
}

/// The parameter tables of `docs/deploy.md` and `docs/operations.md`: each parameter the template
/// has, named in the first cell of a row (alone or in a list), with the template's default first
/// in the second cell (`empty` for an empty one), and no parameter the template lacks. (A new user
/// found the worker's concurrency documented as 2 where the template deploys 4, and whole
/// parameters missing.) Pure over the files.
fn parameter_rows(doc: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.trim().trim_matches('|').split(" | ").map(str::trim).collect();
        if cells.len() < 2 || !cells[0].starts_with('`') {
            continue;
        }
        let names: Vec<&str> = cells[0].split(", ").map(|n| n.trim_matches('`')).collect();
        if !names.iter().all(|n| {
            n.chars().next().is_some_and(|c| c.is_ascii_uppercase()) && n.chars().all(|c| c.is_ascii_alphanumeric())
        }) {
            continue;
        }
        // The defaults: one per name when the row lists several, else the cell up to its note.
        let defaults: Vec<String> = if names.len() > 1 {
            cells[1].splitn(names.len(), ", ").map(str::to_string).collect()
        } else {
            vec![cells[1].split(" (").next().unwrap_or_default().to_string()]
        };
        for (n, d) in names.iter().zip(defaults) {
            out.insert(n.to_string(), d.trim_matches('`').to_string());
        }
    }
    out
}

#[test]
fn the_parameter_tables_name_every_parameter_with_the_templates_default() {
    let t = template();
    let params = t["Parameters"].as_mapping().unwrap();
    for page in ["docs/deploy.md", "docs/operations.md"] {
        let rows = parameter_rows(&read(page));
        for (k, v) in params {
            let name = k.as_str().unwrap();
            let want = match untag(&v["Default"]) {
                Value::String(s) if s.is_empty() => "empty".to_string(),
                Value::String(s) => s.clone(),
                other => serde_yaml_ng::to_string(other).unwrap().trim().to_string(),
            };
            let have = rows.get(name).unwrap_or_else(|| panic!("{page}: no row for parameter `{name}`"));
            assert_eq!(have, &want, "{page}: `{name}`'s default");
        }
        for name in rows.keys() {
            assert!(params.contains_key(name.as_str()), "{page}: `{name}` is no parameter of the template");
        }
    }
}

/// `docs/control.md`'s price table is the control plane's model (`tickctl cost --control`): each
/// operation's requests and units, and its dollars per 1,000 to the cent's hundredth.
#[test]
fn the_control_pages_price_table_is_the_models() {
    let doc = read("docs/control.md");
    let prices = tickwork_cost::bill::Prices::default();
    let mut checked = 0;
    for line in doc.lines() {
        let cells: Vec<&str> = line.trim().trim_matches('|').split(" | ").map(str::trim).collect();
        if cells.len() != 5 || !cells[4].starts_with('$') {
            continue;
        }
        let name = cells[0].split('`').nth(1).unwrap_or_default();
        let op = tickwork_cost::control::OPS
            .iter()
            .find(|o| o.name == name)
            .unwrap_or_else(|| panic!("docs/control.md prices `{name}`, which the model does not"));
        let p = tickwork_cost::control::per_thousand(op, &prices);
        let want = [
            op.requests.to_string(),
            op.read_units.to_string(),
            op.write_units.to_string(),
            format!("${:.4}", p.total),
        ];
        assert_eq!(cells[1..], want, "docs/control.md's row of {name}");
        checked += 1;
    }
    assert_eq!(checked, tickwork_cost::control::OPS.len(), "every operation the model prices has its row");
}

/// The failed-drain chain as the pages state it is the worker's (`queue_worker::handon`): its
/// backoffs and its length, in `docs/operations.md` and the runbook.
#[test]
fn the_pages_state_the_failed_drain_chain_the_worker_runs() {
    use queue_worker::handon::{FAILED_BACKOFF_MS, MAX_FAILED_LINKS};
    let waits: Vec<String> = FAILED_BACKOFF_MS.iter().map(|ms| format!("{} s", ms / 1000)).collect();
    let words = ["zero", "one", "two", "three", "four", "five"];
    let chain = format!("{} failed drains in a row", words[MAX_FAILED_LINKS as usize]);
    for page in ["docs/operations.md", "docs/runbook.md"] {
        let text = read(page).split_whitespace().collect::<Vec<_>>().join(" ");
        for w in &waits {
            assert!(text.contains(w.as_str()), "{page} does not give the backoff {w}");
        }
        assert!(text.contains(&chain), "{page} does not say \"{chain}\"");
    }
}

/// The throttle rules the pages state (10 free throttles an item, a backoff from 1 s to 60 s) and
/// the failed settle's retries (2 s and 8 s) are the worker's (`queue_worker::throttle`,
/// `queue_worker::drain::SETTLE_RETRY_MS`).
#[test]
fn the_pages_state_the_throttle_and_settle_rules_the_worker_runs() {
    use queue_worker::throttle::{FIRST_BACKOFF_MS, FREE_THROTTLES, MAX_BACKOFF_MS};
    let backoff = format!("{} s to {} s", FIRST_BACKOFF_MS / 1000, MAX_BACKOFF_MS / 1000);
    for (page, free) in [
        ("docs/targets.md", format!("throttled for free {FREE_THROTTLES} times")),
        ("docs/operations.md", "Ten throttles of an item are free".to_string()),
        ("docs/runbook.md", format!("After {FREE_THROTTLES} throttles of one item")),
    ] {
        let text = read(page).split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(text.contains(&free), "{page} does not say \"{free}\"");
        if page != "docs/runbook.md" {
            assert!(text.contains(&backoff), "{page} does not give the backoff {backoff}");
        }
    }
    assert_eq!(FREE_THROTTLES, 10, "docs/operations.md spells it out: Ten");
    let retries: Vec<String> =
        queue_worker::drain::SETTLE_RETRY_MS.iter().map(|ms| format!("{} s", ms / 1000)).collect();
    let ops = read("docs/operations.md").split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        ops.contains(&format!("tried again after {} and {}", retries[0], retries[1])),
        "operations.md: {retries:?}"
    );
}

/// `docs/schedules.md`'s fold table names the defaults `Dst::for_spec` gives: `both` for a cron
/// whose minute or hour field begins with `*`, `first` for a fixed time (shown failing with
/// `first` as every spec's default).
#[test]
fn the_fold_defaults_the_schedules_page_gives_are_the_codes() {
    use tickwork::schedules::{Dst, Fold, Spec};
    let page = read("docs/schedules.md");
    let fold = |s: &str| Dst::for_spec(&s.parse::<Spec>().unwrap()).fold;
    assert!(page.contains("| `first` (default for a fixed time) |"), "the page's `first` row");
    assert!(
        page.contains("| `both` (default for a cron whose minute or hour field begins with `*`) |"),
        "the page's `both` row"
    );
    for wild in ["cron */15 * * * *", "cron 0 * * * *", "cron * 2 * * *"] {
        assert!(page.contains(&format!("`{}`", wild.trim_start_matches("cron "))), "{wild} is the page's example");
        assert_eq!(fold(wild), Fold::Both, "{wild}");
    }
    for fixed in ["cron 30 2 * * *", "cron 0 0-23/2 * * *", "daily 02:30"] {
        assert_eq!(fold(fixed), Fold::First, "{fixed}");
    }
    assert!(page.contains("`30 2 * * *` or `0 0-23/2 * * *`"), "the page's fixed examples");
}

/// A number as a page writes it (`1,100,042`, `70.7 s`, `**2,240 s**`). Pure.
fn figure(cell: &str) -> Option<f64> {
    let n: String = cell.trim_matches('*').split_whitespace().next()?.replace(',', "");
    n.trim_matches('*').parse().ok()
}

/// The options a row of a page's table adds to its command: its backquoted `--flag value`s, on
/// top of the row before's when it begins "the same" (a later value of a flag replaces the
/// earlier). Pure.
fn row_options(label: &str, before: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut opts = if label.starts_with("the same") { before.clone() } else { BTreeMap::new() };
    for quoted in label.split('`').skip(1).step_by(2).filter(|q| q.starts_with("--")) {
        let mut w = quoted.split_whitespace();
        let flag = w.next().unwrap_or_default().to_string();
        opts.insert(flag, w.next().unwrap_or_default().to_string());
    }
    opts
}

#[test]
fn a_rows_options_are_its_own_and_the_same_rows_before_it() {
    let first = row_options("every one its own (`--burst-groups 1000000`)", &BTreeMap::new());
    let next = row_options("the same at 50 ms (`--latency 50ms`)", &first);
    assert_eq!(next.len(), 2);
    assert_eq!(row_options("one zone's `daily 08:00` (one group)", &next), BTreeMap::new());
    assert_eq!(figure("**2,240 s** (five invocations)"), Some(2240.0));
    assert_eq!(figure("1,100,042"), Some(1_100_042.0));
}

/// `docs/cost.md`'s table of a million fires at one instant is what `tickctl cost --schedules`
/// says, row by row: its requests, their time and the hand-over, to the tenth of a second.
#[test]
fn the_cost_pages_burst_table_is_tickctls() {
    let doc = read("docs/cost.md");
    let base = ["--json", "cost", "--tenants", "1000000", "--schedules", "--target", "5m"];
    let (mut before, mut checked) = (BTreeMap::new(), 0);
    let section = doc.split("| a million fires due at one instant |").nth(1).expect("the burst table");
    for line in section.lines().skip(2).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim().trim_matches('|').split(" | ").map(str::trim).collect();
        let mut opts = row_options(cells[0], &before);
        before = opts.clone();
        opts.entry("--latency".into()).or_insert_with(|| "10ms".into());
        let mut args: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        for (flag, value) in &opts {
            args.push(flag.clone());
            if !value.is_empty() {
                args.push(value.clone());
            }
        }
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_tickctl-cli")).args(&args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        let out: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let t = &out["burst"]["time"];
        let got = [
            t["requests"].as_f64().unwrap(),
            (t["requests_ms"].as_f64().unwrap() / 100.0).round() / 10.0,
            (t["handover_ms"].as_f64().unwrap() / 100.0).round() / 10.0,
        ];
        let stated = [figure(cells[1]), figure(cells[2]), figure(cells[4])].map(|f| f.expect(line));
        // The page gives a time over 1,000 s to the second.
        let near = |a: f64, b: f64| (a - b).abs() <= if b >= 1000.0 { 0.5 } else { 0.05 };
        assert!(got.iter().zip(&stated).all(|(g, s)| near(*g, *s)), "docs/cost.md: {line}\ntickctl {args:?}: {got:?}");
        checked += 1;
    }
    assert_eq!(checked, 6, "every row checked");
}

/// docs/schedules.md's campaign: the first page's members and a tick's cleaning time are the code's.
#[test]
fn the_schedules_page_states_the_campaigns_first_page_and_cleaning_time_as_built() {
    let doc = read("docs/schedules.md");
    let first = format!("A one-off group's first page reads {} members", pulse_sweep::ONE_OFF_PAGE);
    assert!(doc.contains(&first), "docs/schedules.md: `{first}`");
    assert!(doc.contains(&format!("fewer than {} members retired", pulse_sweep::ONE_OFF_PAGE)));
    let clean = format!("{} s a tick (`pulse_sweep::CLEAN_FOR_MS`)", pulse_sweep::CLEAN_FOR_MS / 1000);
    assert!(doc.split_whitespace().collect::<Vec<_>>().join(" ").contains(&clean), "docs/schedules.md: `{clean}`");
}
