//! The change feed: one row per tracked write, indexed for archiving by `(shard, ts#id)`.
//!
//! Why (`000_*`, job three): an archiver asked every shard for its oldest batch and filtered by date
//! in code, billing every row read and archiving nothing. Here the sort key of the `by_shard` index
//! begins with the timestamp, so "older than the cutoff" is the **key condition**
//! `shard = :s AND tsid < :cutoff`: an empty sweep matches nothing; a sweep with N due rows bills N.
//!
//! ## Table (`<prefix>-changes`)
//! Key `pk` = `<entity>#<id>`; `shard` = `changes#<k>` (k = FNV-1a(pk) mod N: writes spread over N
//! index partitions rather than one hot one); `tsid` = 13-digit ms timestamp + `#` + pk (sorts by
//! time, unique); `entity`, `data` (JSON text), `ts` (N). GSI `by_shard` (`shard`, `tsid`) projects
//! everything, so the archiver reads each due row once, from the index.

use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use serde_json::{Map, Value};

use crate::capacity::Projection;
use crate::clock::Millis;
use crate::db::Db;
use crate::error::DbError;
use crate::item::Item;
use crate::schema::{av_n, av_s, s, GsiDef, TableDef, PK};
use crate::shard::shard_of;

/// Attribute: index partition.
pub const SHARD: &str = "shard";
/// Attribute: index sort key (`<ts, 13 digits>#<pk>`).
pub const TSID: &str = "tsid";
/// The archive index.
pub const BY_SHARD: &str = "by_shard";

/// The change-feed table definition.
pub fn changes_table() -> TableDef {
    TableDef {
        logical: "changes",
        pk: s(PK),
        sk: None,
        gsis: vec![GsiDef { name: BY_SHARD, pk: s(SHARD), sk: Some(s(TSID)), projection: Projection::All }],
        ttl: None,
        stream: None,
    }
}

/// The index partition of shard `k`.
pub fn shard_key(k: u32) -> String {
    format!("changes#{k}")
}

/// The sort-key bound for "written before `cutoff_ms`".
pub fn cutoff_key(cutoff_ms: Millis) -> String {
    format!("{:013}", cutoff_ms.max(0))
}

/// The row for one change (what [`record_change`] writes; bulk loaders batch it).
pub fn change_item(shards: u32, entity: &str, id: &str, data: &Value, ts_ms: Millis) -> Item {
    let pk = format!("{entity}#{id}");
    let k = shard_of(&pk, shards);
    Item::from([
        (TSID.to_string(), av_s(format!("{}#{pk}", cutoff_key(ts_ms)))),
        (PK.to_string(), av_s(pk)),
        (SHARD.to_string(), av_s(shard_key(k))),
        ("entity".to_string(), av_s(entity)),
        ("data".to_string(), av_s(data.to_string())),
        ("ts".to_string(), av_n(ts_ms)),
    ])
}

/// Records one change (the writer side applications call). Returns the row's key.
pub async fn record_change(
    db: &Db,
    table: &str,
    shards: u32,
    entity: &str,
    id: &str,
    data: &Value,
    ts_ms: Millis,
) -> Result<String, DbError> {
    let item = change_item(shards, entity, id, data, ts_ms);
    let pk = crate::schema::get_s(&item, PK).unwrap_or_default().to_string();
    db.put(db.client().put_item().table_name(table).set_item(Some(item))).await?;
    Ok(pk)
}

/// An item in DynamoDB's JSON form (`{"attr": {"S": "..."}}`), as DynamoDB's S3 export writes it:
/// lossless, and readable by Athena and by [`from_ddb_json`].
pub fn to_ddb_json(item: &Item) -> Value {
    let mut m = Map::new();
    let mut keys: Vec<&String> = item.keys().collect();
    keys.sort();
    for k in keys {
        m.insert(k.clone(), av_json(&item[k]));
    }
    Value::Object(m)
}

fn av_json(v: &AttributeValue) -> Value {
    let b64 = |b: &[u8]| Value::String(base64::engine::general_purpose::STANDARD.encode(b));
    match v {
        AttributeValue::S(s) => serde_json::json!({ "S": s }),
        AttributeValue::N(n) => serde_json::json!({ "N": n }),
        AttributeValue::Bool(b) => serde_json::json!({ "BOOL": b }),
        AttributeValue::Null(_) => serde_json::json!({ "NULL": true }),
        AttributeValue::B(b) => serde_json::json!({ "B": b64(b.as_ref()) }),
        AttributeValue::Ss(v) => serde_json::json!({ "SS": v }),
        AttributeValue::Ns(v) => serde_json::json!({ "NS": v }),
        AttributeValue::Bs(v) => serde_json::json!({ "BS": v.iter().map(|b| b64(b.as_ref())).collect::<Vec<_>>() }),
        AttributeValue::L(v) => serde_json::json!({ "L": v.iter().map(av_json).collect::<Vec<_>>() }),
        AttributeValue::M(m) => {
            let inner: Map<String, Value> = m.iter().map(|(k, v)| (k.clone(), av_json(v))).collect();
            serde_json::json!({ "M": inner })
        }
        _ => Value::Null,
    }
}

/// Parses an item written by [`to_ddb_json`]; says what is wrong with a malformed one.
pub fn from_ddb_json(v: &Value) -> Result<Item, String> {
    let obj = v.as_object().ok_or("an item must be a JSON object")?;
    obj.iter().map(|(k, v)| Ok((k.clone(), json_av(v).map_err(|e| format!("`{k}`: {e}"))?))).collect()
}

fn json_av(v: &Value) -> Result<AttributeValue, String> {
    let obj = v.as_object().filter(|o| o.len() == 1).ok_or("a value must be an object with one type key")?;
    let (t, x) = obj.iter().next().expect("one entry");
    let str_of = |x: &Value| x.as_str().map(str::to_string).ok_or_else(|| format!("{t} needs a string"));
    let list_of = |x: &Value| x.as_array().cloned().ok_or_else(|| format!("{t} needs an array"));
    let unb64 = |s: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map(aws_sdk_dynamodb::primitives::Blob::new)
            .map_err(|e| e.to_string())
    };
    Ok(match t.as_str() {
        "S" => AttributeValue::S(str_of(x)?),
        "N" => AttributeValue::N(str_of(x)?),
        "BOOL" => AttributeValue::Bool(x.as_bool().ok_or("BOOL needs a boolean")?),
        "NULL" => AttributeValue::Null(true),
        "B" => AttributeValue::B(unb64(&str_of(x)?)?),
        "SS" => AttributeValue::Ss(list_of(x)?.iter().map(str_of).collect::<Result<_, _>>()?),
        "NS" => AttributeValue::Ns(list_of(x)?.iter().map(str_of).collect::<Result<_, _>>()?),
        "BS" => AttributeValue::Bs(list_of(x)?.iter().map(|e| unb64(&str_of(e)?)).collect::<Result<_, _>>()?),
        "L" => AttributeValue::L(list_of(x)?.iter().map(json_av).collect::<Result<_, _>>()?),
        "M" => AttributeValue::M(from_ddb_json(x)?),
        other => return Err(format!("unknown type `{other}`")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutoff_keys_order_rows_by_time() {
        let row = |ts: i64| format!("{}#ent#1", cutoff_key(ts));
        assert!(row(1_700_000_000_000) < cutoff_key(1_700_000_000_001));
        assert!(row(1_700_000_000_001) > cutoff_key(1_700_000_000_001), "a row at the cutoff is not due");
        assert!(row(999_999_999_999) < cutoff_key(1_000_000_000_000), "zero padding keeps order across digit counts");
    }

    #[test]
    fn ddb_json_round_trips() {
        let item = Item::from([
            ("s".into(), AttributeValue::S("x".into())),
            ("n".into(), AttributeValue::N("1.5".into())),
            ("b".into(), AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(vec![0, 255]))),
            ("l".into(), AttributeValue::L(vec![AttributeValue::Bool(true), AttributeValue::Null(true)])),
            ("m".into(), AttributeValue::M(Item::from([("k".into(), AttributeValue::Ss(vec!["a".into()]))]))),
        ]);
        let j = to_ddb_json(&item);
        assert_eq!(from_ddb_json(&j).unwrap(), item);
        assert!(from_ddb_json(&serde_json::json!({"x": {"Q": 1}})).unwrap_err().contains("unknown type"));
    }
}
