//! What every add checks before anything is written: the zone, the keys' lengths against
//! DynamoDB's limits, and that a one-off can fire at all.

use super::error::SpecError;
use super::record::{def_pk, member_pk};
use super::spec::ScheduleDef;
use super::store::Schedules;
use crate::calendar::{CatchUp, Policy};
use crate::clock::Millis;
use crate::schema::key;

/// A one-off accepted this far inside the catch-up bound still reaches a tick before it passes.
pub const ONE_OFF_MARGIN_MS: Millis = 30 * 60_000;

impl Schedules {
    /// What every add checks before writing: the zone, the keys' lengths, and that a one-off
    /// can fire (its local time exists under its gap policy; the sweep's catch-up would not pass
    /// it over, with [`ONE_OFF_MARGIN_MS`] to spare for the tick that reaches it).
    pub(super) fn check(&self, tenant: &str, zone: &str, def: &ScheduleDef, policy: &Policy) -> Result<(), SpecError> {
        let now = self.clock_now();
        crate::calendar::zone(zone).map_err(|e| SpecError(e.0))?;
        check_keys(&self.job, tenant, &def.name)?;
        // What is stored is the spec's text: a spec built in code that its text does not name
        // exactly (a local time with a fraction of a second, which the text drops) would be stored
        // as another, earlier instant, and a one-off then never fires.
        if def.spec.to_string().parse::<super::spec::Spec>().ok().as_ref() != Some(&def.spec) {
            return Err(SpecError(format!(
                "`{}` does not read back as the spec given ({:?}): a time names whole seconds",
                def.spec, def.spec
            )));
        }
        if def.spec.one_off() {
            let tz = crate::calendar::zone(zone).map_err(|e| SpecError(e.0))?;
            if let super::spec::Spec::AtLocal(dt) = &def.spec {
                if super::occurrence::resolve(&tz, *dt, def.dst)?.is_empty() {
                    return Err(SpecError(format!(
                        "`{}`: that local time does not exist in {zone} (a DST change skips it) and the gap policy is skip: it would never fire",
                        def.spec
                    ))
                    );
                }
            }
            // Passed over beyond the lateness bound, and under `skip` beyond one tick.
            let bound = match policy.catch_up {
                CatchUp::Skip => policy.interval_ms.min(policy.max_lateness_ms),
                _ => policy.max_lateness_ms,
            };
            let far_back = now - bound + ONE_OFF_MARGIN_MS;
            if super::occurrence::next_after(&def.spec, &tz, def.dst, far_back)?.is_none() {
                return Err(SpecError(format!(
                    "`{}` is too far in the past for the sweep's catch-up ({:?}, {} min less a margin of {} min): it would never fire",
                    def.spec,
                    policy.catch_up,
                    bound / 60_000,
                    ONE_OFF_MARGIN_MS / 60_000
                )));
            }
        }
        Ok(())
    }

    /// [`Schedules::check`] for a caller that sorts rows before a [`Schedules::put_many`].
    pub fn check_row(&self, tenant: &str, zone: &str, def: &ScheduleDef, policy: &Policy) -> Result<(), SpecError> {
        self.check(tenant, zone, def, policy)
    }
}

/// The keys a schedule's items will have (its definition's, and a due record's at the latest
/// instant a record can name), held to DynamoDB's key limits by [`crate::limits::key`] before
/// anything is written: a tenant id near its limit plus a name can exceed a sort key's 1,024
/// bytes.
fn check_keys(job: &str, tenant: &str, name: &str) -> Result<(), SpecError> {
    let gid = "0".repeat(32);
    for k in [key(def_pk(job, tenant), name), key(member_pk(job, &gid), tenant)] {
        crate::limits::key("PutItem", "control", &k).map_err(|e| {
            SpecError(format!(
                "tenant id ({} bytes) and name ({} bytes) make a key longer than DynamoDB allows: {}",
                tenant.len(),
                name.len(),
                e.rule
            ))
        })?;
    }
    Ok(())
}
