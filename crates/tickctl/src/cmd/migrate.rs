//! `tickctl schedules import --from-scheduler|--from-crontab`: the rows another system's schedules
//! became ([`tickctl::migrate`]) checked against the tenants as stored ([`tickctl::migrate::tenant_zone`])
//! and written through the library's bulk import; a row that cannot be written is refused by name
//! with the rest.

use anyhow::Result;
use tickctl::migrate::{Refused, Row};
use tickwork::calendar::Policy;
use tickwork::schedules::{Dst, ScheduleDef, Schedules};
use tickwork::tenants::Tenants;

/// What the import wrote.
#[derive(Debug, Default, serde::Serialize)]
pub struct Written {
    pub added: u64,
    pub changed: u64,
    pub unchanged: u64,
}

/// Checks each row (its tenant exists in the row's zone, its spec and payload hold) and writes the
/// good ones; the others join `refused`, and nothing is written for them.
pub async fn write(
    s: &Schedules,
    tenants: &Tenants,
    rows: Vec<Row>,
    policy: &Policy,
    refused: &mut Vec<Refused>,
) -> Result<Written> {
    // The rows' tenants in one batch read (100 keys a request), not a read a row.
    let mut ids: Vec<&str> = rows.iter().map(|r| r.tenant.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let stored = tenants.get_many(&ids).await?;
    let mut good = Vec::new();
    for r in rows {
        let zone = match tickctl::migrate::tenant_zone(&r, stored.get(&r.tenant)) {
            Ok(z) => z,
            Err(reason) => {
                refused.push(Refused { source: r.source, reason });
                continue;
            }
        };
        let def = r
            .spec
            .parse()
            .and_then(|spec| {
                let dst = Dst { fold: r.fold.unwrap_or(Dst::for_spec(&spec).fold), ..Dst::for_spec(&spec) };
                ScheduleDef::new(&r.name, spec, r.spread_min, dst)
            })
            .and_then(|d| d.with_payload(r.payload.as_ref()))
            .and_then(|d| s.check_row(&r.tenant, &zone, &d, policy).map(|()| d));
        match def {
            Ok(d) => good.push((r.tenant, zone, d)),
            Err(e) => refused.push(Refused { source: r.source, reason: e.0 }),
        }
    }
    let r = s.put_many(good, policy).await?;
    Ok(Written { added: r.added, changed: r.changed, unchanged: r.unchanged })
}
