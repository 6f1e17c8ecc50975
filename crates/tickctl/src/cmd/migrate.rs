//! `tickctl schedules import --from-scheduler|--from-crontab`: the rows another system's schedules
//! became ([`tickctl::migrate`]) checked against the tenants as stored and written through the
//! library's bulk import; a row that cannot be written is refused by name with the rest.

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
    let mut good = Vec::new();
    for r in rows {
        let zone = match tenants.get(&r.tenant).await? {
            None => {
                refused.push(Refused {
                    source: r.source,
                    reason: format!(
                        "no tenant `{}` (add it first: tickctl tenants add {} --zone {})",
                        r.tenant, r.tenant, r.zone
                    ),
                });
                continue;
            }
            Some(t) if t.zone != r.zone => {
                refused.push(Refused {
                    source: r.source,
                    reason: format!(
                        "its times are in {}, its tenant `{}` is in {}: a tenant's schedules follow its zone",
                        r.zone, r.tenant, t.zone
                    ),
                });
                continue;
            }
            Some(t) => t.zone,
        };
        let def = r
            .spec
            .parse()
            .and_then(|spec| ScheduleDef::new(&r.name, spec, r.spread_min, Dst::default()))
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
