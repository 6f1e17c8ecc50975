//! A fired one-off group's cleaning: its members' definitions and memberships deleted after its
//! fire, by plain deletes outside any transaction. Fired a thousand members a transaction, a
//! campaign of a million is handed over first; the two write units a member its cleaning costs
//! then take the member partition's time (1,000 a second), not the hand-over's.
//!
//! Repeatable: a visit reads its group's members from the start, and a member goes only after its
//! definition, so a cleaning stopped anywhere is finished by the next visit. A fixed group gains
//! no member (a join finds its head firing and goes to the next generation), so a member deleted
//! here is never one that joined since.

use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};
use futures::stream::{self, StreamExt};

use super::record::{def_pk, member_pk, Member, GRP};
use super::store::{Schedules, BATCH_ROUNDS};
use crate::error::{condition_held, DbError};
use crate::schema::{av_n, av_s, key};

impl Schedules {
    /// Deletes the definitions `defs` (tenant, `ver`) of group `gid`'s schedule `name`, each only
    /// while it is still the version fired and still names this group (changed or added again
    /// since, it is another schedule now), `concurrency` at once; then the memberships of
    /// `tenants`. How many definitions went.
    pub async fn clean_members(
        &self,
        gid: &str,
        name: &str,
        defs: &[(String, u64)],
        tenants: &[String],
        concurrency: usize,
    ) -> Result<u64, DbError> {
        // Boxed: an unboxed closure over borrowed ids is not accepted where the sweep's future must
        // be `Send` for every lifetime.
        type Delete<'a> = futures::future::BoxFuture<'a, Result<bool, DbError>>;
        let deletes: Vec<Delete<'_>> = defs
            .iter()
            .map(|(tenant, ver)| {
                let req = self
                    .db
                    .client()
                    .delete_item()
                    .table_name(&self.table)
                    .set_key(Some(key(def_pk(&self.job, tenant), name)))
                    .condition_expression("#ver = :ver AND #grp = :gid")
                    .expression_attribute_names("#ver", "ver")
                    .expression_attribute_names("#grp", GRP)
                    .expression_attribute_values(":ver", av_n(*ver))
                    .expression_attribute_values(":gid", av_s(gid));
                Box::pin(async move { condition_held(self.db.delete(req).await) }) as Delete<'_>
            })
            .collect();
        let gone: Vec<Result<bool, DbError>> =
            stream::iter(deletes).buffer_unordered(concurrency.max(1)).collect().await;
        let mut n = 0;
        for g in gone {
            n += u64::from(g?);
        }
        let members = tenants
            .iter()
            .map(|t| {
                let d = DeleteRequest::builder().set_key(Some(key(member_pk(&self.job, gid), t))).build();
                WriteRequest::builder().delete_request(d.expect("delete has its key")).build()
            })
            .collect();
        self.db.batch_write_all(&self.table, members, BATCH_ROUNDS).await?;
        Ok(n)
    }
}

/// A member read for cleaning: its tenant, and its definition's `ver` when the member reads.
pub type CleanRead = (String, Option<u64>);

/// What a cleaning visit reads of a member: its tenant and `ver` (none: the member does not read,
/// and its definition stays for an operator, as at a fire).
pub fn clean_read(m: &Result<Member, (String, String)>) -> CleanRead {
    match m {
        Ok(m) => (m.tenant.clone(), Some(m.ver)),
        Err((t, _)) => (t.clone(), None),
    }
}
