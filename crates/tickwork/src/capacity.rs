//! DynamoDB's capacity rules as pure functions.
//!
//! Why: the local server (moto) reports placeholder `ConsumedCapacity`, yet every cost claim this
//! project makes ("1 read per idle tick", "an empty sweep bills 0 items") must be checkable locally.
//! These functions apply DynamoDB's documented sizing rules so the meter can estimate what AWS would
//! bill. On AWS itself the meter prefers the server's figure.
//!
//! Rules implemented (DynamoDB developer guide, "Item sizes and formats" and "Read/write capacity"):
//! - Item size = Σ (UTF-8 length of attribute name + value size). Strings: UTF-8 bytes; binary:
//!   bytes; numbers: 1 byte per two significant digits + 1 (+1 for negatives, see [`number_size`]);
//!   null and booleans: 1; lists and maps: 3 bytes + 1 per element + the elements (map keys count);
//!   sets: the sum of their elements.
//! - Reads: one unit per 4 KB, rounded up, at least one unit; eventually consistent reads are half.
//!   A Query rounds the *sum* of the matched items once; a BatchGetItem rounds each item.
//! - Writes: one unit per 1 KB, rounded up, at least one; an overwrite costs the larger of the old
//!   and new item; each GSI the item is projected into costs its index entry's size again (two
//!   writes when the index key changes: a delete and a put).
//! - Transactions: twice the units of the same non-transactional operation.

use aws_sdk_dynamodb::types::AttributeValue;

pub use crate::item::Item;

/// Read consistency, which halves or keeps the read cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consistency {
    /// Eventually consistent: half a unit per 4 KB.
    Eventual,
    /// Strongly consistent: one unit per 4 KB.
    Strong,
}

impl Consistency {
    /// Maps the SDK's optional `ConsistentRead` flag (absent means eventual).
    pub fn from_flag(flag: Option<bool>) -> Self {
        if flag == Some(true) {
            Consistency::Strong
        } else {
            Consistency::Eventual
        }
    }
}

const READ_UNIT: usize = 4096;
const WRITE_UNIT: usize = 1024;

/// Size in bytes of a whole item, the input to every capacity rule.
pub fn item_size(item: &Item) -> usize {
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

/// Size in bytes of one attribute value (without its name).
pub fn value_size(v: &AttributeValue) -> usize {
    match v {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => number_size(n),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::Ss(v) => v.iter().map(String::len).sum(),
        AttributeValue::Ns(v) => v.iter().map(|n| number_size(n)).sum(),
        AttributeValue::Bs(v) => v.iter().map(|b| b.as_ref().len()).sum(),
        AttributeValue::L(v) => 3 + v.iter().map(|e| 1 + value_size(e)).sum::<usize>(),
        AttributeValue::M(m) => 3 + m.iter().map(|(k, e)| 1 + k.len() + value_size(e)).sum::<usize>(),
        _ => 0,
    }
}

/// Size of a number as DynamoDB stores it: base-100 digits of the significand plus an exponent byte.
///
/// This is the exact encoding (two significant digits per byte, padded when the exponent's
/// parity forces a leading zero, a terminator byte for negatives), which the guide approximates as
/// "1 byte per two significant digits + 1". A string that is not a number counts its length.
pub fn number_size(n: &str) -> usize {
    let s = n.trim();
    let (neg, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (mantissa, exp_part) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], body[i + 1..].parse::<i64>().unwrap_or(0)),
        None => (body, 0),
    };
    let (int_part, frac_part) = match mantissa.find('.') {
        Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
        None => (mantissa, ""),
    };
    if !int_part.chars().chain(frac_part.chars()).all(|c| c.is_ascii_digit()) {
        return s.len();
    }
    let all: String = format!("{int_part}{frac_part}");
    let lead = all.len() - all.trim_start_matches('0').len();
    let digits = all.trim_start_matches('0').trim_end_matches('0');
    if digits.is_empty() {
        return 1;
    }
    // Exponent of the first significant digit in scientific notation.
    let e = int_part.len() as i64 - 1 - lead as i64 + exp_part;
    let n_digits = digits.len();
    let pad = if n_digits % 2 == 0 && e % 2 == 0 { 1 } else { 0 };
    1 + n_digits.div_ceil(2) + pad + usize::from(neg)
}

fn units(bytes: usize, unit: usize) -> f64 {
    bytes.max(1).div_ceil(unit) as f64
}

/// Read units for one item read (GetItem, or one item of a BatchGetItem); `None` = not found.
pub fn read_units(size: Option<usize>, c: Consistency) -> f64 {
    let u = units(size.unwrap_or(0), READ_UNIT);
    match c {
        Consistency::Strong => u,
        Consistency::Eventual => u / 2.0,
    }
}

/// Read units for a Query: the matched items' sizes are summed, then rounded once. An empty
/// Query still bills one unit (0.5 when eventually consistent).
pub fn query_units(sizes: impl IntoIterator<Item = usize>, c: Consistency) -> f64 {
    let total: usize = sizes.into_iter().sum();
    read_units(Some(total), c)
}

/// Write units for a single-item write: the larger of the old and new item, at least one unit.
pub fn write_units(old: Option<usize>, new: Option<usize>) -> f64 {
    units(old.unwrap_or(0).max(new.unwrap_or(0)), WRITE_UNIT)
}

/// Transactions cost twice what the same operations cost outside one.
pub fn transactional(units: f64) -> f64 {
    2.0 * units
}

/// What a GSI copies from the base item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Projection {
    /// Every attribute.
    All,
    /// Index and table keys only.
    KeysOnly,
    /// Keys plus these attributes.
    Include(Vec<String>),
}

/// The shape of a GSI, enough to size its entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GsiShape {
    /// Index name.
    pub name: String,
    /// Index partition key attribute.
    pub pk: String,
    /// Index sort key attribute, if any.
    pub sk: Option<String>,
    /// Table key attributes (always projected).
    pub table_keys: Vec<String>,
    /// Projection type.
    pub projection: Projection,
}

impl GsiShape {
    /// The index entry an item produces, or `None` when the item lacks an index key (sparse index).
    pub fn entry(&self, item: &Item) -> Option<Item> {
        if !item.contains_key(&self.pk) || self.sk.as_ref().is_some_and(|sk| !item.contains_key(sk)) {
            return None;
        }
        let keep = |k: &str| -> bool {
            k == self.pk
                || self.sk.as_deref() == Some(k)
                || self.table_keys.iter().any(|t| t == k)
                || match &self.projection {
                    Projection::All => true,
                    Projection::KeysOnly => false,
                    Projection::Include(v) => v.iter().any(|a| a == k),
                }
        };
        Some(item.iter().filter(|(k, _)| keep(k)).map(|(k, v)| (k.clone(), v.clone())).collect())
    }

    /// Does this attribute name form part of the index key?
    pub fn is_key(&self, attr: &str) -> bool {
        self.pk == attr || self.sk.as_deref() == Some(attr)
    }

    /// Units this index bills for a write that turns `old` into `new` (either may be absent).
    pub fn write_units(&self, old: Option<&Item>, new: Option<&Item>) -> f64 {
        let o = old.and_then(|i| self.entry(i));
        let n = new.and_then(|i| self.entry(i));
        match (o, n) {
            (None, None) => 0.0,
            (None, Some(n)) => write_units(None, Some(item_size(&n))),
            (Some(o), None) => write_units(Some(item_size(&o)), None),
            (Some(o), Some(n)) if o == n => 0.0,
            (Some(o), Some(n)) => {
                let key_changed =
                    o.get(&self.pk) != n.get(&self.pk) || self.sk.as_ref().is_some_and(|sk| o.get(sk) != n.get(sk));
                if key_changed {
                    write_units(Some(item_size(&o)), None) + write_units(None, Some(item_size(&n)))
                } else {
                    write_units(Some(item_size(&o)), Some(item_size(&n)))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::primitives::Blob;

    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.to_string())
    }
    fn n(v: &str) -> AttributeValue {
        AttributeValue::N(v.to_string())
    }
    /// An item of exactly `size` bytes: `pk` (2) + "x" (1) + payload `p` (1) + padding.
    fn sized(size: usize) -> Item {
        assert!(size >= 5);
        Item::from([("pk".into(), s("x")), ("p".into(), s(&"a".repeat(size - 4)))])
    }

    #[test]
    fn scalar_sizes_follow_the_guide() {
        assert_eq!(value_size(&s("hello")), 5);
        assert_eq!(value_size(&s("é")), 2, "strings count UTF-8 bytes");
        assert_eq!(value_size(&AttributeValue::B(Blob::new(vec![0; 7]))), 7);
        assert_eq!(value_size(&AttributeValue::Bool(true)), 1);
        assert_eq!(value_size(&AttributeValue::Null(true)), 1);
        assert_eq!(item_size(&Item::from([("name".into(), s("abc"))])), 7);
    }

    #[test]
    fn number_sizes() {
        // (number, bytes): significand digits in pairs, +1 exponent byte, +1 for negatives.
        for (num, want) in [
            ("0", 1),
            ("1", 2),
            ("12", 2),
            ("123", 3),
            ("1234", 3),
            ("100", 2),
            ("10", 2),
            ("-1", 3),
            ("1.5", 3), // even digit count at an even exponent: padded
            ("0.001", 2),
            ("1700000000000", 3),
            ("1700000000123", 8),
            ("12345678901234567890123456789012345678", 20),
        ] {
            assert_eq!(number_size(num), want, "{num}");
        }
    }

    #[test]
    fn lists_maps_and_sets() {
        let l = AttributeValue::L(vec![s("ab"), n("1")]);
        assert_eq!(value_size(&l), 3 + (1 + 2) + (1 + 2));
        let m = AttributeValue::M(std::collections::HashMap::from([("k".to_string(), s("v"))]));
        assert_eq!(value_size(&m), 3 + 1 + 1 + 1);
        assert_eq!(value_size(&AttributeValue::Ss(vec!["ab".into(), "c".into()])), 3);
    }

    #[test]
    fn read_rules() {
        use Consistency::*;
        let table = [
            // (item bytes, consistency, units)
            (None, Strong, 1.0),
            (None, Eventual, 0.5),
            (Some(100), Strong, 1.0),
            (Some(100), Eventual, 0.5),
            (Some(4096), Strong, 1.0),
            (Some(4097), Strong, 2.0),
            (Some(4097), Eventual, 1.0),
            (Some(40 * 1024), Strong, 10.0),
            (Some(40 * 1024), Eventual, 5.0),
        ];
        for (size, c, want) in table {
            assert_eq!(read_units(size, c), want, "{size:?} {c:?}");
        }
    }

    #[test]
    fn query_rounds_the_sum_once() {
        // 10 items of 1 KB: 10 KB -> 3 units strong, 1.5 eventual (not 10 x 1).
        assert_eq!(query_units([1024; 10], Consistency::Strong), 3.0);
        assert_eq!(query_units([1024; 10], Consistency::Eventual), 1.5);
        // An empty Query bills the minimum.
        assert_eq!(query_units([], Consistency::Eventual), 0.5);
        assert_eq!(query_units([], Consistency::Strong), 1.0);
    }

    #[test]
    fn write_rules() {
        let table = [
            (None, Some(100), 1.0),
            (None, Some(1024), 1.0),
            (None, Some(1025), 2.0),
            (Some(3000), Some(100), 3.0), // overwrite: the larger of old and new
            (Some(100), Some(2500), 3.0),
            (Some(40 * 1024), None, 40.0), // delete bills the deleted item
            (None, None, 1.0),             // delete of a missing item: the minimum
        ];
        for (old, new, want) in table {
            assert_eq!(write_units(old, new), want, "{old:?} -> {new:?}");
        }
        assert_eq!(transactional(write_units(None, Some(1500))), 4.0);
        assert_eq!(transactional(read_units(Some(100), Consistency::Strong)), 2.0);
        assert_eq!(item_size(&sized(1500)), 1500);
    }

    fn gsi(projection: Projection) -> GsiShape {
        GsiShape {
            name: "by_shard".into(),
            pk: "shard".into(),
            sk: Some("vis".into()),
            table_keys: vec!["pk".into()],
            projection,
        }
    }

    #[test]
    fn gsi_projection_and_sparse_items() {
        let mut item = sized(3000);
        assert_eq!(gsi(Projection::All).write_units(None, Some(&item)), 0.0, "sparse: no index key, no index write");
        item.insert("shard".into(), s("q#1"));
        item.insert("vis".into(), n("5"));
        // All: the full item (3000 + 6 + 5 bytes) -> 3 units; KeysOnly: a few bytes -> 1.
        assert_eq!(gsi(Projection::All).write_units(None, Some(&item)), 3.0);
        assert_eq!(gsi(Projection::KeysOnly).write_units(None, Some(&item)), 1.0);
        assert_eq!(gsi(Projection::Include(vec!["p".into()])).write_units(None, Some(&item)), 3.0);
        // Unchanged entry: no index write. Key change: delete + put.
        assert_eq!(gsi(Projection::KeysOnly).write_units(Some(&item), Some(&item)), 0.0);
        let mut moved = item.clone();
        moved.insert("vis".into(), n("9"));
        assert_eq!(gsi(Projection::KeysOnly).write_units(Some(&item), Some(&moved)), 2.0);
        // Non-key projected attribute changed: one write of the larger entry.
        let mut grown = item.clone();
        grown.insert("p".into(), s(&"b".repeat(5000)));
        assert_eq!(gsi(Projection::All).write_units(Some(&item), Some(&grown)), 5.0);
        // Leaving the index: one delete.
        assert_eq!(gsi(Projection::KeysOnly).write_units(Some(&item), Some(&sized(10))), 1.0);
    }
}
