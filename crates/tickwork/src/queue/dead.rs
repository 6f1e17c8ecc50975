//! Dead letters, for operators: listed to the end of the index, retried or purged one by one.

use crate::clock::Millis;
use crate::error::{condition_held, DbError};
use crate::queue::error::QueueError;
use crate::queue::schema::*;
use crate::queue::store::Queue;
use crate::schema::{av_n, av_s, get_i64, get_s, get_u64, PK};

/// A dead letter, for operators.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeadLetter {
    /// Id.
    pub id: String,
    /// Kind.
    pub kind: String,
    /// Tenant (an item of one tenant's work).
    pub tenant: Option<String>,
    /// The tenants of a batch item's units, each once, in order (empty for other items).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<String>,
    /// A batch item's units (0 for other items).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub units: u64,
    /// Claims made.
    pub attempts: u32,
    /// Last error.
    pub last_error: String,
    /// When (ms).
    pub failed_at_ms: Millis,
}

impl Queue {
    /// Every dead letter, following the index cursor to exhaustion.
    pub async fn dead_letters(&self) -> Result<Vec<DeadLetter>, QueueError> {
        let mut out = Vec::new();
        let q = self
            .db
            .client()
            .query()
            .table_name(&self.table)
            .index_name(DEAD_INDEX)
            .key_condition_expression("#dlq = :dlq")
            .expression_attribute_names("#dlq", DLQ)
            .expression_attribute_values(":dlq", av_s(DLQ_PARTITION));
        crate::pager::for_each_page(&self.db, q, None, 500, &crate::budget::Unlimited, "dead-letters", |page| {
            out.extend(page.items.iter().map(|i| DeadLetter {
                id: get_s(i, PK).unwrap_or_default().to_string(),
                kind: get_s(i, KIND).unwrap_or_default().to_string(),
                tenant: get_s(i, TENANT).map(str::to_string),
                tenants: Vec::new(),
                units: 0,
                attempts: get_u64(i, ATTEMPTS).unwrap_or(0) as u32,
                last_error: get_s(i, LAST_ERROR).unwrap_or_default().to_string(),
                failed_at_ms: get_i64(i, FAILED_AT).unwrap_or(0),
            }));
            std::future::ready(Ok::<(), DbError>(()))
        })
        .await
        .map_err(DbError::from)?;
        // A batch item names no tenant of its own (the index holds no payload): its units' are
        // read from the item, one read a dead letter, so that an operator sees whose work it is.
        for d in out.iter_mut().filter(|d| d.tenant.is_none()) {
            let Some(item) = self.get(&d.id).await? else { continue };
            let job = crate::queue::Job::unclaimed(&d.id, &d.kind, get_s(&item, PAYLOAD).unwrap_or_default());
            if let Some(Ok(b)) = crate::batch::Batch::of_job(&job) {
                let units = b.units(&d.kind);
                d.units = units.len() as u64;
                for u in units {
                    if !d.tenants.contains(&u.tenant) {
                        d.tenants.push(u.tenant);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Puts a dead letter back in the queue with its attempts reset (operator action).
    pub async fn retry_dead(&self, id: &str) -> Result<bool, QueueError> {
        let req = self
            .db
            .client()
            .update_item()
            .table_name(&self.table)
            .key(PK, av_s(id))
            .update_expression(
                "SET #state = :pending, #vis = :now, #attempts = :zero, #shard = :shard REMOVE #dlq, #failed",
            )
            .condition_expression("#state = :dead")
            .expression_attribute_names("#state", STATE)
            .expression_attribute_names("#vis", VISIBLE_AT)
            .expression_attribute_names("#attempts", ATTEMPTS)
            .expression_attribute_names("#shard", SHARD)
            .expression_attribute_names("#dlq", DLQ)
            .expression_attribute_names("#failed", FAILED_AT)
            .expression_attribute_values(":pending", av_s(PENDING))
            .expression_attribute_values(":dead", av_s(DEAD))
            .expression_attribute_values(":now", av_n(self.clock.now_ms()))
            .expression_attribute_values(":zero", av_n(0))
            .expression_attribute_values(":shard", av_s(shard_key(shard_of(id, self.cfg.shards))));
        Ok(condition_held(self.db.update(req).await)?)
    }

    /// Deletes a dead letter for good (operator action). Live items are never deleted here.
    pub async fn purge_dead(&self, id: &str) -> Result<bool, QueueError> {
        let req = self
            .db
            .client()
            .delete_item()
            .table_name(&self.table)
            .key(PK, av_s(id))
            .condition_expression("#state = :dead")
            .expression_attribute_names("#state", STATE)
            .expression_attribute_values(":dead", av_s(DEAD));
        Ok(condition_held(self.db.delete(req).await)?)
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
