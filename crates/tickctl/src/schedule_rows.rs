//! `tickctl schedules import`'s file: CSV with a header naming `tenant`, `name` and `spec`, and
//! optionally `spread` (minutes), `gap` (shift, skip) and `fold` (first, last, both; by default
//! both for a wildcard cron, else first). Each row read on its own: a bad one is reported with its
//! line and reason, the others imported. Pure.

use std::collections::HashSet;

use anyhow::{Context, Result};
use tickwork::schedules::{Dst, ScheduleDef};

/// One row: its line, and the schedule or why not.
pub type Row = (u64, Result<(String, ScheduleDef), String>);

const COLUMNS: [&str; 6] = ["tenant", "name", "spec", "spread", "gap", "fold"];

/// Reads the rows of `text`.
pub fn parse(text: &[u8]) -> Result<Vec<Row>> {
    let body = text.strip_prefix(b"\xEF\xBB\xBF".as_slice()).unwrap_or(text);
    let mut r = csv::ReaderBuilder::new().flexible(true).trim(csv::Trim::All).from_reader(body);
    let headers = r.headers().context("reading the CSV header")?.clone();
    if let Some(extra) = headers.iter().find(|h| !COLUMNS.contains(h)) {
        anyhow::bail!("the CSV header names a column `{extra}`; the columns are {}", COLUMNS.join(", "));
    }
    let col = |name: &str| headers.iter().position(|h| h == name);
    let (Some(tenant), Some(name), Some(spec)) = (col("tenant"), col("name"), col("spec")) else {
        anyhow::bail!("the CSV header must name `tenant`, `name` and `spec`; it is `{}`", headers.as_slice());
    };
    let (spread, gap, fold) = (col("spread"), col("gap"), col("fold"));
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for rec in r.records() {
        let rec = rec.context("reading a CSV row")?;
        if rec.iter().all(str::is_empty) {
            continue;
        }
        let line = rec.position().map_or(0, |p| p.line());
        let get = |i: Option<usize>| i.and_then(|i| rec.get(i)).filter(|v| !v.is_empty());
        let row = (|| -> std::result::Result<(String, ScheduleDef), String> {
            if rec.len() != headers.len() {
                return Err(format!("expected {} fields, found {}", headers.len(), rec.len()));
            }
            let t = get(Some(tenant)).ok_or("no tenant")?.to_string();
            let n = get(Some(name)).ok_or("no name")?;
            let s = get(Some(spec)).ok_or("no spec")?.parse().map_err(|e: tickwork::schedules::SpecError| e.0)?;
            let minutes = match get(spread) {
                Some(v) => v.parse().map_err(|_| format!("spread `{v}` is not a number of minutes"))?,
                None => 0,
            };
            let mut dst = Dst::for_spec(&s);
            if let Some(g) = get(gap) {
                dst.gap = g.parse().map_err(|e: tickwork::schedules::SpecError| e.0)?;
            }
            if let Some(f) = get(fold) {
                dst.fold = f.parse().map_err(|e: tickwork::schedules::SpecError| e.0)?;
            }
            let def = ScheduleDef::new(n, s, minutes, dst).map_err(|e| e.0)?;
            if !seen.insert((t.clone(), def.name.clone())) {
                return Err(format!("`{t}` `{}` is named twice in the file", def.name));
            }
            Ok((t, def))
        })();
        out.push((line, row));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_read_on_their_own_and_bad_ones_say_why() {
        let text = b"tenant,name,spec,spread,fold\n\
            acme,nudge,daily 08:00,30,\n\
            acme,standup,cron 30 9 * * 1-5,,last\n\
            acme,nudge,daily 09:00,,\n\
            beta,x#y,daily 08:00,,\n\
            beta,late,hourly 08:00,,\n\
            beta,wide,daily 08:00,2000,\n\
            beta,short\n";
        let rows = parse(text).unwrap();
        let ok: Vec<(u64, String)> =
            rows.iter().filter_map(|(l, r)| r.as_ref().ok().map(|(t, d)| (*l, format!("{t}/{}", d.name)))).collect();
        assert_eq!(ok, [(2, "acme/nudge".to_string()), (3, "acme/standup".to_string())]);
        let bad: Vec<(u64, &str)> =
            rows.iter().filter_map(|(l, r)| r.as_ref().err().map(|e| (*l, e.as_str()))).collect();
        assert_eq!(bad.len(), 5);
        for ((line, e), says) in
            bad.iter().zip(["named twice", "holds `#`", "`hourly` is not a spec", "not shorter", "expected 5 fields"])
        {
            assert!(e.contains(says), "line {line}: {e}");
        }
        assert!(parse(b"tenant,name,spec,colour\n").unwrap_err().to_string().contains("`colour`"));
        assert!(parse(b"tenant,spec\n").unwrap_err().to_string().contains("must name"));
    }
}
