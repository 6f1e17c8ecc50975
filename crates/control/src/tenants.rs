//! The tenant operations, over [`tickwork::tenants::Tenants`]: the lifecycle a team's service
//! drives (signup, a change of zone, a lapsed payment, an account closed), with the schedules
//! that follow each step.
//!
//! Idempotent under a repeat (an asynchronous invocation is at least once): an add of a tenant
//! that exists in the same zone is `unchanged`; a suspend of a suspended tenant, a resume of an
//! active one and a move to the zone it is in are `unchanged`; a remove stopped between its
//! schedules and its tenant is finished by the next.

use std::collections::HashMap;

use tickwork::tenants::{InvalidTenant, Position, Tenant};

use crate::answer::{BatchResult, Change, Done, Entry, Outcome, Refusal, RefusalType};
use crate::deps::Deps;
use crate::refuse::{self, Ran, StackError};
use crate::request::{NewTenant, MAX_PAGE};
use crate::views::{TenantPage, TenantView};

/// The tenant an entry asks for, checked as every path checks it (canonical zone, `owed_from`
/// held to the sweep's policy), or its refusal. Pure.
pub fn candidate(e: &NewTenant, now_ms: i64, policy: &tickwork::calendar::Policy) -> Result<Tenant, Refusal> {
    let bad = |x: &InvalidTenant| refuse::tenant(x, &e.id, &e.zone);
    let t = Tenant::new(e.id.as_str(), e.zone.trim()).canonical().map_err(|x| bad(&x))?;
    match &e.owed_from {
        None => Ok(t),
        Some(d) => {
            let date: jiff::civil::Date = d.parse().map_err(|err| {
                Refusal::new(RefusalType::InvalidField, format!("owed_from `{d}` is not a date (YYYY-MM-DD): {err}"))
                    .field("owed_from")
            })?;
            t.owed_from(date, now_ms, policy).map_err(|x| bad(&x))
        }
    }
}

/// Adds the batch's tenants: every entry checked first (a refused one is listed and nothing is
/// written for it), those already stored in another zone refused as a `Conflict` before
/// anything is written (a change of zone is a move), and the rest added through the library in
/// one call (zones registered with the sweep before the tenants are written).
pub async fn add(deps: &Deps, entries: &[NewTenant]) -> Result<BatchResult, StackError> {
    let now = deps.clock.now_ms();
    let mut refused = Vec::new();
    let mut good: Vec<(usize, Tenant)> = Vec::new();
    let mut first: HashMap<String, usize> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        match candidate(e, now, &deps.policy) {
            Err(r) => refused.push(r.in_batch("tenants", i)),
            Ok(t) => match first.get(&t.id) {
                Some(j) => refused.push(
                    Refusal::new(RefusalType::InvalidField, format!("entry {j} names the tenant `{}` already", t.id))
                        .field("id")
                        .in_batch("tenants", i),
                ),
                None => {
                    first.insert(t.id.clone(), i);
                    good.push((i, t));
                }
            },
        }
    }
    let ids: Vec<&str> = good.iter().map(|(_, t)| t.id.as_str()).collect();
    let stored = match deps.tenants.get_many(&ids).await {
        Ok(s) => s,
        Err(e) => return throttled_batch(e, good.iter().map(|(i, _)| *i), refused),
    };
    let mut entries_out = Vec::new();
    let mut write = Vec::new();
    for (i, t) in good {
        match stored.get(&t.id) {
            Some(Ok(s)) if s.zone != t.zone => refused.push(conflict(&t.id, &s.zone, &t.zone).in_batch("tenants", i)),
            Some(Err(problem)) => refused.push(
                Refusal::new(RefusalType::Conflict, format!("tenant `{}` is stored but unreadable: {problem}", t.id))
                    .field("id")
                    .in_batch("tenants", i),
            ),
            // Stored in the same zone: added again, which changes nothing of it (and wakes it, in
            // case the first add stopped between its put and its wake).
            _ => write.push((i, t)),
        }
    }
    if !write.is_empty() {
        let tenants: Vec<Tenant> = write.iter().map(|(_, t)| t.clone()).collect();
        let report = match deps.tenants.add(&tenants, now).await {
            Ok(r) => r,
            Err(tickwork::tenants::AddError::Db(e)) => {
                return throttled_batch(e, write.iter().map(|(i, _)| *i), refused);
            }
            Err(tickwork::tenants::AddError::Invalid(e)) => {
                return Err(StackError::Setup(format!("a checked tenant was refused: {e}")))
            }
            Err(e @ tickwork::tenants::AddError::NoRegistry) => return Err(StackError::Setup(e.to_string())),
        };
        for (i, t) in write {
            if !report.existing_ids.contains(&t.id) {
                entries_out.push(Entry { index: i, id: t.id, name: None, outcome: Change::Added });
                continue;
            }
            // It existed: in the zone asked for (unchanged), or one written meanwhile in another.
            match deps.tenants.get(&t.id).await? {
                Some(s) if s.zone != t.zone => refused.push(conflict(&t.id, &s.zone, &t.zone).in_batch("tenants", i)),
                _ => entries_out.push(Entry { index: i, id: t.id, name: None, outcome: Change::Unchanged }),
            }
        }
    }
    entries_out.sort_by_key(|e| e.index);
    refused.sort_by_key(|r| r.index);
    Ok(BatchResult { entries: entries_out, refused })
}

/// A batch whose writes were throttled: every entry still to write refused as `Throttled` (the
/// batch is harmless to send again), or the stack's error.
fn throttled_batch(
    e: tickwork::DbError,
    pending: impl Iterator<Item = usize>,
    mut refused: Vec<Refusal>,
) -> Result<BatchResult, StackError> {
    let r = refuse::db(e)?;
    refused.extend(pending.map(|i| r.clone().in_batch("tenants", i)));
    refused.sort_by_key(|r| r.index);
    Ok(BatchResult { entries: Vec::new(), refused })
}

fn conflict(id: &str, stored: &str, asked: &str) -> Refusal {
    Refusal::new(
        RefusalType::Conflict,
        format!("tenant `{id}` exists in zone {stored}, not {asked}: tenants.move moves it without losing a period"),
    )
    .field("zone")
}

/// A tenant as the answers show it.
pub fn view(t: &Tenant) -> TenantView {
    TenantView {
        id: t.id.clone(),
        zone: t.zone.clone(),
        status: if t.active { "active" } else { "suspended" }.into(),
        owed_from: t.since_ms.and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok()).map(|x| x.to_string()),
        position: match t.pos {
            Position::Follows => "follows".into(),
            Position::Fresh => "fresh".into(),
            Position::Through(d) => format!("through {d}"),
        },
    }
}

/// The stored tenant, or `NoSuchTenant`.
pub async fn stored(deps: &Deps, id: &str) -> Result<Result<Tenant, Refusal>, StackError> {
    match deps.tenants.get(id).await {
        Ok(Some(t)) => Ok(Ok(t)),
        Ok(None) => Ok(Err(refuse::no_tenant(id, "id"))),
        Err(e) => Ok(Err(refuse::db(e)?)),
    }
}

/// `tenants.get`.
pub async fn get(deps: &Deps, id: &str) -> Ran {
    Ok(stored(deps, id).await?.map(|t| Outcome::Tenant(view(&t))))
}

fn done(id: &str, outcome: Change) -> Outcome {
    Outcome::Done(Done { id: id.into(), name: None, outcome, zone: None, fires_at: None })
}

/// A DynamoDB error of an operation as its answer: a refusal to retry, or the stack's failure.
fn or_refused<T>(r: Result<T, tickwork::DbError>) -> Result<Result<T, Refusal>, StackError> {
    match r {
        Ok(v) => Ok(Ok(v)),
        Err(e) => Ok(Err(refuse::db(e)?)),
    }
}

/// `tenants.suspend`: nothing is pulsed or fired for it until it is resumed.
pub async fn suspend(deps: &Deps, id: &str) -> Ran {
    let t = match stored(deps, id).await? {
        Ok(t) => t,
        Err(r) => return Ok(Err(r)),
    };
    if !t.active {
        return Ok(Ok(done(id, Change::Unchanged)));
    }
    Ok(match or_refused(deps.tenants.suspend(id).await)? {
        Ok(true) => Ok(done(id, Change::Changed)),
        Ok(false) => Err(refuse::no_tenant(id, "id")),
        Err(r) => Err(r),
    })
}

/// `tenants.resume`: owed from now, and its schedules owed from now in its zone (what came due
/// while it was suspended is not fired late).
pub async fn resume(deps: &Deps, id: &str) -> Ran {
    let t = match stored(deps, id).await? {
        Ok(t) => t,
        Err(r) => return Ok(Err(r)),
    };
    if t.active {
        return Ok(Ok(done(id, Change::Unchanged)));
    }
    match or_refused(deps.tenants.resume(id).await)? {
        Ok(true) => {}
        Ok(false) => return Ok(Err(refuse::no_tenant(id, "id"))),
        Err(r) => return Ok(Err(r)),
    }
    if let Err(e) = deps.schedules.retarget(id, &t.zone).await {
        return Ok(Err(refuse::schedule(e, "id")?));
    }
    Ok(Ok(done(id, Change::Changed)))
}

/// `tenants.move`: into `zone` without losing or repeating a period; its schedules owed from now
/// in the new zone. A move repeated after it was made (or stopped before its schedules followed)
/// retargets any schedule still computed in another zone, and is `unchanged` otherwise.
pub async fn move_zone(deps: &Deps, id: &str, zone: &str) -> Ran {
    let zone = match tickwork::tenants::canonical_zone(zone.trim()) {
        Ok(z) => z,
        Err(e) => return Ok(Err(refuse::zone(&e))),
    };
    let t = match stored(deps, id).await? {
        Ok(t) => t,
        Err(r) => return Ok(Err(r)),
    };
    let outcome = if t.zone == zone {
        let list = match deps.schedules.list(id).await {
            Ok(l) => l,
            Err(e) => return Ok(Err(refuse::schedule(e, "id")?)),
        };
        if !stale_schedules(&list, &zone) {
            return Ok(Ok(Outcome::Done(Done { zone: Some(zone), ..done_of(id, Change::Unchanged) })));
        }
        Change::Changed
    } else {
        match deps.tenants.move_zone(id, &zone).await {
            Ok(true) => Change::Changed,
            Ok(false) => return Ok(Err(refuse::no_tenant(id, "id"))),
            Err(tickwork::tenants::AddError::Db(e)) => return Ok(Err(refuse::db(e)?)),
            Err(tickwork::tenants::AddError::Invalid(e)) => return Ok(Err(refuse::tenant(&e, id, &zone))),
            Err(e @ tickwork::tenants::AddError::NoRegistry) => return Err(StackError::Setup(e.to_string())),
        }
    };
    if let Err(e) = deps.schedules.retarget(id, &zone).await {
        return Ok(Err(refuse::schedule(e, "zone")?));
    }
    Ok(Ok(Outcome::Done(Done { zone: Some(zone), ..done_of(id, outcome) })))
}

fn done_of(id: &str, outcome: Change) -> Done {
    Done { id: id.into(), name: None, outcome, zone: None, fires_at: None }
}

/// Whether any active schedule is a member of a group computed in another zone than `zone` (a
/// move that stopped before its schedules followed), or of none (a one-off its group's fire
/// passed over as moved, awaiting its retarget). Any generation of its group is its group. Pure.
pub fn stale_schedules(list: &[tickwork::schedules::Schedule], zone: &str) -> bool {
    use tickwork::schedules::Group;
    list.iter().filter(|s| !s.paused).any(|s| match tickwork::schedules::member_of(s, zone) {
        Ok((g, _)) => s.group.as_deref().map(Group::base_id) != Some(g.id().as_str()),
        Err(_) => false,
    })
}

/// `tenants.remove`: its schedules first, then the tenant (a remove stopped between the two is
/// finished by the next; the other order would leave definitions nothing reaches).
pub async fn remove(deps: &Deps, id: &str) -> Ran {
    if let Err(e) = deps.schedules.remove_all(id).await {
        return Ok(Err(refuse::schedule(e, "id")?));
    }
    Ok(match or_refused(deps.tenants.remove(id).await)? {
        Ok(true) => Ok(done(id, Change::Removed)),
        Ok(false) => Err(refuse::no_tenant(id, "id")),
        Err(r) => Err(r),
    })
}

/// `tenants.list`: one page (a Scan of the tenants table by cursor, suspended tenants included)
/// and the cursor after it.
pub async fn list(deps: &Deps, cursor: Option<String>, limit: Option<u32>) -> Ran {
    let cursor = match cursor.map(tickwork::pager::Cursor::try_from).transpose() {
        Ok(c) => c,
        Err(e) => {
            return Ok(Err(Refusal::new(
                RefusalType::InvalidField,
                format!("not a cursor this function answered: {e}"),
            )
            .field("cursor")))
        }
    };
    let page = limit.unwrap_or(MAX_PAGE) as i32;
    let (items, next) = match deps.tenants.list_page(cursor.as_ref(), page).await {
        Ok(p) => p,
        Err(tickwork::pager::PageError::Db(e)) => return Ok(Err(refuse::db(e)?)),
        Err(tickwork::pager::PageError::Cursor(e)) => {
            return Ok(Err(Refusal::new(RefusalType::InvalidField, e.to_string()).field("cursor")))
        }
        Err(tickwork::pager::PageError::Handler(never)) => match never {},
    };
    let tenants = items
        .iter()
        .map(|x| match x {
            Ok(t) => view(t),
            Err(e) => TenantView {
                id: e.id.clone(),
                zone: String::new(),
                status: "unreadable".into(),
                owed_from: None,
                position: e.problem.clone(),
            },
        })
        .collect();
    Ok(Ok(Outcome::Page(TenantPage { tenants, cursor: next.map(String::from) })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> tickwork::calendar::Policy {
        tickwork::calendar::Policy {
            catch_up: tickwork::calendar::CatchUp::All,
            max_lateness_ms: 40 * 86_400_000,
            interval_ms: 60_000,
        }
    }

    fn entry(id: &str, zone: &str, owed: Option<&str>) -> NewTenant {
        NewTenant { id: id.into(), zone: zone.into(), owed_from: owed.map(String::from) }
    }

    #[test]
    fn an_entry_is_checked_as_every_path_checks_it() {
        let now = jiff::Timestamp::from_second(1_764_547_200).unwrap().as_millisecond(); // 2025-12-01
        let t = candidate(&entry("t1", " europe/berlin ", None), now, &policy()).unwrap();
        assert_eq!(t.zone, "Europe/Berlin", "the canonical name");
        let t = candidate(&entry("t1", "UTC", Some("2025-11-20")), now, &policy()).unwrap();
        assert!(t.since_ms.unwrap() < now);
        let r = candidate(&entry("t1", "UTC", Some("20-11-2025")), now, &policy()).unwrap_err();
        assert_eq!((r.r#type, r.field.as_deref()), (RefusalType::InvalidField, Some("owed_from")));
        let r = candidate(&entry("t1", "UTC", Some("2024-01-01")), now, &policy()).unwrap_err();
        assert_eq!(r.field.as_deref(), Some("owed_from"), "beyond the lateness bound: {}", r.message);
        let r = candidate(&entry("t1", "Atlantis/Capital", None), now, &policy()).unwrap_err();
        assert_eq!(r.r#type, RefusalType::UnknownZone);
    }

    #[test]
    fn a_schedule_is_stale_when_its_group_is_of_another_zone() {
        use tickwork::schedules::{Dst, Schedule, ScheduleDef};
        let def = ScheduleDef::new("nudge", "daily 08:00".parse().unwrap(), 0, Dst::default()).unwrap();
        let mut s = Schedule { tenant: "t".into(), def, paused: false, ver: 1, since_ms: 0, group: None };
        let group = tickwork::schedules::member_of(&s, "Europe/Berlin").unwrap().0;
        s.group = Some(group.id());
        assert!(!stale_schedules(std::slice::from_ref(&s), "Europe/Berlin"));
        assert!(stale_schedules(std::slice::from_ref(&s), "Asia/Tokyo"));
        // A later generation of its group (a join after a campaign's fire fixed it) is its group.
        s.group = Some(group.with_gen(7).id());
        assert!(!stale_schedules(std::slice::from_ref(&s), "Europe/Berlin"));
        // Unlinked by a fire that passed it over as moved: its retarget is owed.
        s.group = None;
        assert!(stale_schedules(std::slice::from_ref(&s), "Europe/Berlin"));
        s.paused = true;
        assert!(!stale_schedules(&[s], "Asia/Tokyo"), "a paused schedule is in no group");
    }
}
