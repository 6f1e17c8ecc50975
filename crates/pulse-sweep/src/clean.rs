//! Fired one-off groups cleaned after a tick's fires: each group's members read from its start a
//! page at a time, their definitions deleted (plain conditional deletes, [`CLEAN_CONCURRENCY`] at
//! once) and then their memberships (BatchWriteItem), for at most [`CLEAN_FOR_MS`] a tick. The
//! group's cleaning record, moved on at every visit, brings a wake a minute on to go on; a visit
//! that finds no member left retires the group ([`crate::fire_plan`]). Repeatable whatever stops
//! it ([`tickwork::schedules`]' `clean`): nothing here is fenced, and nothing needs to be.
//!
//! Runs after the tick lets its lease go, so a cleaning of minutes (a million members' two write
//! units each, at the member partition's 1,000 a second) holds no fire of any schedule back.

use std::collections::HashMap;

use tickwork::budget::Budget;
use tickwork::schedules::{clean_read, CleanRead, Group, Spec};
use tickwork::tenants::Tenant;

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

/// One page of `g`'s members cleaned from its start: how many (0: none left).
async fn clean_page(deps: &Deps, g: &Group) -> Result<u64, PulseError> {
    let gid = g.id();
    let (members, _) = deps.schedules.members_page(&gid, None, CLEAN_PAGE).await?;
    if members.is_empty() {
        return Ok(0);
    }
    let reads: Vec<CleanRead> = members.iter().map(clean_read).collect();
    let ids: Vec<&str> = reads.iter().filter(|(_, v)| v.is_some()).map(|(t, _)| t.as_str()).collect();
    let mut tenants = HashMap::new();
    for chunk in ids.chunks(100) {
        tenants.extend(deps.tenants.get_many(chunk).await?);
    }
    let defs = defs_to_delete(&reads, &tenants, g);
    let all: Vec<String> = reads.into_iter().map(|(t, _)| t).collect();
    deps.schedules.clean_members(&gid, &g.name, &defs, &all, CLEAN_CONCURRENCY).await?;
    Ok(all.len() as u64)
}

/// The definitions a fired one-off's cleaning deletes of `reads`, their tenants read as `tenants`
/// (absent: gone): every one, as its fire would have, but a member's that does not read, whose
/// tenant does not read, or whose tenant is in another zone than a local one-off's group (moved and
/// not retargeted yet: its retarget owes it in the new zone). Pure.
pub(crate) fn defs_to_delete(
    reads: &[CleanRead],
    tenants: &HashMap<String, Result<Tenant, String>>,
    g: &Group,
) -> Vec<(String, u64)> {
    let zone_bound = !matches!(g.spec, Spec::AtInstant(_));
    reads
        .iter()
        .filter_map(|(t, ver)| {
            let ver = (*ver)?;
            match tenants.get(t) {
                None => Some((t.clone(), ver)),
                Some(Err(_)) => None,
                Some(Ok(tn)) if zone_bound && tn.zone != g.zone => None,
                Some(Ok(_)) => Some((t.clone(), ver)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickwork::schedules::{Dst, ScheduleDef};

    fn group(spec: &str) -> Group {
        let def = ScheduleDef::new("call", spec.parse().unwrap(), 0, Dst::default()).unwrap();
        Group::of("a", &def, "Europe/Berlin")
    }

    #[test]
    fn a_cleaning_deletes_the_definitions_a_fire_would_and_keeps_those_it_would_keep() {
        let reads: Vec<CleanRead> = vec![
            ("here".into(), Some(3)),
            ("gone".into(), Some(4)),
            ("broken".into(), None),
            ("badtenant".into(), Some(5)),
            ("moved".into(), Some(6)),
        ];
        let tenants: HashMap<String, Result<Tenant, String>> = [
            ("here".to_string(), Ok(Tenant::new("here", "Europe/Berlin"))),
            ("badtenant".to_string(), Err("no zone".to_string())),
            ("moved".to_string(), Ok(Tenant::new("moved", "America/New_York"))),
        ]
        .into_iter()
        .collect();
        let local = defs_to_delete(&reads, &tenants, &group("at 2026-12-24T09:00"));
        assert_eq!(local, [("here".to_string(), 3), ("gone".to_string(), 4)]);
        // An instant is the same in every zone: a moved tenant's `at <instant>` fired, and goes.
        let instant = defs_to_delete(&reads, &tenants, &group("at 2026-12-24T08:00:00Z"));
        assert_eq!(instant, [("here".to_string(), 3), ("gone".to_string(), 4), ("moved".to_string(), 6)]);
    }
}
