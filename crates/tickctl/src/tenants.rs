//! `tickctl tenants`: an application's tenants from a file or one at a time, through the same
//! library calls an application makes ([`tickwork::tenants::Tenants`]), so every path registers
//! the tenant's zone with the sweep before the tenant is written (a tenant in an unregistered zone
//! is never visited).
//!
//! An import is idempotent: every row is validated first and a bad row is refused with its line
//! and reason, never blocking the others; a row whose id exists with the same zone is
//! `unchanged`; one whose id exists in another zone is refused (a change of zone is a move, which
//! `tenants move` makes without losing or repeating a period; an import never makes it silently).

use std::collections::HashMap;
use std::io::BufRead;

use futures::StreamExt;

use anyhow::{Context, Result};
use serde::Serialize;
use tickwork::tenants::{Tenant, Tenants};

/// Rows written per call of [`Tenants::add`]: bounds what a crash can leave half-done (a rerun
/// of the import finishes it, the done rows counting as unchanged) and paces the progress bar.
pub const IMPORT_CHUNK: usize = 500;

/// The formats `tenants import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// A header line naming the columns `id` and `zone` (in any order), then a row a tenant.
    Csv,
    /// One JSON object a line: `{"id": "...", "zone": "..."}`.
    Ndjson,
}

impl Format {
    /// The format a file name implies: `.csv`, or `.ndjson` / `.jsonl`.
    pub fn of_path(path: &str) -> Result<Self> {
        let lower = path.to_ascii_lowercase();
        if lower.ends_with(".csv") {
            Ok(Format::Csv)
        } else if lower.ends_with(".ndjson") || lower.ends_with(".jsonl") {
            Ok(Format::Ndjson)
        } else {
            anyhow::bail!("cannot tell the format of `{path}` from its name: use --format csv or --format ndjson")
        }
    }
}

/// A row refused, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refused {
    /// 1-based line of the file.
    pub line: u64,
    /// The id, when the row had one.
    pub id: Option<String>,
    /// Why.
    pub reason: String,
}

/// The rows a file holds: the tenants to add (with their lines) and the rows refused.
#[derive(Debug, Default)]
pub struct Rows {
    /// Valid rows, each id once.
    pub tenants: Vec<(u64, Tenant)>,
    /// Invalid rows.
    pub refused: Vec<Refused>,
    /// Rows that repeat an earlier row of the file exactly.
    pub repeated: u64,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Row {
    id: String,
    zone: String,
}

impl Rows {
    /// Validates one row and keeps it unless it is bad or contradicts an earlier one.
    fn push(&mut self, line: u64, row: Result<Row, String>, seen: &mut HashMap<String, (u64, String)>) {
        let row = match row {
            Ok(r) => r,
            Err(reason) => return self.refused.push(Refused { line, id: None, reason }),
        };
        let t = match canonical(Tenant::new(row.id.trim(), row.zone.trim())) {
            Ok(t) => t,
            Err(e) => return self.refused.push(Refused { line, id: Some(e.id), reason: e.problem }),
        };
        match seen.get(&t.id) {
            Some((_, zone)) if *zone == t.zone => self.repeated += 1,
            Some((first, zone)) => self.refused.push(Refused {
                line,
                id: Some(t.id.clone()),
                reason: format!("line {first} gives this id the zone {zone}; a file names one zone a tenant"),
            }),
            None => {
                seen.insert(t.id.clone(), (line, t.zone.clone()));
                self.tenants.push((line, t));
            }
        }
    }
}

/// A tenant checked with its zone under its canonical IANA name ([`Tenant::canonical`]).
pub fn canonical(t: Tenant) -> Result<Tenant, tickwork::tenants::InvalidTenant> {
    t.canonical()
}

pub use tickwork::tenants::canonical_zone;

/// The 1-based line of every byte offset: where a record starts, found from its byte position
/// (the reader's own line count stands before the record's line ending, so CRLF files and blank
/// lines would shift it).
struct Lines(Vec<usize>);

impl Lines {
    fn of(text: &[u8]) -> Self {
        Lines(text.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i).collect())
    }
    /// The line of the first byte at or after `byte` that is not a line ending.
    fn line_at(&self, text: &[u8], byte: usize) -> u64 {
        let start = text[byte.min(text.len())..]
            .iter()
            .position(|b| *b != b'\r' && *b != b'\n')
            .map_or(text.len(), |p| byte + p);
        (self.0.partition_point(|nl| *nl < start) + 1) as u64
    }
}

/// Reads and validates every row. Pure (no request): a file's errors are known before anything
/// is written. Fails as a whole only when the file cannot be read as its format at all (no
/// header with `id` and `zone`, unreadable bytes). A UTF-8 byte-order mark is skipped; blank
/// lines are skipped in both formats.
pub fn parse(mut input: impl BufRead, format: Format) -> Result<Rows> {
    let mut rows = Rows::default();
    let mut seen = HashMap::new();
    let mut text = Vec::new();
    input.read_to_end(&mut text).context("reading the file")?;
    let body = text.strip_prefix(b"\xEF\xBB\xBF".as_slice()).unwrap_or(&text);
    let lines = Lines::of(body);
    match format {
        Format::Csv => {
            let mut r = csv::ReaderBuilder::new().flexible(true).trim(csv::Trim::All).from_reader(body);
            let headers = r.headers().context("reading the CSV header")?.clone();
            let col = |name: &str| headers.iter().position(|h| h == name);
            let (Some(id), Some(zone)) = (col("id"), col("zone")) else {
                anyhow::bail!("the CSV header must name the columns `id` and `zone`; it is `{}`", headers.as_slice());
            };
            if let Some(extra) = headers.iter().find(|h| *h != "id" && *h != "zone") {
                anyhow::bail!("the CSV header names a column `{extra}`; only `id` and `zone` are read");
            }
            for rec in r.records() {
                let rec = rec.context("reading a CSV row")?;
                if rec.iter().all(str::is_empty) {
                    continue;
                }
                let line = rec.position().map(|p| lines.line_at(body, p.byte() as usize)).unwrap_or(0);
                let row = match (rec.get(id), rec.get(zone), rec.len()) {
                    (Some(i), Some(z), 2) => Ok(Row { id: i.to_string(), zone: z.to_string() }),
                    (_, _, n) => Err(format!("expected 2 fields (id, zone), found {n}")),
                };
                rows.push(line, row, &mut seen);
            }
        }
        Format::Ndjson => {
            for (i, line) in body.lines().enumerate() {
                let line_no = i as u64 + 1;
                let text = line.with_context(|| format!("reading line {line_no}"))?;
                if text.trim().is_empty() {
                    continue;
                }
                let row = serde_json::from_str::<Row>(&text).map_err(|e| format!("not a tenant object: {e}"));
                rows.push(line_no, row, &mut seen);
            }
        }
    }
    Ok(rows)
}

/// `t` owed from local date `from` ([`Tenant::owed_from`]) when one is given; as added otherwise.
pub fn owed_from(
    t: Tenant,
    from: Option<jiff::civil::Date>,
    now_ms: i64,
    policy: &tickwork::calendar::Policy,
) -> Result<Tenant, tickwork::tenants::InvalidTenant> {
    match from {
        Some(d) => t.owed_from(d, now_ms, policy),
        None => Ok(t),
    }
}

/// Every row owed from `from` (in its tenant's zone); a row for which that date is out of bounds
/// is refused with its line and reason, the rest kept. Pure.
pub fn rows_owed_from(
    rows: Rows,
    from: Option<jiff::civil::Date>,
    now_ms: i64,
    policy: &tickwork::calendar::Policy,
) -> Rows {
    let Some(d) = from else { return rows };
    let mut out = Rows { tenants: Vec::new(), refused: rows.refused, repeated: rows.repeated };
    for (line, t) in rows.tenants {
        match t.owed_from(d, now_ms, policy) {
            Ok(t) => out.tenants.push((line, t)),
            Err(e) => out.refused.push(Refused { line, id: Some(e.id), reason: e.problem }),
        }
    }
    out.refused.sort_by_key(|r| r.line);
    out
}

/// What an id `add` found existing means for a row that gives it `zone`: `Ok` when it is there
/// as asked (unchanged); otherwise why the row is refused: it lives in another zone (a move,
/// which `add` never makes), or it was removed between the add and the read (a rerun adds it).
/// Pure; `tenants add` and `tenants import` decide alike.
pub fn existing(id: &str, zone: &str, stored: Option<&Tenant>) -> Result<(), String> {
    match stored {
        Some(s) if s.zone == zone => Ok(()),
        Some(s) => Err(format!(
            "exists in zone {}; `tickctl tenants move {id} --zone {zone}` moves it without losing a period",
            s.zone
        )),
        None => Err("removed while it was being added; add it again".into()),
    }
}

/// What an import did.
#[derive(Debug, Default, Serialize)]
pub struct ImportReport {
    /// Rows read (refused and repeated included).
    pub rows: u64,
    /// Tenants written.
    pub added: u64,
    /// Tenants that existed with the zone the file gives.
    pub unchanged: u64,
    /// Rows repeating an earlier row of the file.
    pub repeated: u64,
    /// Rows refused, with line and reason.
    pub refused: Vec<Refused>,
}

/// Adds the valid rows in chunks of [`IMPORT_CHUNK`]; `progress(done, total)` after each chunk.
/// An id that exists in another zone is reported, not moved.
pub async fn import(
    tenants: &Tenants,
    rows: Rows,
    now_ms: i64,
    mut progress: impl FnMut(u64, u64),
) -> Result<ImportReport> {
    let total = rows.tenants.len() as u64;
    let mut report = ImportReport {
        rows: total + rows.refused.len() as u64 + rows.repeated,
        repeated: rows.repeated,
        refused: rows.refused,
        ..Default::default()
    };
    let mut done = 0u64;
    for chunk in rows.tenants.chunks(IMPORT_CHUNK) {
        let list: Vec<Tenant> = chunk.iter().map(|(_, t)| t.clone()).collect();
        let r = tenants.add(&list, now_ms).await?;
        report.added += r.added;
        let given: HashMap<&str, (u64, &str)> =
            chunk.iter().map(|(line, t)| (t.id.as_str(), (*line, t.zone.as_str()))).collect();
        let stored: Vec<_> = futures::stream::iter(r.existing_ids.iter().map(|id| tenants.get(id)))
            .buffered(8)
            .collect::<Vec<_>>()
            .await;
        for (id, got) in r.existing_ids.iter().zip(stored) {
            let (line, zone) = given[id.as_str()];
            let got = match got {
                Ok(g) => g,
                // One unreadable stored tenant is its row's problem, not the import's.
                Err(tickwork::DbError::Unreadable { problem, .. }) => {
                    report.refused.push(Refused {
                        line,
                        id: Some(id.clone()),
                        reason: format!("the stored tenant is unreadable: {problem}"),
                    });
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            match existing(id, zone, got.as_ref()) {
                Ok(()) => report.unchanged += 1,
                Err(reason) => report.refused.push(Refused { line, id: Some(id.clone()), reason }),
            }
        }
        done += chunk.len() as u64;
        progress(done, total);
    }
    report.refused.sort_by_key(|r| r.line);
    Ok(report)
}

/// A tenant as `tenants list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    /// Id.
    pub id: String,
    /// IANA zone.
    pub zone: String,
    /// `active` or `suspended`.
    pub status: &'static str,
    /// Where it stands in its zone group's calendar (`follows`, `fresh`, `through:<date>`), or
    /// why it cannot be read.
    pub position: String,
}

impl Listed {
    /// From a stored tenant (or the reason it is unreadable).
    pub fn of(t: Result<Tenant, tickwork::tenants::InvalidTenant>) -> Self {
        match t {
            Ok(t) => Listed {
                position: match t.pos.to_attr() {
                    None => "follows its zone".into(),
                    Some(p) => p,
                },
                status: if t.active { "active" } else { "suspended" },
                id: t.id,
                zone: t.zone,
            },
            Err(e) => Listed { id: e.id, zone: String::new(), status: "unreadable", position: e.problem },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_csv_is_read_row_by_row_and_bad_rows_are_refused_with_their_line() {
        let text = "zone,id\nEurope/Berlin,a\nMars/Olympus,b\nAsia/Tokyo,\nUTC,c#1\nUTC,d,extra\nEurope/Berlin,a\nUTC,a\nUTC,e\n";
        let rows = parse(text.as_bytes(), Format::Csv).unwrap();
        let ids: Vec<&str> = rows.tenants.iter().map(|(_, t)| t.id.as_str()).collect();
        assert_eq!(ids, ["a", "e"]);
        assert_eq!(rows.repeated, 1);
        let lines: Vec<u64> = rows.refused.iter().map(|r| r.line).collect();
        assert_eq!(lines, [3, 4, 5, 6, 8], "{:?}", rows.refused);
        assert!(rows.refused[0].reason.contains("Mars/Olympus"), "{:?}", rows.refused[0]);
        assert!(rows.refused[1].reason.contains("empty"));
        assert!(rows.refused[2].reason.contains('#'));
        assert!(rows.refused[3].reason.contains("found 3"));
        assert!(rows.refused[4].reason.contains("line 2"));
    }

    #[test]
    fn line_numbers_hold_for_crlf_blank_lines_and_a_byte_order_mark() {
        let text = "\u{feff}id,zone\r\nok,UTC\r\n\r\nbad,Mars/X\r\n   \r\n\"multi\nline\",UTC\r\nworse,Nowhere/Y\r\n";
        let rows = parse(text.as_bytes(), Format::Csv).unwrap();
        assert_eq!(rows.refused.iter().map(|r| r.line).collect::<Vec<_>>(), [4, 6, 8], "{:?}", rows.refused);
        let nd = "\u{feff}{\"id\":\"a\",\"zone\":\"europe/berlin\"}\r\n\r\n{\"id\":\"b\"}\n";
        let rows = parse(nd.as_bytes(), Format::Ndjson).unwrap();
        assert_eq!(rows.tenants[0].1.zone, "Europe/Berlin", "stored under its canonical name");
        assert_eq!(rows.refused.iter().map(|r| r.line).collect::<Vec<_>>(), [3]);
    }

    #[test]
    fn a_csv_without_its_columns_is_refused_whole() {
        assert!(parse("name,tz\nx,UTC\n".as_bytes(), Format::Csv).unwrap_err().to_string().contains("`id` and `zone`"));
        assert!(parse("id,zone,plan\n".as_bytes(), Format::Csv).unwrap_err().to_string().contains("`plan`"));
    }

    #[test]
    fn ndjson_rows_are_objects_with_an_id_and_a_zone() {
        let text =
            "{\"id\":\"a\",\"zone\":\"UTC\"}\n\nnot json\n{\"id\":\"b\"}\n{\"id\":\"c\",\"zone\":\"UTC\",\"x\":1}\n";
        let rows = parse(text.as_bytes(), Format::Ndjson).unwrap();
        assert_eq!(rows.tenants.len(), 1);
        assert_eq!(rows.refused.iter().map(|r| r.line).collect::<Vec<_>>(), [3, 4, 5]);
        assert!(rows.refused[1].reason.contains("zone"), "{:?}", rows.refused[1]);
    }

    #[test]
    fn an_existing_id_is_unchanged_in_its_zone_and_refused_in_another() {
        let t = Tenant::new("acme", "Europe/Berlin");
        assert_eq!(existing("acme", "Europe/Berlin", Some(&t)), Ok(()));
        let other = existing("acme", "Asia/Tokyo", Some(&t)).unwrap_err();
        assert!(
            other.contains("exists in zone Europe/Berlin") && other.contains("tenants move acme --zone Asia/Tokyo")
        );
        assert!(existing("acme", "UTC", None).unwrap_err().contains("removed"));
    }

    #[test]
    fn the_format_follows_the_file_name() {
        assert_eq!(Format::of_path("t.CSV").unwrap(), Format::Csv);
        assert_eq!(Format::of_path("t.jsonl").unwrap(), Format::Ndjson);
        assert!(Format::of_path("t.txt").unwrap_err().to_string().contains("--format"));
    }
}
