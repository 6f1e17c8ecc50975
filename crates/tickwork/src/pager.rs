//! Query pagination that never truncates silently.
//!
//! Why (`000_*`, rule 1; `002_*`): "a list with a limit and no cursor is a bug". A Query is paged
//! by `LastEvaluatedKey` until it is exhausted; with a [`Budget`] it stops *between* pages and
//! hands back an opaque [`Cursor`] that resumes exactly where it stopped, to be persisted by the
//! caller. Each page is logged with a running count, so a long enumeration shows progress.
//!
//! At least one page is read per call, so an invocation that starts near its deadline still makes
//! progress instead of handing the same cursor on forever.

use std::collections::BTreeMap;
use std::future::Future;

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;

use crate::budget::Budget;
use crate::db::Db;
use crate::error::DbError;
use crate::item::Item;

/// Where a stopped enumeration resumes: an encoded `LastEvaluatedKey`. Opaque to callers, safe
/// to store as a string, validated when parsed back.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Cursor(String);

pub use crate::error::CursorError;

#[derive(serde::Serialize, serde::Deserialize)]
enum KeyValue {
    S(String),
    N(String),
    B(String),
}

impl Cursor {
    /// The cursor after a page: DynamoDB's `LastEvaluatedKey`, absent or empty when the
    /// enumeration is exhausted. The one reading of it, for Queries and Scans alike.
    pub fn after(last_evaluated_key: Option<&Item>) -> Result<Option<Self>, CursorError> {
        last_evaluated_key.filter(|k| !k.is_empty()).map(Self::encode).transpose()
    }

    /// Encodes a `LastEvaluatedKey` (key attributes are S, N or B).
    pub fn encode(key: &Item) -> Result<Self, CursorError> {
        let mut m = BTreeMap::new();
        for (k, v) in key {
            let kv = match v {
                AttributeValue::S(s) => KeyValue::S(s.clone()),
                AttributeValue::N(n) => KeyValue::N(n.clone()),
                AttributeValue::B(b) => KeyValue::B(base64::engine::general_purpose::STANDARD.encode(b.as_ref())),
                other => return Err(CursorError::new(format!("key attribute `{k}` has non-key type {other:?}"))),
            };
            m.insert(k.clone(), kv);
        }
        let json = serde_json::to_vec(&m).map_err(|e| CursorError::new(e.to_string()))?;
        Ok(Self(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)))
    }

    /// Decodes back into an `ExclusiveStartKey`.
    pub fn decode(&self) -> Result<Item, CursorError> {
        let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&self.0)
            .map_err(|e| CursorError::new(format!("not base64: {e}")))?;
        let m: BTreeMap<String, KeyValue> =
            serde_json::from_slice(&json).map_err(|e| CursorError::new(format!("not a key: {e}")))?;
        if m.is_empty() {
            return Err(CursorError::new("empty key"));
        }
        m.into_iter()
            .map(|(k, v)| {
                let av = match v {
                    KeyValue::S(s) => AttributeValue::S(s),
                    KeyValue::N(n) => {
                        n.parse::<f64>().map_err(|_| CursorError::new(format!("`{k}`: `{n}` is not a number")))?;
                        AttributeValue::N(n)
                    }
                    KeyValue::B(b) => AttributeValue::B(Blob::new(
                        base64::engine::general_purpose::STANDARD
                            .decode(b)
                            .map_err(|e| CursorError::new(format!("`{k}`: {e}")))?,
                    )),
                };
                Ok((k, av))
            })
            .collect()
    }

    /// The stored text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Cursor {
    type Error = CursorError;
    fn try_from(s: String) -> Result<Self, CursorError> {
        let c = Cursor(s);
        c.decode()?;
        Ok(c)
    }
}

impl From<Cursor> for String {
    fn from(c: Cursor) -> String {
        c.0
    }
}

impl std::str::FromStr for Cursor {
    type Err = CursorError;
    fn from_str(s: &str) -> Result<Self, CursorError> {
        Cursor::try_from(s.to_string())
    }
}

/// One page of an enumeration, with where the next one starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The items the key condition matched on this page.
    pub items: Vec<Item>,
    /// Where the next page starts; `None` on the last page. Persist it after handling `items`
    /// and a crash repeats at most this page.
    pub next: Option<Cursor>,
}

/// How an enumeration ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageRun {
    /// Every page was read.
    Exhausted {
        /// Pages read in this call.
        pages: u64,
        /// Items seen in this call.
        items: u64,
    },
    /// The budget ran out between pages; resume from `cursor`.
    Stopped {
        /// Where to resume.
        cursor: Cursor,
        /// Pages read in this call.
        pages: u64,
        /// Items seen in this call.
        items: u64,
    },
}

impl PageRun {
    /// Items seen in this call.
    pub fn items(&self) -> u64 {
        match self {
            PageRun::Exhausted { items, .. } | PageRun::Stopped { items, .. } => *items,
        }
    }
}

/// A failure while paging: the query, the cursor, or the caller's page handler.
#[derive(Debug, thiserror::Error)]
pub enum PageError<E> {
    /// DynamoDB.
    #[error(transparent)]
    Db(#[from] DbError),
    /// A stored cursor was unreadable.
    #[error(transparent)]
    Cursor(#[from] CursorError),
    /// The page handler.
    #[error("page handler: {0}")]
    Handler(#[source] E),
}

/// A page loop whose handler fails only with DynamoDB's errors fails as DynamoDB did, an
/// unreadable cursor included.
impl From<PageError<DbError>> for DbError {
    fn from(e: PageError<DbError>) -> Self {
        match e {
            PageError::Db(d) | PageError::Handler(d) => d,
            PageError::Cursor(c) => DbError::Cursor(c),
        }
    }
}

impl<E> PageError<E> {
    /// A handler-free paging error ([`fetch_page`]'s) as any caller's.
    pub fn widen(e: PageError<std::convert::Infallible>) -> Self {
        match e {
            PageError::Db(d) => PageError::Db(d),
            PageError::Cursor(c) => PageError::Cursor(c),
            PageError::Handler(never) => match never {},
        }
    }
}

/// Runs `query` page by page (`page_size` items each) from `start`, calling `on_page` with each
/// page, until exhausted or `budget` says stop (checked between pages).
pub async fn for_each_page<E, F, Fut>(
    db: &Db,
    query: QueryFluentBuilder,
    start: Option<&Cursor>,
    page_size: i32,
    budget: &dyn Budget,
    label: &str,
    mut on_page: F,
) -> Result<PageRun, PageError<E>>
where
    F: FnMut(Page) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    if page_size < 1 {
        return Err(DbError::Invalid(format!("{label}: page size {page_size} must be at least 1")).into());
    }
    let mut next = start.cloned();
    let mut pages = 0u64;
    let mut items = 0u64;
    loop {
        let page = fetch_page(db, &query, next.as_ref(), page_size).await.map_err(PageError::widen)?;
        pages += 1;
        let n = page.items.len() as u64;
        items += n;
        tracing::info!(label, page = pages, page_items = n, total = items, more = page.next.is_some(), "page");
        let cursor = page.next.clone();
        on_page(page).await.map_err(PageError::Handler)?;
        match cursor {
            Some(cursor) => {
                if budget.exhausted() {
                    tracing::info!(label, pages, total = items, "budget spent; stopping with a cursor");
                    return Ok(PageRun::Stopped { cursor, pages, items });
                }
                next = Some(cursor);
            }
            None => return Ok(PageRun::Exhausted { pages, items }),
        }
    }
}

/// One page of `query` from `start`: the loop's step, for callers that keep their own loop (and
/// persist `next` themselves, as the pulse sweep does with its checkpoints).
pub async fn fetch_page(
    db: &Db,
    query: &QueryFluentBuilder,
    start: Option<&Cursor>,
    page_size: i32,
) -> Result<Page, PageError<std::convert::Infallible>> {
    if page_size < 1 {
        return Err(DbError::Invalid(format!("page size {page_size} must be at least 1")).into());
    }
    let key = start.map(Cursor::decode).transpose()?;
    let out = db.query(query.clone().limit(page_size).set_exclusive_start_key(key)).await?;
    let next = Cursor::after(out.last_evaluated_key())?;
    Ok(Page { items: out.items.unwrap_or_default(), next })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cursor_after_a_page_is_its_last_key_and_none_at_the_end() {
        assert_eq!(Cursor::after(None).unwrap(), None);
        assert_eq!(Cursor::after(Some(&Item::new())).unwrap(), None, "an empty key ends the enumeration too");
        let key = Item::from([("pk".to_string(), AttributeValue::S("t#9".into()))]);
        assert_eq!(Cursor::after(Some(&key)).unwrap().unwrap().decode().unwrap(), key);
    }

    #[test]
    fn cursor_round_trips_and_rejects_garbage() {
        let key = Item::from([
            ("pk".to_string(), AttributeValue::S("t#1".into())),
            ("n".to_string(), AttributeValue::N("42".into())),
            ("b".to_string(), AttributeValue::B(Blob::new(vec![0, 1, 255]))),
        ]);
        let c = Cursor::encode(&key).unwrap();
        assert_eq!(c.decode().unwrap(), key);
        let again: Cursor = c.as_str().parse().unwrap();
        assert_eq!(again, c);
        assert!("not a cursor!".parse::<Cursor>().is_err());
        assert!(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("{}").parse::<Cursor>().is_err());
        let bad_n = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"n":{"N":"x"}}"#);
        assert!(bad_n.parse::<Cursor>().is_err());
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Cursor>(&json).unwrap(), c);
    }
}
