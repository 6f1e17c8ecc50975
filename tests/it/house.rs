//! The house rules, read from the source as a reviewer reads it:
//! - no import cycle between the modules of a crate: a module depends on another when its code
//!   (comments and test modules aside) names it, by `use crate::…`, an inline `crate::…::` path,
//!   `super::…`, a crate root's path to a child, or an item the root re-exports from it;
//! - no file of the library, the Lambda crates or `tickctl` over 350 lines of code (comments, blank
//!   lines and its test module aside), unless it holds one concept, named in [`ONE_CONCEPT`].
//!
//! Why written here rather than with `cargo modules dependencies --acyclic`: that tool builds
//! rust-analyzer's crates (a long build on CI's two cores) for a question that a page of code
//! answers from the text.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates the size rule covers: the library, the Lambdas, their shared runtime, and `tickctl`
/// (the simulator and the benchmark are tools, each a script of its own).
const SIZED: [&str; 8] =
    ["tickwork", "archiver", "pulse-sweep", "queue-worker", "tenant-fanout", "tickwork-lambda", "tickctl", "control"];

/// Lines of code (comments, blank lines and the test module aside) above which a file must say
/// what its one concept is.
const MAX_LINES: usize = 350;

/// Files over [`MAX_LINES`] that hold one concept, and which.
const ONE_CONCEPT: [(&str, &str); 1] = [(
    "crates/tickwork/src/db.rs",
    "the one gateway every DynamoDB data-plane call goes through: metered, DynamoDB's limits enforced, one method per operation",
)];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `text` without comments, string contents and `#[cfg(test)] mod … { … }` blocks, line breaks
/// kept so that line numbers stay true.
fn code(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
        } else if c == b'\''
            && i + 2 < b.len()
            && (b[i + 2] == b'\'' || (b[i + 1] == b'\\' && b.get(i + 3) == Some(&b'\'')))
        {
            // A character literal ('"', '\\', '{'): skipped whole.
            i += if b[i + 1] == b'\\' { 4 } else { 3 };
            out.push_str("' '");
        } else if c == b'"' {
            out.push('"');
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                } else if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            out.push('"');
            i += 1;
        } else {
            out.push(c as char);
            i += 1;
        }
    }
    strip_test_modules(&out)
}

fn strip_test_modules(s: &str) -> String {
    let mut out = s.to_string();
    let mut from = 0;
    while let Some(found) = out[from..].find("#[cfg(test)]") {
        let at = from + found;
        let rest = &out[at..];
        // The item under the attribute ends at its first `;` (a `use`, a `mod x;`) or with the
        // block its first `{` opens (a `mod tests { … }`, a helper function).
        let semi = rest.find(';').unwrap_or(rest.len());
        let open = rest.find('{').unwrap_or(rest.len());
        let mut end = rest.len();
        if semi < open {
            end = semi + 1;
        } else {
            let mut depth = 0;
            for (k, ch) in rest[open..].char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = open + k + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
        }
        let lines = rest[..end].matches('\n').count();
        out.replace_range(at..at + end, &"\n".repeat(lines));
        from = at;
    }
    out
}

fn ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths of a use tree or an inline path starting at `s`, each with the name it is known by
/// here: `a::b::{c, d::e as f, self}` gives `a::b::c` (`c`), `a::b::d::e` (`f`), `a::b` (`b`).
/// A glob (`a::*`) gives `a` under the name `*`.
fn use_tree(s: &str) -> Vec<(Vec<String>, String)> {
    fn skip_ws(b: &[char], i: &mut usize) {
        while *i < b.len() && b[*i].is_whitespace() {
            *i += 1;
        }
    }
    fn word(b: &[char], i: &mut usize) -> String {
        let start = *i;
        while *i < b.len() && (ident(b[*i]) || b[*i] == '*') {
            *i += 1;
        }
        b[start..*i].iter().collect()
    }
    fn tree(b: &[char], i: &mut usize, prefix: &[String], out: &mut Vec<(Vec<String>, String)>) {
        let mut path = prefix.to_vec();
        loop {
            skip_ws(b, i);
            if b.get(*i) == Some(&'{') {
                *i += 1;
                loop {
                    while *i < b.len() && (b[*i].is_whitespace() || b[*i] == ',') {
                        *i += 1;
                    }
                    if *i >= b.len() || b[*i] == '}' {
                        *i += 1;
                        return;
                    }
                    let before = *i;
                    tree(b, i, &path, out);
                    if *i == before {
                        // Not a path (a stray token): give up on this group rather than loop.
                        return;
                    }
                }
            }
            let seg = word(b, i);
            let mut name = seg.clone();
            if seg == "self" && !path.is_empty() {
                // `{self, …}` names the prefix itself.
                name = path.last().cloned().unwrap_or_default();
            } else if !seg.is_empty() && seg != "*" {
                path.push(seg);
            }
            if b.get(*i) == Some(&':') && b.get(*i + 1) == Some(&':') {
                *i += 2;
                continue;
            }
            // An alias: `X as Y`.
            let mut j = *i;
            skip_ws(b, &mut j);
            if b.get(j) == Some(&'a') && b.get(j + 1) == Some(&'s') && b.get(j + 2).is_some_and(|c| c.is_whitespace()) {
                j += 2;
                skip_ws(b, &mut j);
                name = word(b, &mut j);
                *i = j;
            }
            if !path.is_empty() {
                out.push((path, name));
            }
            return;
        }
    }
    // A use statement ends at `;`; an inline path long before.
    let end = s.find(';').unwrap_or(s.len()).min(4_000);
    let end = (0..=end).rev().find(|k| s.is_char_boundary(*k)).unwrap_or(0);
    let b: Vec<char> = s[..end].chars().collect();
    let mut out = vec![];
    let mut i = 0;
    tree(&b, &mut i, &[], &mut out);
    out
}

/// A crate's modules by path (`""` for the root), each with its code.
type Modules = BTreeMap<String, String>;

/// `mod name;` on a line, after any attributes and visibility (`pub`, `pub(crate)`,
/// `pub(in …)`): the module's name.
fn mod_decl(line: &str) -> Option<&str> {
    let mut l = line.trim();
    while let Some(rest) = l.strip_prefix("#[") {
        let close = rest.find(']')?;
        l = rest[close + 1..].trim_start();
    }
    if let Some(rest) = l.strip_prefix("pub(") {
        l = rest[rest.find(')')? + 1..].trim_start();
    } else if let Some(rest) = l.strip_prefix("pub ") {
        l = rest.trim_start();
    }
    let name = l.strip_prefix("mod ")?.trim().strip_suffix(';')?.trim();
    (!name.is_empty() && name.chars().all(ident)).then_some(name)
}

/// The modules reachable from a crate root file by `mod x;` declarations.
fn modules(root_file: &Path) -> BTreeMap<String, (PathBuf, String)> {
    let mut found = BTreeMap::new();
    let mut todo = vec![(String::new(), root_file.to_path_buf())];
    while let Some((name, file)) = todo.pop() {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let c = code(&text);
        let dir = match file.file_name().and_then(|f| f.to_str()) {
            Some("lib.rs" | "main.rs" | "mod.rs") => file.parent().unwrap().to_path_buf(),
            _ => file.with_extension(""),
        };
        for m in c.lines().filter_map(mod_decl) {
            let child = if name.is_empty() { m.to_string() } else { format!("{name}::{m}") };
            let f = dir.join(format!("{m}.rs"));
            let f = if f.exists() { f } else { dir.join(m).join("mod.rs") };
            todo.push((child, f));
        }
        found.insert(name, (file, c));
    }
    found
}

fn segments(module: &str) -> Vec<String> {
    module.split("::").filter(|s| !s.is_empty()).map(String::from).collect()
}

/// A path as written in `module` made absolute (from the crate root): `crate::`, `self::`,
/// `super::` (any number), or a child of `module`; `None` for another crate's path.
fn absolute(module: &str, path: &[String], mods: &Modules) -> Option<Vec<String>> {
    let mut here = segments(module);
    let first = path.first()?;
    match first.as_str() {
        "crate" => Some(path[1..].to_vec()),
        "self" => Some([here, path[1..].to_vec()].concat()),
        "super" => {
            let mut rest = path;
            while rest.first().is_some_and(|s| s == "super") {
                here.pop();
                rest = &rest[1..];
            }
            Some([here, rest.to_vec()].concat())
        }
        _ => {
            let child = [here.clone(), vec![first.clone()]].concat().join("::");
            mods.contains_key(&child).then(|| [here, path.to_vec()].concat())
        }
    }
}

/// Where paths lead: down child modules and through re-exports (`pub use`, `pub(crate) use`) to
/// the module that defines the item.
struct Resolver<'a> {
    mods: &'a Modules,
    /// (module, name) → the absolute path it re-exports.
    reexports: BTreeMap<(String, String), Vec<String>>,
}

impl<'a> Resolver<'a> {
    fn new(mods: &'a Modules) -> Self {
        let mut reexports = BTreeMap::new();
        for (m, text) in mods {
            for vis in ["pub use ", "pub(crate) use ", "pub(super) use "] {
                for (i, _) in text.match_indices(vis) {
                    if i > 0 && ident(text[..i].chars().last().unwrap()) {
                        continue;
                    }
                    for (path, name) in use_tree(&text[i + vis.len()..]) {
                        if let Some(abs) = absolute(m, &path, mods) {
                            reexports.insert((m.clone(), name), abs);
                        }
                    }
                }
            }
        }
        Self { mods, reexports }
    }

    /// The module an absolute path's item lives in.
    fn module_of(&self, abs: &[String]) -> String {
        self.walk(abs, 0)
    }

    fn walk(&self, abs: &[String], depth: usize) -> String {
        let mut here: Vec<String> = vec![];
        for seg in abs {
            let down = [here.clone(), vec![seg.clone()]].concat();
            if self.mods.contains_key(&down.join("::")) {
                here = down;
                continue;
            }
            if depth < 16 {
                if let Some(target) = self.reexports.get(&(here.join("::"), seg.clone())) {
                    return self.walk(target, depth + 1);
                }
            }
            break;
        }
        here.join("::")
    }
}

/// Module → modules it names, with the first line that names each.
fn edges(mods: &Modules) -> BTreeMap<String, BTreeMap<String, usize>> {
    let resolver = Resolver::new(mods);
    let mut out: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for (name, text) in mods {
        let own = segments(name);
        let children: Vec<String> = mods
            .keys()
            .map(|k| segments(k))
            .filter(|k| k.len() == own.len() + 1 && k.starts_with(&own))
            .map(|k| k[own.len()].clone())
            .collect();
        let starts: Vec<String> = ["crate", "self", "super"]
            .iter()
            .map(|s| s.to_string())
            .chain(children)
            .map(|s| format!("{s}::"))
            .collect();
        for start in &starts {
            for (i, _) in text.match_indices(start.as_str()) {
                // A path's first segment: not the tail of another path or identifier.
                if text[..i].chars().last().is_some_and(|c| ident(c) || c == ':' || c == '$') {
                    continue;
                }
                for (path, _) in use_tree(&text[i..]) {
                    let Some(abs) = absolute(name, &path, mods) else { continue };
                    let target = resolver.module_of(&abs);
                    if target != *name {
                        let line = text[..i].matches('\n').count() + 1;
                        out.entry(name.clone()).or_default().entry(target).or_insert(line);
                    }
                }
            }
        }
    }
    out
}

/// The strongly connected groups of more than one module (Tarjan), each sorted.
fn cycles(graph: &BTreeMap<String, BTreeMap<String, usize>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeMap<String, usize>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        t.index.insert(v, t.next);
        t.low.insert(v, t.next);
        t.next += 1;
        t.stack.push(v);
        t.on.insert(v);
        if let Some(ws) = t.g.get(v) {
            for w in ws.keys() {
                let w = w.as_str();
                if !t.index.contains_key(w) {
                    visit(t, w);
                    let lw = t.low[w];
                    let lv = t.low[v];
                    t.low.insert(v, lv.min(lw));
                } else if t.on.contains(w) {
                    let iw = t.index[w];
                    let lv = t.low[v];
                    t.low.insert(v, lv.min(iw));
                }
            }
        }
        if t.low[v] == t.index[v] {
            let mut scc = vec![];
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                scc.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                t.out.push(scc);
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: vec![],
        on: BTreeSet::new(),
        next: 0,
        out: vec![],
    };
    let mut all: BTreeSet<&str> = graph.keys().map(String::as_str).collect();
    all.extend(graph.values().flat_map(|m| m.keys().map(String::as_str)));
    for v in all {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// Every crate root of the workspace: each `lib.rs` and `main.rs` is a crate of its own.
fn crate_roots() -> Vec<(String, PathBuf)> {
    let mut roots = vec![];
    for dir in ["crates", "examples"] {
        for k in std::fs::read_dir(root().join(dir)).unwrap() {
            let k = k.unwrap().path();
            for f in ["lib.rs", "main.rs"] {
                let p = k.join("src").join(f);
                if p.exists() {
                    roots.push((format!("{}/{f}", k.file_name().unwrap().to_string_lossy()), p));
                }
            }
        }
    }
    roots.sort();
    roots
}

fn name(m: &str) -> &str {
    if m.is_empty() {
        "(root)"
    } else {
        m
    }
}

#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    let mut problems = vec![];
    let mut read = 0;
    for (krate, file) in crate_roots() {
        let found = modules(&file);
        read += found.len();
        let mods: Modules = found.iter().map(|(k, (_, c))| (k.clone(), c.clone())).collect();
        let g = edges(&mods);
        for scc in cycles(&g) {
            let mut why = vec![];
            for a in &scc {
                for (b, line) in g.get(a).into_iter().flatten() {
                    if scc.contains(b) {
                        let file = found[a].0.strip_prefix(root()).unwrap_or(&found[a].0).display().to_string();
                        why.push(format!("{} → {} ({file}:{line})", name(a), name(b)));
                    }
                }
            }
            problems.push(format!(
                "{krate}: {}\n    {}",
                scc.iter().map(|m| name(m)).collect::<Vec<_>>().join(", "),
                why.join("\n    ")
            ));
        }
    }
    assert!(read > 60, "read only {read} modules: the walk from the crate roots is broken");
    assert!(problems.is_empty(), "import cycles:\n{}", problems.join("\n"));
}

/// A crate's import graph between its top-level modules: each module stands for itself and every
/// module beneath it. Pure. Why: `bill/mod.rs` imported `delivery` while `delivery` priced with
/// `bill::prices`, a cycle between two concepts that no two files show.
fn top_level(g: &BTreeMap<String, BTreeMap<String, usize>>) -> BTreeMap<String, BTreeMap<String, usize>> {
    let top = |m: &str| segments(m).into_iter().next().unwrap_or_default();
    let mut out: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for (a, targets) in g {
        for (b, line) in targets {
            let (ta, tb) = (top(a), top(b));
            if ta != tb && !ta.is_empty() && !tb.is_empty() {
                out.entry(ta).or_default().entry(tb).or_insert(*line);
            }
        }
    }
    out
}

#[test]
fn no_top_level_module_imports_one_that_imports_it_back_through_their_submodules() {
    let mut problems = vec![];
    for (krate, file) in crate_roots() {
        let found = modules(&file);
        let mods: Modules = found.iter().map(|(k, (_, c))| (k.clone(), c.clone())).collect();
        for scc in cycles(&top_level(&edges(&mods))) {
            problems.push(format!("{krate}: {}", scc.join(", ")));
        }
    }
    assert!(problems.is_empty(), "cycles between top-level modules:\n{}", problems.join("\n"));
}

#[test]
fn a_cycle_through_a_submodule_is_one_between_their_parents() {
    let m = |pairs: &[(&str, &str)]| -> Modules { pairs.iter().map(|(k, v)| (k.to_string(), code(v))).collect() };
    let mods = m(&[
        ("", "mod bill; mod delivery;"),
        ("bill", "mod prices; pub fn month() { crate::delivery::predict(); }"),
        ("bill::prices", "pub struct Prices;"),
        ("delivery", "pub fn predict() {} pub fn usd(p: &crate::bill::prices::Prices) {}"),
    ]);
    assert!(cycles(&edges(&mods)).is_empty(), "no two files import each other");
    assert_eq!(cycles(&top_level(&edges(&mods))), vec![vec!["bill".to_string(), "delivery".to_string()]]);
}

#[test]
fn no_file_of_the_library_the_lambdas_or_tickctl_is_over_350_lines_unless_it_is_one_concept() {
    let mut over = vec![];
    let mut read = 0;
    let mut named_seen = 0;
    for (krate, file) in crate_roots() {
        if !SIZED.iter().any(|k| krate.starts_with(&format!("{k}/"))) {
            continue;
        }
        for (_, (path, c)) in modules(&file) {
            read += 1;
            let lines = c.lines().filter(|l| !l.trim().is_empty()).count();
            let rel = path.strip_prefix(root()).unwrap_or(&path).to_string_lossy().trim_start_matches("/").to_string();
            let rel = rel.trim_start_matches("./").trim_start_matches("../").to_string();
            let named = ONE_CONCEPT.iter().any(|(f, _)| rel.ends_with(f));
            if lines > MAX_LINES && !named {
                over.push(format!("{rel}: {lines} lines"));
            }
            if named && lines <= MAX_LINES {
                over.push(format!("{rel}: {lines} lines, named as one concept without need: take it off the list"));
            }
            named_seen += usize::from(named);
        }
    }
    assert_eq!(named_seen, ONE_CONCEPT.len(), "a file named as one concept is not in the tree");
    assert!(read > 30, "read only {read} files");
    assert!(over.is_empty(), "over {MAX_LINES} lines, and not named as one concept:\n{}", over.join("\n"));
}

#[test]
fn the_cycle_check_finds_a_cycle_through_a_use_tree_a_root_reexport_and_super() {
    let m = |pairs: &[(&str, &str)]| -> Modules { pairs.iter().map(|(k, v)| (k.to_string(), code(v))).collect() };
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: [Case; 9] = [
        (
            "a → b by a use tree, b → a by an inline path",
            &[("", "mod a; mod b;"), ("a", "use crate::{b::{X, Y as Z}, c};"), ("b", "fn f() { crate::a::g() }")],
            &["a", "b"],
        ),
        (
            "b names an item the root re-exports from a",
            &[("", "mod a; mod b; pub use a::Deps;"), ("a", "use crate::b::run;"), ("b", "use crate::Deps;")],
            &["a", "b"],
        ),
        (
            "the root defines an item a child uses, and uses the child",
            &[("", "mod a; pub struct Deps; fn h() { a::run() }"), ("a", "use crate::Deps; // crate::b\n")],
            &["", "a"],
        ),
        (
            "a child of a nested module reaches its parent by `super::`",
            &[("", "mod a;"), ("a", "mod b; fn f() { b::g() }"), ("a::b", "use super::f;")],
            &["a", "a::b"],
        ),
        (
            "comments, strings and test modules name nothing",
            &[
                ("", "mod a; mod b;"),
                ("a", "use crate::b::X; // crate::a"),
                ("b", "const S: &str = \"crate::a::x\";\n#[cfg(test)]\nmod tests { use crate::a::Y; }"),
            ],
            &[],
        ),
        (
            "a glob names its module",
            &[("", "mod a; mod b;"), ("a", "use crate::b::*;"), ("b", "use crate::*; fn f() { crate::a::g() }")],
            &["a", "b"],
        ),
        (
            "`self::` and `super::super::` name modules",
            &[
                ("", "mod a;"),
                ("a", "mod b; use self::b::c::X;"),
                ("a::b", "mod c;"),
                ("a::b::c", "fn f() { super::super::g() }"),
            ],
            &["a", "a::b::c"],
        ),
        (
            "a re-export inside a module leads to the sibling that defines the item, not to the parent",
            &[
                ("", "mod p;"),
                ("p", "mod x; mod y; pub use x::X; pub use y::Y as Why;"),
                ("p::x", "use crate::p::Why;"),
                ("p::y", "struct Y;"),
            ],
            &[],
        ),
        (
            "a `#[cfg(test)]` import is test code; the code after it is not",
            &[
                ("", "mod a; mod b;"),
                ("a", "#[cfg(test)]\nuse crate::b::T;\nfn f() { crate::b::g() }"),
                ("b", "use crate::a::Z;"),
            ],
            &["a", "b"],
        ),
    ];
    for (why, modules, want) in cases {
        let want: Vec<Vec<String>> =
            if want.is_empty() { vec![] } else { vec![want.iter().map(|s| s.to_string()).collect()] };
        assert_eq!(cycles(&edges(&m(modules))), want, "{why}");
    }
    let siblings = m(cases[7].1);
    assert_eq!(edges(&siblings)["p::x"].keys().collect::<Vec<_>>(), ["p::y"], "through the re-export to p::y");
}

#[test]
fn the_module_walk_follows_every_declaration_form() {
    let dir = std::env::temp_dir().join(format!("house-{}-{}", std::process::id(), fastrand::u64(..)));
    std::fs::create_dir_all(dir.join("b")).unwrap();
    std::fs::write(dir.join("lib.rs"), "#[cfg(unix)] pub(crate) mod a;\nmod b;\n#[cfg(test)]\nmod tests;\n").unwrap();
    std::fs::write(dir.join("a.rs"), "pub(in crate) mod d;\n").unwrap();
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("a").join("d.rs"), "").unwrap();
    std::fs::write(dir.join("b").join("mod.rs"), "pub(super) mod c;\n").unwrap();
    std::fs::write(dir.join("b").join("c.rs"), "").unwrap();
    let found: Vec<String> = modules(&dir.join("lib.rs")).into_keys().collect();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found, ["", "a", "a::d", "b", "b::c"], "the test module is test code and is not walked");
}
