//! DynamoDB's request limits, checked before a request is sent.
//!
//! Why: the local server accepts requests DynamoDB refuses (an item past 400 KB, a transaction
//! touching one item twice, a 5 KB condition), so a defect of that kind passed every local test and
//! failed on AWS, as a `ValidationException` on the first large tenant. [`crate::db::Db`] checks
//! every request it is given against these rules and refuses it with [`LimitError`], naming the
//! rule, so that a local run fails exactly where AWS would. The rules, from the DynamoDB Developer
//! Guide, "Constraints in Amazon DynamoDB", and the API reference:
//!
//! - an item is at most 400 KB ([`MAX_ITEM_BYTES`], item sizes counted as
//!   [`crate::capacity::item_size`] counts them: names and values);
//! - a partition key value is 1 to 2,048 bytes, a sort key value 1 to 1,024 ([`MAX_PK_BYTES`],
//!   [`MAX_SK_BYTES`]);
//! - an expression string is at most 4 KB ([`MAX_EXPRESSION_BYTES`]);
//! - TransactWriteItems groups up to 100 actions, "no two actions can target the same item", and
//!   "the aggregate size of the items in the transaction cannot exceed 4 MB"
//!   ([`MAX_TRANSACTION_BYTES`]; TransactWriteItems, API reference);
//! - BatchWriteItem takes up to 25 requests, up to 16 MB, and no key twice.
//!
//! What is not checked, and why: an update's resulting size (the stored item is not known before
//! the write), and the IAM authorisation of each request (the recorded calls are held against the
//! template's policies instead: [`crate::iam`]).

use std::collections::HashSet;

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, WriteRequest};

use crate::capacity::{item_size, value_size};
use crate::item::Item;

/// The key attributes of every table (`crate::schema::PK` and `SK`, named here so that this
/// module stays a leaf: errors depend on it).
const PK: &str = "pk";
const SK: &str = "sk";

/// Largest item.
pub const MAX_ITEM_BYTES: usize = 400 * 1024;
/// Longest partition key value.
pub const MAX_PK_BYTES: usize = 2048;
/// Longest sort key value.
pub const MAX_SK_BYTES: usize = 1024;
/// Longest expression string.
pub const MAX_EXPRESSION_BYTES: usize = 4 * 1024;
/// Actions in one TransactWriteItems.
pub const MAX_TRANSACTION_ITEMS: usize = 100;
/// Aggregate size of a transaction's items.
pub const MAX_TRANSACTION_BYTES: usize = 4 * 1024 * 1024;
/// Requests in one BatchWriteItem.
pub const MAX_BATCH_WRITE: usize = 25;
/// Aggregate size of a BatchWriteItem.
pub const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024;

/// A request DynamoDB would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("DynamoDB would refuse this {op} on `{table}`: {rule}")]
pub struct LimitError {
    /// The operation.
    pub op: &'static str,
    /// The table.
    pub table: String,
    /// The rule broken, with the figures.
    pub rule: String,
}

fn refuse(op: &'static str, table: &str, rule: String) -> LimitError {
    LimitError { op, table: table.to_string(), rule }
}

/// An item to write: its size and its key values (`pk`, `sk` when present).
pub fn item(op: &'static str, table: &str, item: &Item) -> Result<(), LimitError> {
    let size = item_size(item);
    if size > MAX_ITEM_BYTES {
        return Err(refuse(op, table, format!("the item is {size} bytes; an item is at most {MAX_ITEM_BYTES}")));
    }
    key(op, table, item)
}

/// A key: its values' lengths.
pub fn key(op: &'static str, table: &str, key: &Item) -> Result<(), LimitError> {
    for (name, max) in [(PK, MAX_PK_BYTES), (SK, MAX_SK_BYTES)] {
        if let Some(v) = key.get(name) {
            let n = value_size(v);
            if n == 0 || n > max {
                return Err(refuse(op, table, format!("key `{name}` is {n} bytes; it must be 1 to {max}")));
            }
        }
    }
    Ok(())
}

/// An expression string (`what`: condition, update, key condition, ...).
pub fn expression(op: &'static str, table: &str, what: &str, expr: Option<&str>) -> Result<(), LimitError> {
    match expr {
        Some(e) if e.len() > MAX_EXPRESSION_BYTES => Err(refuse(
            op,
            table,
            format!("its {what} expression is {} bytes; an expression is at most {MAX_EXPRESSION_BYTES}", e.len()),
        )),
        _ => Ok(()),
    }
}

/// What a transaction action acts on.
struct Target<'a> {
    table: String,
    key: Item,
    /// The bytes it adds to the transaction.
    size: usize,
    /// Its expressions, by what they are.
    exprs: Vec<(&'static str, Option<&'a str>)>,
}

fn target(t: &TransactWriteItem) -> Option<Target<'_>> {
    if let Some(p) = t.put() {
        let key: Item = p.item().iter().filter(|(k, _)| is_key(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
        let exprs = vec![("condition", p.condition_expression())];
        return Some(Target { table: p.table_name().to_string(), key, size: item_size(p.item()), exprs });
    }
    if let Some(u) = t.update() {
        let exprs = vec![("update", Some(u.update_expression())), ("condition", u.condition_expression())];
        return Some(Target {
            table: u.table_name().to_string(),
            key: u.key().clone(),
            size: item_size(u.key()),
            exprs,
        });
    }
    if let Some(d) = t.delete() {
        let exprs = vec![("condition", d.condition_expression())];
        return Some(Target {
            table: d.table_name().to_string(),
            key: d.key().clone(),
            size: item_size(d.key()),
            exprs,
        });
    }
    let c = t.condition_check()?;
    let exprs = vec![("condition", Some(c.condition_expression()))];
    Some(Target { table: c.table_name().to_string(), key: c.key().clone(), size: item_size(c.key()), exprs })
}

fn is_key(name: &str) -> bool {
    name == PK || name == SK
}

fn key_text(table: &str, key: &Item) -> String {
    let mut parts: Vec<String> = key
        .iter()
        .map(|(k, v)| {
            let v = match v {
                AttributeValue::S(s) => s.clone(),
                other => format!("{other:?}"),
            };
            format!("{k}={v}")
        })
        .collect();
    parts.sort();
    format!("{table}/{}", parts.join(","))
}

/// A TransactWriteItems: 1 to 100 actions, no item twice, 4 MB in all, and each action's item,
/// key and expressions within their own limits.
pub fn transaction(items: &[TransactWriteItem]) -> Result<(), LimitError> {
    let first = items.iter().find_map(|t| target(t).map(|x| x.table)).unwrap_or_default();
    if items.is_empty() || items.len() > MAX_TRANSACTION_ITEMS {
        return Err(refuse(
            "TransactWriteItems",
            &first,
            format!("{} actions; a transaction holds 1 to {MAX_TRANSACTION_ITEMS}", items.len()),
        ));
    }
    let (mut seen, mut bytes) = (HashSet::new(), 0usize);
    for t in items {
        let Some(Target { table, key, size, exprs }) = target(t) else { continue };
        if let Some(p) = t.put() {
            item("TransactWriteItems", &table, p.item())?;
        } else {
            self::key("TransactWriteItems", &table, &key)?;
        }
        for (what, e) in exprs {
            expression("TransactWriteItems", &table, what, e)?;
        }
        if !seen.insert(key_text(&table, &key)) {
            return Err(refuse(
                "TransactWriteItems",
                &table,
                format!("two actions on the item {}; no two actions can target the same item", key_text(&table, &key)),
            ));
        }
        bytes += size;
    }
    if bytes > MAX_TRANSACTION_BYTES {
        return Err(refuse(
            "TransactWriteItems",
            &first,
            format!("its items are {bytes} bytes; a transaction's are at most {MAX_TRANSACTION_BYTES}"),
        ));
    }
    Ok(())
}

/// A BatchWriteItem on one table: 1 to 25 requests, no key twice, 16 MB in all, each item within
/// its limits.
pub fn batch_write(table: &str, requests: &[WriteRequest]) -> Result<(), LimitError> {
    if requests.len() > MAX_BATCH_WRITE {
        return Err(refuse(
            "BatchWriteItem",
            table,
            format!("{} requests; a batch holds at most {MAX_BATCH_WRITE}", requests.len()),
        ));
    }
    let (mut seen, mut bytes) = (HashSet::new(), 0usize);
    for r in requests {
        let key: Item = match (r.put_request(), r.delete_request()) {
            (Some(p), _) => {
                item("BatchWriteItem", table, p.item())?;
                bytes += item_size(p.item());
                p.item().iter().filter(|(k, _)| is_key(k)).map(|(k, v)| (k.clone(), v.clone())).collect()
            }
            (None, Some(d)) => {
                self::key("BatchWriteItem", table, d.key())?;
                bytes += item_size(d.key());
                d.key().clone()
            }
            (None, None) => continue,
        };
        if !seen.insert(key_text(table, &key)) {
            return Err(refuse(
                "BatchWriteItem",
                table,
                format!("the key {} twice in one batch", key_text(table, &key)),
            ));
        }
    }
    if bytes > MAX_BATCH_BYTES {
        return Err(refuse("BatchWriteItem", table, format!("{bytes} bytes; a batch is at most {MAX_BATCH_BYTES}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{av_s, key as pk_sk};
    use aws_sdk_dynamodb::types::{ConditionCheck, Put, PutRequest, Update};

    fn put(table: &str, item: Item) -> TransactWriteItem {
        TransactWriteItem::builder().put(Put::builder().table_name(table).set_item(Some(item)).build().unwrap()).build()
    }

    fn update(table: &str, pk: &str, expr: &str) -> TransactWriteItem {
        let u =
            Update::builder().table_name(table).set_key(Some(pk_sk(pk, "s"))).update_expression(expr).build().unwrap();
        TransactWriteItem::builder().update(u).build()
    }

    #[test]
    fn the_key_names_are_the_schemas() {
        assert_eq!((PK, SK), (crate::schema::PK, crate::schema::SK));
    }

    #[test]
    fn an_item_past_400_kb_or_a_key_past_its_length_is_refused() {
        let mut big = pk_sk("a", "b");
        big.insert("blob".into(), av_s("x".repeat(MAX_ITEM_BYTES)));
        let e = item("PutItem", "t", &big).unwrap_err();
        assert!(e.rule.contains("at most 409600"), "{e}");
        assert!(item("PutItem", "t", &pk_sk("a", "b")).is_ok());
        let e = key("GetItem", "t", &pk_sk("k".repeat(MAX_PK_BYTES + 1), "b")).unwrap_err();
        assert!(e.rule.contains("`pk`"), "{e}");
        assert!(key("GetItem", "t", &pk_sk("k", "s".repeat(MAX_SK_BYTES + 1))).is_err());
        assert!(key("GetItem", "t", &pk_sk("", "s")).is_err(), "an empty key");
    }

    #[test]
    fn a_transaction_touching_one_item_twice_or_past_4_mb_is_refused() {
        let same = [update("t", "a", "SET x = :x"), update("t", "a", "SET y = :y")];
        let e = transaction(&same).unwrap_err();
        assert!(e.rule.contains("same item"), "{e}");
        let cc = ConditionCheck::builder()
            .table_name("t")
            .set_key(Some(pk_sk("a", "s")))
            .condition_expression("attribute_exists(pk)")
            .build()
            .unwrap();
        let e =
            transaction(&[update("t", "a", "SET x = :x"), TransactWriteItem::builder().condition_check(cc).build()])
                .unwrap_err();
        assert!(e.rule.contains("same item"), "a condition check and an update of one item: {e}");
        assert!(transaction(&[update("t", "a", "SET x = :x"), update("u", "a", "SET x = :x")]).is_ok(), "two tables");
        let fat = |i: usize| {
            let mut it = pk_sk(format!("k{i}"), "s");
            it.insert("blob".into(), av_s("x".repeat(390 * 1024)));
            put("t", it)
        };
        let e = transaction(&(0..11).map(fat).collect::<Vec<_>>()).unwrap_err();
        assert!(e.rule.contains("4194304"), "{e}");
        assert!(transaction(&(0..10).map(fat).collect::<Vec<_>>()).is_ok());
        assert!(transaction(&[]).is_err());
        let many: Vec<_> = (0..101).map(|i| update("t", &format!("k{i}"), "SET x = :x")).collect();
        assert!(transaction(&many).unwrap_err().rule.contains("1 to 100"));
    }

    #[test]
    fn an_expression_past_4_kb_is_refused() {
        let long = format!("SET {}", (0..700).map(|i| format!("a{i} = :v")).collect::<Vec<_>>().join(", "));
        assert!(long.len() > MAX_EXPRESSION_BYTES);
        let e = transaction(&[update("t", "a", &long)]).unwrap_err();
        assert!(e.rule.contains("update expression"), "{e}");
        assert!(expression("Query", "t", "key condition", Some("pk = :p")).is_ok());
    }

    #[test]
    fn a_batch_with_a_key_twice_is_refused() {
        let req = |pk: &str| {
            WriteRequest::builder()
                .put_request(PutRequest::builder().set_item(Some(pk_sk(pk, "s"))).build().unwrap())
                .build()
        };
        let e = batch_write("t", &[req("a"), req("b"), req("a")]).unwrap_err();
        assert!(e.rule.contains("twice"), "{e}");
        assert!(batch_write("t", &[req("a"), req("b")]).is_ok());
        assert!(batch_write("t", &(0..26).map(|i| req(&format!("k{i}"))).collect::<Vec<_>>()).is_err());
    }
}
