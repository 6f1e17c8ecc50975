//! The invocation: its deadline (also when a local emulator sends none) and its owner id.

use tickwork::clock::Millis;

/// [`invocation_deadline`] at the system clock's now: what each function's `main` passes on.
pub fn deadline_ms(runtime_deadline_ms: u64) -> i64 {
    invocation_deadline(runtime_deadline_ms, tickwork::clock::Clock::now_ms(&tickwork::clock::SystemClock))
}

/// How long an invocation may run when the runtime gave no deadline.
pub const LOCAL_DEADLINE_MS: i64 = 60_000;

/// The invocation's deadline (epoch ms). Lambda always sends one in the future; local emulators
/// (`cargo lambda watch`, others) may send none, which the runtime reports as 0 — taken literally,
/// every budget would be spent before the first page and the tick would do nothing. Such a deadline
/// becomes `now + 60 s`, with a warning.
pub fn invocation_deadline(deadline_ms: u64, now_ms: Millis) -> Millis {
    let d = i64::try_from(deadline_ms).unwrap_or(i64::MAX);
    if d > now_ms {
        d
    } else {
        tracing::warn!(deadline_ms, "no invocation deadline from the runtime (a local emulator?); allowing 60 s");
        now_ms + LOCAL_DEADLINE_MS
    }
}

/// A per-invocation owner id: never reused, so a restarted worker is a new owner (`003_*`).
pub fn owner_id(function: &str) -> String {
    format!("{function}-{:016x}", fastrand::u64(..))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_deadline_becomes_sixty_seconds() {
        assert_eq!(invocation_deadline(0, 1_000), 61_000);
        assert_eq!(invocation_deadline(900, 1_000), 61_000, "a deadline already past at the start");
        assert_eq!(invocation_deadline(5_000, 1_000), 5_000);
    }

    #[test]
    fn owner_ids_are_unique() {
        assert_ne!(owner_id("w"), owner_id("w"));
    }
}
