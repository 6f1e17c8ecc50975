//! The sweep's reads for a group's page of fires: the next page of its members, its head's
//! joins when it may be retired, and the members' tenants.

use std::collections::HashMap;

use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};

use crate::deps::Deps;
use crate::fire_plan::{member_page, Action, PageRead, Planned, Segment, TenantRead};
use crate::report::PulseError;
use tickwork::schedules::{DueRecord, Stage};

/// The next page of `rec`'s members for `p`: after its member cursor (an open one-off group's
/// from its start: fixed, or retired with its members, by the page that reads it). A group that
/// may be retired or fixed — an open one-off, or no member at its first page — has its head's
/// joins read first, and an empty group is looked at again after that read: a member that joined
/// before it is seen, one after it moves the joins and refuses the retirement or the fixing.
pub(crate) async fn read_page(deps: &Deps, rec: &DueRecord, p: &Planned) -> Result<PageRead, PulseError> {
    let s = &deps.schedules;
    let gid = rec.group.id();
    let open_one_off = p.plan.finished && rec.stage == Stage::Open;
    let limit = member_page(&p.plan, rec.stage) as i32;
    let start = if open_one_off { None } else { rec.cursor.as_deref() };
    let joins = if open_one_off { s.head_joins(&gid).await? } else { None };
    // Fixed: the members that left it, before the page (its transaction is conditional on them).
    let leaves = if rec.stage == Stage::Fixed { Some(s.head_leaves(&gid).await?) } else { None };
    let (members, more) = s.members_page(&gid, start, limit).await?;
    if !members.is_empty() || rec.cursor.is_some() || p.plan.finished {
        return Ok(PageRead { members, more, joins, headless: false, leaves });
    }
    let joins = s.head_joins(&gid).await?;
    let (members, more) = s.members_page(&gid, None, limit).await?;
    let empty = members.is_empty();
    Ok(PageRead { members, more, joins: joins.filter(|_| empty), headless: empty && joins.is_none(), leaves })
}

/// A cleaning record's visit: whether its group's head is there and a member is left, and when
/// the head may expire once the group is closed (no one can join its one-off any more: its
/// instant, the lateness bound, and a day).
pub(crate) async fn read_clean(deps: &Deps, rec: &DueRecord) -> Result<Action, PulseError> {
    let s = &deps.schedules;
    let gid = rec.group.id();
    let head = s.head_joins(&gid).await?.is_some();
    let (members, _) = s.members_page(&gid, None, 1).await?;
    let expires_ms = rec.due_ms + deps.cfg.policy.max_lateness_ms + 86_400_000;
    Ok(Action::Clean { head, empty: members.is_empty(), expires_s: expires_ms / 1000 })
}

/// The tenants of the members `segs` read.
pub(crate) async fn read_tenants(deps: &Deps, segs: &[&Segment]) -> Result<HashMap<String, TenantRead>, PulseError> {
    let mut ids: Vec<&str> = segs
        .iter()
        .filter_map(|s| match &s.action {
            Action::Page(_, read) => {
                Some(read.members.iter().filter_map(|m| m.as_ref().ok()).map(|m| m.tenant.as_str()))
            }
            Action::Isolate(_) | Action::Clean { .. } => None,
        })
        .flatten()
        .collect();
    ids.sort_unstable();
    ids.dedup();
    // A BatchGetItem a hundred, `tenant_concurrency` at once: a page of a thousand members is ten.
    // Boxed: an unboxed closure over borrowed ids is not accepted where the job's future must be
    // `Send` for every lifetime.
    type Read<'a> =
        BoxFuture<'a, Result<HashMap<String, Result<tickwork::tenants::Tenant, String>>, tickwork::DbError>>;
    let gets: Vec<Read<'_>> = ids.chunks(100).map(|c| Box::pin(deps.tenants.get_many(c)) as Read<'_>).collect();
    let reads: Vec<_> = stream::iter(gets).buffered(deps.cfg.tenant_concurrency).collect().await;
    let mut read = HashMap::new();
    for r in reads {
        read.extend(r?);
    }
    Ok(read
        .into_iter()
        .map(|(id, t)| {
            let t = match t {
                Ok(t) => TenantRead::Found(t),
                Err(why) => TenantRead::Unreadable(why),
            };
            (id, t)
        })
        .collect())
}
