//! Fired one-off groups cleaned after a tick's fires: each group's members read from its start a
//! page at a time, their definitions deleted (plain conditional deletes, [`CLEAN_CONCURRENCY`] at
//! once) and then their memberships (BatchWriteItem), for at most [`CLEAN_FOR_MS`] a tick. The
//! group's cleaning record, moved on at every visit, brings a wake a minute on to go on; a visit
//! that finds no member left retires the group ([`crate::fire_plan`]). Repeatable whatever stops
//! it ([`tickwork::schedules`]' `clean`): nothing here is fenced, and nothing needs to be.
//!
//! Runs after the tick lets its lease go, so a cleaning of minutes (a million members' two write
//! units each, at the member partition's 1,000 a second) holds no fire of any schedule back. Two
//! cleaners of one group (a visit while the last one's cleaning runs) do some deletes twice, and
//! no harm: a fixed generation gains no member, and is never made again (its head stays firing
//! until no one can join its one-off), so what a cleaner reads is always the fired group's.

use tickwork::budget::Budget;
use tickwork::schedules::{clean_read, CleanRead, Group};

use crate::deps::Deps;
use crate::report::PulseError;

/// How long a tick cleans at most: the wake a minute on visits the group again, and two ticks
/// cleaning one group at once would do each delete twice.
pub const CLEAN_FOR_MS: i64 = 45_000;

/// Members a cleaning page reads.
const CLEAN_PAGE: i32 = 1000;

/// Definition deletes at once.
const CLEAN_CONCURRENCY: usize = 64;

/// Cleans `groups` (each once) within `budget` and [`CLEAN_FOR_MS`]: how many members were
/// cleaned. A failure is logged and leaves the rest to the next visit.
pub(crate) async fn clean(deps: &Deps, groups: &[Group], budget: &dyn Budget) -> u64 {
    let until = deps.clock.now_ms() + CLEAN_FOR_MS;
    let mut seen = std::collections::HashSet::new();
    let mut cleaned = 0;
    for g in groups.iter().filter(|g| seen.insert(g.id())) {
        loop {
            if budget.exhausted() || deps.clock.now_ms() >= until {
                return cleaned;
            }
            match Box::pin(clean_page(deps, g)).await {
                Ok(0) => break,
                Ok(n) => cleaned += n,
                Err(e) => {
                    tracing::warn!(group = %g.id(), error = %e, "a fired one-off's cleaning stopped: the next visit goes on");
                    break;
                }
            }
        }
    }
    cleaned
}

/// One page of `g`'s members cleaned from its start: how many (0: none left). Every definition a
/// member names is deleted while it is the version fired and names the group: one the fire passed
/// over (its tenant moved, or unreadable) was unlinked from it then, and stays.
async fn clean_page(deps: &Deps, g: &Group) -> Result<u64, PulseError> {
    let gid = g.id();
    let (members, _) = deps.schedules.members_page(&gid, None, CLEAN_PAGE).await?;
    if members.is_empty() {
        return Ok(0);
    }
    let reads: Vec<CleanRead> = members.iter().map(clean_read).collect();
    let defs: Vec<(String, u64)> = reads.iter().filter_map(|(t, v)| v.map(|v| (t.clone(), v))).collect();
    let all: Vec<String> = reads.into_iter().map(|(t, _)| t).collect();
    deps.schedules.clean_members(&gid, &g.name, &defs, &all, CLEAN_CONCURRENCY).await?;
    Ok(all.len() as u64)
}
