//! The schedule and timer operations, over [`tickwork::schedules::Schedules`]: the tenant is read
//! first (it must exist, and its zone governs), then the library writes the definition, its
//! group membership and the due index together.
//!
//! A timer is a one-off schedule (`at …`) under a name: `timers.at` refuses a name that a
//! recurring schedule holds (it would silently turn a nudge into a one-off), and `timers.cancel`
//! removes only a one-off (a fired timer is gone already: the sweep removes it).

use std::collections::HashMap;

use tickwork::schedules::spec::check_name;
use tickwork::schedules::{upcoming, Changed, Dst, Fold, Schedule, ScheduleDef, Spec, SpecError};

use crate::answer::{BatchResult, Change, Done, Entry, Outcome, Refusal, RefusalType};
use crate::deps::Deps;
use crate::refuse::{self, Ran, StackError};
use crate::request::NewSchedule;
use crate::views::{Fire, NextFires, ScheduleList, ScheduleView};

/// The definition an entry asks for, or its refusal naming the field. Pure.
pub fn definition(e: &NewSchedule) -> Result<ScheduleDef, Refusal> {
    check_name(&e.name).map_err(|x| refuse::spec(&x, "name"))?;
    let spec: Spec = e.spec.parse().map_err(|x| refuse::spec(&x, "spec"))?;
    let mut dst = Dst::for_spec(&spec);
    if let Some(g) = &e.gap {
        dst.gap = g.parse().map_err(|x| refuse::spec(&x, "gap"))?;
    }
    if let Some(f) = &e.fold {
        dst.fold = f.parse().map_err(|x| refuse::spec(&x, "fold"))?;
    }
    if dst.fold == Fold::Both && spec.one_off() {
        let x = SpecError(format!("`{spec}` fires once: the fold policy `both` would fire it twice"));
        return Err(refuse::spec(&x, "fold"));
    }
    let def = ScheduleDef::new(&e.name, spec, e.spread_min, dst).map_err(|x| refuse::spec(&x, "spread_min"))?;
    def.with_payload(e.payload.as_ref()).map_err(|x| Refusal::new(RefusalType::TooLarge, x.0).field("payload"))
}

/// A schedule as the answers show it.
pub fn view(s: &Schedule) -> ScheduleView {
    ScheduleView {
        tenant: s.tenant.clone(),
        name: s.def.name.clone(),
        spec: s.def.spec.to_string(),
        spread_min: s.def.spread_min,
        gap: s.def.dst.gap.to_string(),
        fold: s.def.dst.fold.to_string(),
        paused: s.paused,
        one_off: s.def.spec.one_off(),
        payload: s.def.payload.as_deref().map(|p| serde_json::from_str(p).unwrap_or_else(|_| p.into())),
    }
}

fn change(c: Changed) -> Change {
    match c {
        Changed::Added => Change::Added,
        Changed::Changed => Change::Changed,
        Changed::Unchanged => Change::Unchanged,
    }
}

/// The tenant's zone, or the refusal (`NoSuchTenant` at `field`, `Throttled`).
async fn zone_of(deps: &Deps, tenant: &str, field: &str) -> Result<Result<String, Refusal>, StackError> {
    match deps.tenants.get(tenant).await {
        Ok(Some(t)) => Ok(Ok(t.zone)),
        Ok(None) => Ok(Err(refuse::no_tenant(tenant, field))),
        Err(e) => Ok(Err(refuse::db(e)?)),
    }
}

/// `schedules.put`: each entry checked, its tenant read (once a tenant), then written through
/// the library one at a time; a refused entry is listed and the rest are written.
pub async fn put(deps: &Deps, entries: &[NewSchedule]) -> Result<BatchResult, StackError> {
    let mut out = BatchResult { entries: Vec::new(), refused: Vec::new() };
    let mut zones: HashMap<String, Result<String, Refusal>> = HashMap::new();
    let mut first: HashMap<(&str, &str), usize> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        let def = match definition(e) {
            Ok(d) => d,
            Err(r) => {
                out.refused.push(r.in_batch("schedules", i));
                continue;
            }
        };
        if let Some(j) = first.insert((e.tenant.as_str(), e.name.as_str()), i) {
            first.insert((e.tenant.as_str(), e.name.as_str()), j);
            out.refused.push(
                Refusal::new(
                    RefusalType::InvalidField,
                    format!("entry {j} names `{}` of `{}` already", e.name, e.tenant),
                )
                .field("name")
                .in_batch("schedules", i),
            );
            continue;
        }
        if !zones.contains_key(&e.tenant) {
            let z = zone_of(deps, &e.tenant, "tenant").await?;
            zones.insert(e.tenant.clone(), z);
        }
        let zone = match &zones[&e.tenant] {
            Ok(z) => z.clone(),
            Err(r) => {
                out.refused.push(r.clone().in_batch("schedules", i));
                continue;
            }
        };
        match deps.schedules.put(&e.tenant, &zone, def, &deps.policy).await {
            Ok(c) => out.entries.push(Entry {
                index: i,
                id: e.tenant.clone(),
                name: Some(e.name.clone()),
                outcome: change(c),
            }),
            Err(err) => out.refused.push(refuse::schedule(err, "spec")?.in_batch("schedules", i)),
        }
    }
    Ok(out)
}

fn done(tenant: &str, name: &str, outcome: Change) -> Done {
    Done { id: tenant.into(), name: Some(name.into()), outcome, zone: None, fires_at: None }
}

/// `schedules.pause` (`true`) and `schedules.resume`; a resumed one is owed from now.
pub async fn set_paused(deps: &Deps, tenant: &str, name: &str, paused: bool) -> Ran {
    let zone = match zone_of(deps, tenant, "tenant").await? {
        Ok(z) => z,
        Err(r) => return Ok(Err(r)),
    };
    Ok(match deps.schedules.set_paused(tenant, name, paused, &zone).await {
        Ok(c) => Ok(Outcome::Done(done(tenant, name, change(c)))),
        Err(e) => Err(refuse::schedule(e, "name")?),
    })
}

/// `schedules.remove`.
pub async fn remove(deps: &Deps, tenant: &str, name: &str) -> Ran {
    Ok(match deps.schedules.remove(tenant, name).await {
        Ok(true) => Ok(Outcome::Done(done(tenant, name, Change::Removed))),
        Ok(false) => Err(refuse::schedule(
            tickwork::schedules::ScheduleError::NotFound { tenant: tenant.into(), name: name.into() },
            "name",
        )?),
        Err(e) => Err(refuse::schedule(e, "name")?),
    })
}

/// `schedules.list`: the tenant's schedules (its definitions' partition, paged to the end).
pub async fn list(deps: &Deps, tenant: &str) -> Ran {
    if let Err(r) = zone_of(deps, tenant, "tenant").await? {
        return Ok(Err(r));
    }
    Ok(match deps.schedules.list(tenant).await {
        Ok(all) => Ok(Outcome::Schedules(ScheduleList { schedules: all.iter().map(view).collect() })),
        Err(e) => Err(refuse::schedule(e, "tenant")?),
    })
}

/// The coming fires of `all`, `count` each from `from_ms`, soonest first. Pure.
pub fn coming(all: &[Schedule], zone: &str, from_ms: i64, count: usize) -> Result<Vec<Fire>, Refusal> {
    let at = |ms: i64| jiff::Timestamp::from_millisecond(ms).map(|t| t.to_string()).unwrap_or_default();
    let mut fires = Vec::new();
    for s in all {
        for (o, due) in upcoming(s, zone, from_ms, count).map_err(|e| refuse::spec(&e, "name"))? {
            fires.push(Fire { name: s.def.name.clone(), occurrence: o.key, instant: at(o.at_ms), due: at(due) });
        }
    }
    fires.sort_by(|a, b| (&a.due, &a.name).cmp(&(&b.due, &b.name)));
    Ok(fires)
}

/// `schedules.next`: as the sweep will fire them (the same arithmetic).
pub async fn next(deps: &Deps, tenant: &str, name: Option<&str>, count: Option<u32>, from: Option<&str>) -> Ran {
    let from_ms = match from {
        None => deps.clock.now_ms(),
        Some(t) => match t.parse::<jiff::Timestamp>() {
            Ok(t) => t.as_millisecond(),
            Err(e) => {
                return Ok(Err(Refusal::new(
                    RefusalType::InvalidField,
                    format!("from `{t}` is not an RFC 3339 instant: {e}"),
                )
                .field("from")))
            }
        },
    };
    let zone = match zone_of(deps, tenant, "tenant").await? {
        Ok(z) => z,
        Err(r) => return Ok(Err(r)),
    };
    let all = match name {
        Some(n) => match deps.schedules.get(tenant, n).await {
            Ok(Some(s)) => vec![s],
            Ok(None) => {
                let nf = tickwork::schedules::ScheduleError::NotFound { tenant: tenant.into(), name: n.into() };
                return Ok(Err(refuse::schedule(nf, "name")?));
            }
            Err(e) => return Ok(Err(refuse::schedule(e, "name")?)),
        },
        None => match deps.schedules.list(tenant).await {
            Ok(l) => l,
            Err(e) => return Ok(Err(refuse::schedule(e, "tenant")?)),
        },
    };
    Ok(coming(&all, &zone, from_ms, count.unwrap_or(5) as usize).map(|fires| Outcome::Next(NextFires { fires })))
}

/// `timers.at`: a one-off schedule at `at` (an instant, or a local time of the tenant's zone).
/// The same timer again is `unchanged`; a new instant under the same name is `changed`.
pub async fn timer_at(deps: &Deps, tenant: &str, name: &str, at: &str, payload: Option<&serde_json::Value>) -> Ran {
    let e = NewSchedule {
        tenant: tenant.into(),
        name: name.into(),
        spec: format!("at {}", at.trim()),
        spread_min: 0,
        gap: None,
        fold: None,
        payload: payload.cloned(),
    };
    let def = match definition(&e) {
        Ok(d) => d,
        Err(mut r) => {
            if r.field.as_deref() == Some("spec") {
                r.field = Some("at".into());
            }
            return Ok(Err(r));
        }
    };
    let zone = match zone_of(deps, tenant, "tenant").await? {
        Ok(z) => z,
        Err(r) => return Ok(Err(r)),
    };
    match deps.schedules.get(tenant, name).await {
        Ok(Some(old)) if !old.def.spec.one_off() => {
            return Ok(Err(Refusal::new(
                RefusalType::Conflict,
                format!(
                    "`{name}` of `{tenant}` is a recurring schedule (`{}`), not a timer: name the timer otherwise",
                    old.def.spec
                ),
            )
            .field("name")))
        }
        Ok(_) => {}
        Err(e) => return Ok(Err(refuse::schedule(e, "name")?)),
    }
    let c = match deps.schedules.put(tenant, &zone, def, &deps.policy).await {
        Ok(c) => c,
        Err(e) => return Ok(Err(refuse::schedule(e, "at")?)),
    };
    // The instant it fires, as the sweep computes it (none when it already fired, or is paused).
    let fires_at = match deps.schedules.get(tenant, name).await {
        Ok(Some(s)) => upcoming(&s, &zone, i64::MIN / 2, 1)
            .ok()
            .and_then(|v| v.first().map(|(_, due)| *due))
            .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
            .map(|t| t.to_string()),
        _ => None,
    };
    Ok(Ok(Outcome::Done(Done { fires_at, ..done(tenant, name, change(c)) })))
}

/// `timers.cancel`: removes a timer that has not fired.
pub async fn timer_cancel(deps: &Deps, tenant: &str, name: &str) -> Ran {
    match deps.schedules.get(tenant, name).await {
        Ok(None) => {
            return Ok(Err(Refusal::new(
                RefusalType::NoSuchSchedule,
                format!("`{tenant}` has no timer `{name}`: it fired, was cancelled, or was never set"),
            )
            .field("name")))
        }
        Ok(Some(s)) if !s.def.spec.one_off() => {
            return Ok(Err(Refusal::new(
                RefusalType::Conflict,
                format!(
                    "`{name}` of `{tenant}` is a recurring schedule (`{}`): schedules.remove removes it",
                    s.def.spec
                ),
            )
            .field("name")))
        }
        Ok(Some(_)) => {}
        Err(e) => return Ok(Err(refuse::schedule(e, "name")?)),
    }
    remove(deps, tenant, name).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, spec: &str, spread: u32, gap: Option<&str>, fold: Option<&str>) -> NewSchedule {
        NewSchedule {
            tenant: "t".into(),
            name: name.into(),
            spec: spec.into(),
            spread_min: spread,
            gap: gap.map(String::from),
            fold: fold.map(String::from),
            payload: None,
        }
    }

    #[test]
    fn a_definition_is_refused_at_the_field_that_is_wrong() {
        assert!(definition(&entry("nudge", "weekly mon-fri 09:30", 0, Some("skip"), Some("last"))).is_ok());
        for (e, field) in [
            (entry("a b", "daily 08:00", 0, None, None), "name"),
            (entry("nudge", "hourly 08:00", 0, None, None), "spec"),
            (entry("nudge", "daily 08:00", 0, Some("later"), None), "gap"),
            (entry("nudge", "daily 08:00", 0, None, Some("twice")), "fold"),
            (entry("call", "at 2027-10-31T02:30", 0, None, Some("both")), "fold"),
            (entry("nudge", "daily 08:00", 1_440, None, None), "spread_min"),
            (entry("nudge", "at 2026-12-24T09:00", 5, None, None), "spread_min"),
        ] {
            let r = definition(&e).unwrap_err();
            assert_eq!((r.r#type, r.field.as_deref()), (RefusalType::InvalidSpec, Some(field)), "{e:?}: {}", r.message);
        }
        let with =
            |v: serde_json::Value| NewSchedule { payload: Some(v), ..entry("nudge", "daily 08:00", 0, None, None) };
        let d = definition(&with(serde_json::json!({"z": 1, "a": [true]}))).unwrap();
        assert_eq!(d.payload.as_deref(), Some(r#"{"a":[true],"z":1}"#));
        let r = definition(&with(serde_json::Value::String("x".repeat(4_100)))).unwrap_err();
        assert_eq!((r.r#type, r.field.as_deref()), (RefusalType::TooLarge, Some("payload")), "{}", r.message);
    }

    #[test]
    fn coming_fires_are_soonest_first_across_schedules() {
        let s = |name: &str, spec: &str| Schedule {
            tenant: "t".into(),
            def: ScheduleDef::new(name, spec.parse().unwrap(), 0, Dst::default()).unwrap(),
            paused: false,
            ver: 1,
            since_ms: 0,
            group: None,
        };
        let from = "2026-12-01T00:00:00Z".parse::<jiff::Timestamp>().unwrap().as_millisecond();
        let f = coming(&[s("late", "daily 20:00"), s("early", "daily 08:00")], "UTC", from, 2).unwrap();
        let names: Vec<&str> = f.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["early", "late", "early", "late"]);
        assert_eq!(f[0].due, "2026-12-01T08:00:00Z");
    }
}
