//! How `tickctl` prints: a table for people (comfy-table), JSON with `--json`, progress bars
//! only on a terminal (scripts and pipes see nothing).

use std::io::IsTerminal;

use anyhow::Result;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use indicatif::{ProgressBar, ProgressStyle};

pub fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(header.to_vec());
    t
}

pub fn json<T: serde::Serialize>(v: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// A one-line result: `id: what`, or `{"id": …, "done": …}` with `--json`.
pub fn done(as_json: bool, what: &str, id: &str) -> Result<()> {
    if as_json {
        json(&serde_json::json!({ "id": id, "done": what }))
    } else {
        println!("{id}: {what}");
        Ok(())
    }
}

pub fn time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map(|t| t.to_string()).unwrap_or_else(|_| ms.to_string())
}

pub fn bar(len: u64, what: &str) -> ProgressBar {
    // Drawn only on a terminal; scripts and pipes see nothing.
    let pb = if std::io::stderr().is_terminal() { ProgressBar::new(len) } else { ProgressBar::hidden() };
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed}").expect("template").progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

pub fn bytes_bar(len: Option<u64>, what: &str) -> ProgressBar {
    let pb = match (len, std::io::stderr().is_terminal()) {
        (Some(n), true) => ProgressBar::new(n),
        (None, true) => ProgressBar::new_spinner(),
        _ => ProgressBar::hidden(),
    };
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {elapsed}")
            .expect("template")
            .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}
