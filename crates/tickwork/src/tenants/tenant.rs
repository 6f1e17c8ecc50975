//! One tenant: where it stands in its zone group's calendar, its limits, and its item.

use crate::item::Item;
use crate::schema::{av_s, get_s, PK};
use crate::tenants::schema::*;

/// Where a tenant stands in its zone group's calendar: which periods it has been pulsed through.
///
/// Why: a per-tenant cursor costs a write per tenant per day, more than the work it guards. Nearly
/// every tenant is where its zone group is — pulsed through the group's watermark, or through the
/// run's date once its page is done — so only tenants that are not ([`Position::Fresh`] after an
/// add, [`Position::Through`] after a suspension, a move or an isolated failure) carry a position,
/// and the sweep writes them once to bring them back to the group ([`Position::Follows`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Position {
    /// Where its zone group is (attribute absent).
    #[default]
    Follows,
    /// Never visited: owed every period that ends after its `since` (`-`).
    Fresh,
    /// Pulsed through local date `d`: every period that ended by the start of `d` (`YYYY-MM-DD`).
    Through(jiff::civil::Date),
}

impl Position {
    /// The stored attribute value; `None` for [`Position::Follows`] (no attribute).
    pub fn to_attr(self) -> Option<String> {
        match self {
            Position::Follows => None,
            Position::Fresh => Some("-".into()),
            Position::Through(d) => Some(d.to_string()),
        }
    }

    /// Reads the stored attribute; an unreadable one is an error naming it (the tenant is
    /// isolated, never guessed at).
    pub fn from_attr(v: Option<&str>) -> Result<Self, String> {
        match v {
            None => Ok(Position::Follows),
            Some("-") => Ok(Position::Fresh),
            Some(d) => match d.parse::<jiff::civil::Date>() {
                Ok(x) if x.to_string() == d => Ok(Position::Through(x)),
                _ => Err(format!("position `{d}` is neither `-` nor a date (YYYY-MM-DD)")),
            },
        }
    }
}

pub use crate::shard::shard_of;

/// Longest tenant id, in bytes. Every key derived from an id must stay inside DynamoDB's limits
/// and ours: a unit key `pulse#<id>#<grain>#<period>` or `<job>#<id>#<yyyy-mm-dd>` (a handler's
/// idempotency key, which a handler may use as an item key: within 1,024 bytes, a job name being at
/// most 64), a dead letter of one unit, a failure record's sort key `<zone>@<date>#<id>` within the
/// 1,024-byte sort key limit. Batch item ids are digests and do not grow with it. 900 leaves room
/// for all of them; a test builds each key at this length.
pub const MAX_TENANT_ID_BYTES: usize = 900;

/// Adding at most this many tenants at once wakes each (visited at the sweep's next tick).
pub const WAKE_BULK_LIMIT: usize = 25;

/// How much later than its adding a tenant's first visit may come, which `owed_from` keeps clear
/// of the lateness bound: a bulk import is visited at its zone's next midnight (up to a day), and
/// a run already past the tenant's shard reaches it at the next one.
pub const FIRST_VISIT_MARGIN_MS: i64 = 2 * 86_400_000;

/// A tenant refused before anything was written, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tenant `{id}`: {problem}")]
pub struct InvalidTenant {
    /// The id (shortened when long).
    pub id: String,
    /// What is wrong.
    pub problem: String,
}

/// A tenant as the sweeps need it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tenant {
    /// Id.
    pub id: String,
    /// IANA time zone name.
    pub zone: String,
    /// Active tenants are enumerated; others are not.
    pub active: bool,
    /// Every period that ends after this instant is owed: when the tenant was added, or the
    /// start of the day a migration owes it from ([`Tenant::owed_from`]); `None` when unknown.
    pub since_ms: Option<i64>,
    /// Where it stands in its zone group's calendar.
    #[serde(default)]
    pub pos: Position,
}

impl Tenant {
    /// Checks the id and the zone before anything is written: an id whose derived keys would
    /// break a limit fails every write for that tenant, tick after tick, so it is refused here.
    pub fn validate(&self) -> Result<(), InvalidTenant> {
        let shown: String = if self.id.len() > 60 {
            format!("{}… ({} bytes)", self.id.chars().take(40).collect::<String>(), self.id.len())
        } else {
            self.id.clone()
        };
        let bad = |p: String| InvalidTenant { id: shown.clone(), problem: p };
        if self.id.is_empty() {
            return Err(bad("the id is empty".into()));
        }
        if self.id.len() > MAX_TENANT_ID_BYTES {
            return Err(bad(format!(
                "the id is {} bytes; the limit is {MAX_TENANT_ID_BYTES} (the keys derived from it must fit DynamoDB's)",
                self.id.len()
            )));
        }
        if let Some(c) = self.id.chars().find(|c| c.is_control() || *c == '#') {
            return Err(bad(format!(
                "the id holds {c:?}; control characters and `#` (the separator of the keys derived from ids) are refused"
            )));
        }
        crate::calendar::zone(&self.zone).map_err(|e| bad(e.0))?;
        Ok(())
    }

    /// The tenant checked ([`Tenant::validate`]) with its zone under its canonical IANA name:
    /// the tz database finds `europe/berlin` too, and a zone group named so would be a second
    /// group of Berlin's tenants, which a later `Europe/Berlin` would not recognise. Every way in
    /// (`tickctl`, the control function) adds tenants through it.
    pub fn canonical(mut self) -> Result<Self, InvalidTenant> {
        self.validate()?;
        if let Ok(name) = canonical_zone(&self.zone) {
            self.zone = name;
        }
        Ok(self)
    }

    /// The tenants-table item, index keys included (the cost model sizes it).
    pub fn to_item(&self, shards: u32) -> Item {
        let k = shard_of(&self.id, shards);
        let mut item = Item::from([
            (PK.to_string(), av_s(&self.id)),
            (ZONE.to_string(), av_s(&self.zone)),
            (STATUS.to_string(), av_s(if self.active { "active" } else { "suspended" })),
        ]);
        if let Some(s) = self.since_ms {
            item.insert(SINCE.into(), crate::schema::av_n(s));
        }
        if let Some(p) = self.pos.to_attr() {
            item.insert(POS.into(), av_s(p));
        }
        if self.active {
            item.insert(TSHARD.into(), av_s(tshard_key(k)));
            item.insert(ZSHARD.into(), av_s(zshard_key(&self.zone, k)));
        }
        item
    }

    /// The tenant an item holds; `Err` names what is unreadable (a corrupt position).
    pub fn from_item(i: &Item) -> Result<Self, InvalidTenant> {
        let id = get_s(i, PK).unwrap_or_default().to_string();
        let bad = |problem: String| InvalidTenant { id: id.clone(), problem };
        Ok(Tenant {
            zone: get_s(i, ZONE).ok_or_else(|| bad("no zone".into()))?.to_string(),
            active: get_s(i, STATUS) == Some("active"),
            since_ms: crate::schema::get_i64(i, SINCE),
            pos: Position::from_attr(get_s(i, POS)).map_err(bad)?,
            id: id.clone(),
        })
    }

    /// A new active tenant of `zone`, never visited.
    pub fn new(id: impl Into<String>, zone: impl Into<String>) -> Self {
        Tenant { id: id.into(), zone: zone.into(), active: true, since_ms: None, pos: Position::Fresh }
    }

    /// The tenant owed every period that ends after local date `from` begins in its zone,
    /// instead of after the moment it is added: a migration's way to be owed what its old system
    /// may have missed (`from` yesterday owes yesterday; the first of last month owes last month).
    /// Refused, naming why, where the sweep's `policy` could not keep the promise: when `from`
    /// began longer than its lateness bound, less [`FIRST_VISIT_MARGIN_MS`], before `now_ms`
    /// (periods that old are never pulsed), or when its catch-up is not `all` (it would pulse the
    /// latest period of each grain, or none); or when `from` is after today in the tenant's zone
    /// (a tenant is owed from the moment it is added at the latest).
    pub fn owed_from(
        self,
        from: jiff::civil::Date,
        now_ms: i64,
        policy: &crate::calendar::Policy,
    ) -> Result<Self, InvalidTenant> {
        use crate::calendar;
        let bad = |problem: String| InvalidTenant { id: self.id.clone(), problem };
        if policy.catch_up != calendar::CatchUp::All {
            return Err(bad(format!(
                "owed from {from}: the sweep's catch-up ({}) is `{}`, which pulses {} of the periods missed; a migration needs `all`",
                crate::env::PULSE_CATCH_UP,
                if policy.catch_up == calendar::CatchUp::Latest { "latest" } else { "skip" },
                if policy.catch_up == calendar::CatchUp::Latest { "only the latest of each grain" } else { "none" },
            )));
        }
        let max_lateness_ms = policy.max_lateness_ms - FIRST_VISIT_MARGIN_MS;
        let tz = calendar::zone(&self.zone).map_err(|e| bad(e.0))?;
        let today = calendar::local_date(now_ms, &tz).map_err(|e| bad(e.0))?;
        if from > today {
            return Err(bad(format!(
                "owed from {from}, after today ({today} in {}): a tenant is owed from the moment it is added at the latest",
                self.zone
            )));
        }
        let start = calendar::start_of_day(from, &tz).map_err(|e| bad(e.0))?;
        if now_ms - start > max_lateness_ms {
            return Err(bad(format!(
                "owed from {from}, {:.1} days back: beyond the sweep's lateness bound of {:.1} days ({}) less {} for the first visit, so those periods would never be pulsed",
                (now_ms - start) as f64 / 86_400_000.0,
                policy.max_lateness_ms as f64 / 86_400_000.0,
                crate::env::PULSE_MAX_LATENESS_SECS,
                "two days",
            )));
        }
        Ok(Tenant { since_ms: Some(start), ..self })
    }
}

/// A zone's canonical IANA name (`europe/berlin` is `Europe/Berlin`), or why it is no zone.
pub fn canonical_zone(name: &str) -> Result<String, crate::calendar::CalendarError> {
    let tz = crate::calendar::zone(name)?;
    Ok(tz.iana_name().unwrap_or(name).to_string())
}

/// The condition "this tenant is as it was read": the same zone, the same position and the same
/// status. Pure. Every write that acts on a tenant read earlier carries it: the sweep's move of a
/// position (a tenant suspended since its page was read keeps the position it was suspended with,
/// so resuming still owes every period since) and an operator's change (the sweep's move in
/// between is not overwritten).
pub fn unchanged(t: &Tenant) -> crate::schema::ExprParts {
    let names = vec![("#zone", ZONE), ("#pos", POS), ("#st", STATUS)];
    let mut values = vec![(":oldzone", av_s(&t.zone)), (":active", av_s("active"))];
    let mut cond = "#zone = :oldzone".to_string();
    match t.pos.to_attr() {
        None => cond.push_str(" AND attribute_not_exists(#pos)"),
        Some(p) => {
            cond.push_str(" AND #pos = :oldpos");
            values.push((":oldpos", av_s(p)));
        }
    }
    cond.push_str(if t.active { " AND #st = :active" } else { " AND (attribute_not_exists(#st) OR #st <> :active)" });
    (cond, names, values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unchanged_names_zone_position_and_status() {
        let mut t = Tenant::new("t1", "Europe/Berlin");
        t.pos = Position::Follows;
        let (c, names, values) = unchanged(&t);
        assert_eq!(c, "#zone = :oldzone AND attribute_not_exists(#pos) AND #st = :active");
        assert_eq!((names.len(), values.len()), (3, 2));
        t.pos = Position::Through("2026-11-28".parse().unwrap());
        t.active = false;
        let (c, _, values) = unchanged(&t);
        assert_eq!(c, "#zone = :oldzone AND #pos = :oldpos AND (attribute_not_exists(#st) OR #st <> :active)");
        assert!(values.iter().any(|(k, v)| *k == ":oldpos" && v.as_s().unwrap() == "2026-11-28"));
    }

    #[test]
    fn a_migration_is_owed_from_the_start_of_its_day_within_the_lateness_bound() {
        let ms = |s: &str| s.parse::<jiff::Timestamp>().unwrap().as_millisecond();
        let d = |s: &str| s.parse::<jiff::civil::Date>().unwrap();
        // 2026-12-01 15:00 in Berlin (CET, UTC+1).
        let now = ms("2026-12-01T14:00:00Z");
        let forty = crate::calendar::Policy {
            catch_up: crate::calendar::CatchUp::All,
            max_lateness_ms: 40 * 86_400_000,
            interval_ms: 900_000,
        };
        let t = Tenant::new("acme", "Europe/Berlin").owed_from(d("2026-11-01"), now, &forty).unwrap();
        assert_eq!(t.since_ms, Some(ms("2026-10-31T23:00:00Z")), "Berlin's midnight");
        // Today is allowed (owed from this morning's midnight, not from now).
        let t = Tenant::new("acme", "Europe/Berlin").owed_from(d("2026-12-01"), now, &forty).unwrap();
        assert_eq!(t.since_ms, Some(ms("2026-11-30T23:00:00Z")));
        // Tomorrow, or beyond the bound: refused, naming why.
        let e = Tenant::new("acme", "Europe/Berlin").owed_from(d("2026-12-02"), now, &forty).unwrap_err();
        assert!(e.problem.contains("after today (2026-12-01 in Europe/Berlin)"), "{e}");
        let e = Tenant::new("acme", "Europe/Berlin").owed_from(d("2026-10-01"), now, &forty).unwrap_err();
        assert!(e.problem.contains("61.7 days back") && e.problem.contains("TICKWORK_PULSE_MAX_LATENESS_SECS"), "{e}");
        // A zone that is no zone is named as such.
        assert!(Tenant::new("acme", "Mars/Base").owed_from(d("2026-11-01"), now, &forty).is_err());
    }
}
