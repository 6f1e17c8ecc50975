//! Table definitions and attribute names, written once.
//!
//! Why: `template.yaml`, `tickctl provision` and every test create tables from these definitions,
//! so local tables cannot drift from deployed ones. Attribute names are constants so that a typo
//! is a compile error, not a condition that silently never matches.
//!
//! ## The control table (`<prefix>-control`)
//! Key `pk` (S) + `sk` (S); TTL on `ttl` (epoch seconds). One table holds every coordination item:
//!
//! | item | `pk` | `sk` |
//! |---|---|---|
//! | lease (a job's) | `lease#<job>` | `lease` |
//! | lease (one shard of a shared run, [`crate::lease`]) | `lease#<job>#<zone>@<date>#<shard>` | `lease` |
//! | slot record | `slot#<job>` | `<slot>` |
//! | the job's state item: watermarks (`mark:<group>`), pause switch, registered groups, runs started (`run:<group>`), wake sets (`wake:<group>`), unit shard counts ([`crate::watermark`]) | `wm#<job>` | `wm` |
//! | idempotency record | `idem#<scope>` | `<key>` |
//! | checkpoint (a shard's cursor or `done`, [`crate::checkpoint`]) | `ckpt#<job>` | `<run>\|<shard>` |
//! | failure record (a unit isolated, [`crate::failures`]) | `fail#<job>` | `<run>#<unit>` |
//! | shard registry (every count ever written with, [`crate::shard`]) | `shards#<logical table>` | `shards` |
//! | the archiver's intent (a batch being archived; `archiver::intent`) | `intent#archiver` | `<shard>` |

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType,
    Projection as SdkProjection, ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};
use aws_sdk_dynamodb::Client;

use crate::capacity::{GsiShape, Projection};
use crate::error::DbError;
use crate::item::Item;

/// Partition key attribute of every tickwork table.
pub const PK: &str = "pk";
/// Sort key attribute of every tickwork table.
pub const SK: &str = "sk";
/// TTL attribute (epoch seconds) where records expire.
pub const TTL: &str = "ttl";

/// A key attribute's scalar type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarType {
    /// String.
    S,
    /// Number.
    N,
}

/// A key attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyAttr {
    /// Attribute name.
    pub name: &'static str,
    /// Scalar type.
    pub ty: ScalarType,
}

/// A string key attribute.
pub const fn s(name: &'static str) -> KeyAttr {
    KeyAttr { name, ty: ScalarType::S }
}
/// A number key attribute.
pub const fn n(name: &'static str) -> KeyAttr {
    KeyAttr { name, ty: ScalarType::N }
}

/// A global secondary index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GsiDef {
    /// Index name.
    pub name: &'static str,
    /// Index partition key.
    pub pk: KeyAttr,
    /// Index sort key.
    pub sk: Option<KeyAttr>,
    /// Projected attributes.
    pub projection: Projection,
}

/// A table, as both `template.yaml` and the local servers know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDef {
    /// Logical name (`control`, `queue`, ...); the physical name adds a prefix.
    pub logical: &'static str,
    /// Partition key.
    pub pk: KeyAttr,
    /// Sort key.
    pub sk: Option<KeyAttr>,
    /// GSIs.
    pub gsis: Vec<GsiDef>,
    /// TTL attribute, when records expire.
    pub ttl: Option<&'static str>,
    /// The stream's view type (`NEW_IMAGE`), where a function reads the table's stream for more
    /// than a signal: created locally too, so the tests read what the mapping would hand over.
    pub stream: Option<&'static str>,
}

impl TableDef {
    /// The GSI shapes the capacity estimator needs.
    pub fn gsi_shapes(&self) -> Vec<GsiShape> {
        let table_keys: Vec<String> =
            std::iter::once(self.pk.name).chain(self.sk.as_ref().map(|k| k.name)).map(str::to_string).collect();
        self.gsis
            .iter()
            .map(|g| GsiShape {
                name: g.name.to_string(),
                pk: g.pk.name.to_string(),
                sk: g.sk.as_ref().map(|k| k.name.to_string()),
                table_keys: table_keys.clone(),
                projection: g.projection.clone(),
            })
            .collect()
    }
}

/// The control table: leases, slots, watermarks, idempotency records, checkpoints.
pub fn control_table() -> TableDef {
    // The stream: writers' due records lower the sweep's `sched_next` (`schedules::lowering`).
    TableDef { logical: "control", pk: s(PK), sk: Some(s(SK)), gsis: vec![], ttl: Some(TTL), stream: Some("NEW_IMAGE") }
}

fn key_schema(pk: &KeyAttr, sk: Option<&KeyAttr>) -> Vec<KeySchemaElement> {
    let mut v = vec![KeySchemaElement::builder().attribute_name(pk.name).key_type(KeyType::Hash).build().expect("key")];
    if let Some(sk) = sk {
        v.push(KeySchemaElement::builder().attribute_name(sk.name).key_type(KeyType::Range).build().expect("key"));
    }
    v
}

fn attr_def(k: &KeyAttr) -> AttributeDefinition {
    let ty = match k.ty {
        ScalarType::S => ScalarAttributeType::S,
        ScalarType::N => ScalarAttributeType::N,
    };
    AttributeDefinition::builder().attribute_name(k.name).attribute_type(ty).build().expect("attr")
}

/// Creates `name` from `def` (on-demand billing, TTL when declared) and waits until it is active.
/// An existing table is left as it is.
pub async fn create_table(client: &Client, def: &TableDef, name: &str) -> Result<(), DbError> {
    let mut attrs: Vec<KeyAttr> = vec![def.pk.clone()];
    attrs.extend(def.sk.clone());
    for g in &def.gsis {
        attrs.push(g.pk.clone());
        attrs.extend(g.sk.clone());
    }
    let mut seen = std::collections::HashSet::new();
    attrs.retain(|a| seen.insert(a.name));
    let mut req = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .set_key_schema(Some(key_schema(&def.pk, def.sk.as_ref())))
        .set_attribute_definitions(Some(attrs.iter().map(attr_def).collect()));
    if let Some(view) = def.stream {
        req = req.stream_specification(
            aws_sdk_dynamodb::types::StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(view.into())
                .build()
                .expect("stream"),
        );
    }
    for g in &def.gsis {
        let projection = match &g.projection {
            Projection::All => SdkProjection::builder().projection_type(ProjectionType::All).build(),
            Projection::KeysOnly => SdkProjection::builder().projection_type(ProjectionType::KeysOnly).build(),
            Projection::Include(a) => SdkProjection::builder()
                .projection_type(ProjectionType::Include)
                .set_non_key_attributes(Some(a.clone()))
                .build(),
        };
        req = req.global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(g.name)
                .set_key_schema(Some(key_schema(&g.pk, g.sk.as_ref())))
                .projection(projection)
                .build()
                .expect("gsi"),
        );
    }
    match req.send().await {
        Ok(_) => {}
        Err(e) if aws_sdk_dynamodb::error::ProvideErrorMetadata::code(&e) == Some("ResourceInUseException") => {}
        Err(e) => return Err(DbError::from_sdk("CreateTable", name, e)),
    }
    for _ in 0..600 {
        let d = client
            .describe_table()
            .table_name(name)
            .send()
            .await
            .map_err(|e| DbError::from_sdk("DescribeTable", name, e))?;
        if d.table().and_then(|t| t.table_status()).map(|s| s.as_str() == "ACTIVE").unwrap_or(false) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if let Some(attr) = def.ttl {
        client
            .update_time_to_live()
            .table_name(name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder().attribute_name(attr).enabled(true).build().expect("ttl"),
            )
            .send()
            .await
            .map_err(|e| DbError::from_sdk("UpdateTimeToLive", name, e))?;
    }
    Ok(())
}

/// An expression with the attribute names and values it uses: built by pure functions (and unit
/// tested there), applied to a request or a transaction item by the caller.
pub type ExprParts = (String, Vec<(&'static str, &'static str)>, Vec<(&'static str, AttributeValue)>);

/// The condition of every "insert once" write: the item's `pk` is new (an idempotency key's first
/// use). With its name, for [`put_new_item`] and [`crate::Db::put_new`].
pub const NEW_ITEM: &str = "attribute_not_exists(#pk)";

/// A put of `item` into `table` only if its key is new, for a caller's transaction: the
/// transaction is cancelled (`ConditionalCheckFailed` at this item's index) if the key exists.
pub fn put_new_item(table: &str, item: Item) -> aws_sdk_dynamodb::types::TransactWriteItem {
    let put = aws_sdk_dynamodb::types::Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression(NEW_ITEM)
        .expression_attribute_names("#pk", PK)
        .build()
        .expect("put has table and item");
    aws_sdk_dynamodb::types::TransactWriteItem::builder().put(put).build()
}

/// A string attribute value.
pub fn av_s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}
/// A number attribute value.
pub fn av_n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}
/// A `pk`/`sk` key.
pub fn key(pk: impl Into<String>, sk: impl Into<String>) -> HashMap<String, AttributeValue> {
    HashMap::from([(PK.to_string(), av_s(pk)), (SK.to_string(), av_s(sk))])
}

/// Reads a string attribute.
pub fn get_s<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name).and_then(|v| v.as_s().ok()).map(String::as_str)
}
/// Reads a number attribute as i64.
pub fn get_i64(item: &Item, name: &str) -> Option<i64> {
    item.get(name).and_then(|v| v.as_n().ok()).and_then(|n| n.parse().ok())
}
/// Reads a number attribute as u64.
pub fn get_u64(item: &Item, name: &str) -> Option<u64> {
    item.get(name).and_then(|v| v.as_n().ok()).and_then(|n| n.parse().ok())
}
/// Reads a boolean attribute.
pub fn get_bool(item: &Item, name: &str) -> Option<bool> {
    item.get(name).and_then(|v| v.as_bool().ok()).copied()
}
