//! A tenant's cursors: the last period pulsed, per grain.
//!
//! Why (`000_*`): the sweep read 7 cursors per tenant per tick, one GetItem each, for values that
//! move once a day. All of a tenant's cursors live in one partition of the control table, so one
//! Query reads them all, and only on a tick where the tenant's zone crossed a boundary.
//!
//! Items (control table): `pk = cursor#<tenant>`, `sk = <grain>` (`day`, `week`, ...),
//! `period` = the last period pulsed (`2026-11-29`, `2026-W48`, ...). A cursor only moves forward
//! (`attribute_not_exists(period) OR period < :new`), in the same transaction as the pulses it
//! covers.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{TransactWriteItem, Update};
use tickwork::calendar::{CalendarError, Grain, Period};
use tickwork::schema::{av_s, get_s, key, PK, SK};
use tickwork::{Db, DbError};

/// Attribute of a cursor item holding the last pulsed period.
pub const PERIOD: &str = "period";

/// The cursor partition of a tenant (one item per grain, sort key = grain name).
pub fn cursor_pk(tenant: &str) -> String {
    format!("cursor#{tenant}")
}

/// Why a tenant's cursors cannot be read: its partition, not the table, is at fault.
#[derive(Debug, thiserror::Error)]
pub enum CursorReadError {
    /// DynamoDB.
    #[error(transparent)]
    Db(#[from] DbError),
    /// A cursor item that does not parse.
    #[error("cursor of tenant `{tenant}`: {source}")]
    Corrupt {
        /// The tenant.
        tenant: String,
        /// What is wrong.
        #[source]
        source: CalendarError,
    },
    /// More than one page in a partition that holds at most 7 small items.
    #[error("cursor partition of `{0}` has more than one page: it holds something else")]
    Overfull(String),
}

/// All of a tenant's cursors, with one strongly consistent Query on its cursor partition.
pub async fn read_cursors(db: &Db, control: &str, tenant: &str) -> Result<BTreeMap<Grain, String>, CursorReadError> {
    let q = db
        .client()
        .query()
        .table_name(control)
        .key_condition_expression("#pk = :pk")
        .expression_attribute_names("#pk", PK)
        .expression_attribute_values(":pk", av_s(cursor_pk(tenant)))
        .consistent_read(true);
    let out = db.query(q).await?;
    if out.last_evaluated_key().is_some_and(|k| !k.is_empty()) {
        return Err(CursorReadError::Overfull(tenant.to_string()));
    }
    let mut m = BTreeMap::new();
    for item in out.items() {
        let corrupt = |source| CursorReadError::Corrupt { tenant: tenant.to_string(), source };
        let grain: Grain = get_s(item, SK).unwrap_or_default().parse().map_err(corrupt)?;
        if let Some(p) = get_s(item, PERIOD) {
            Period::parse(grain, p).map_err(corrupt)?;
            m.insert(grain, p.to_string());
        }
    }
    Ok(m)
}

/// The cursor move for one grain, for the tenant's pulse transaction: forward only.
pub fn cursor_advance(table: &str, tenant: &str, grain: Grain, to: &Period) -> TransactWriteItem {
    let update = Update::builder()
        .table_name(table)
        .set_key(Some(key(cursor_pk(tenant), grain.name())))
        .update_expression("SET #p = :p")
        .condition_expression("attribute_not_exists(#p) OR #p < :p")
        .expression_attribute_names("#p", PERIOD)
        .expression_attribute_values(":p", av_s(to.id()))
        .build()
        .expect("update has table, key and expression");
    TransactWriteItem::builder().update(update).build()
}
