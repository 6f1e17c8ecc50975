use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::types::WriteRequest;
use tickwork::budget::{Steps, Unlimited};
use tickwork::pager::{for_each_page, Cursor, Page, PageError, PageRun};
use tickwork::schema::{av_s, key, PK};
use tickwork_tests::Local;

const N: usize = 1_050;

async fn seeded() -> (Local, String) {
    let local = Local::new().await;
    let table = local.control().await;
    let writes: Vec<WriteRequest> = (0..N)
        .map(|i| {
            let mut item = key("tenants", format!("t{i:05}"));
            item.insert("zone".into(), av_s("UTC"));
            WriteRequest::builder()
                .put_request(aws_sdk_dynamodb::types::PutRequest::builder().set_item(Some(item)).build().unwrap())
                .build()
        })
        .collect();
    local.db.batch_write_all(&table, writes, 10).await.unwrap();
    (local, table)
}

fn query(local: &Local, table: &str) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
    local
        .db
        .client()
        .query()
        .table_name(table)
        .key_condition_expression("#pk = :p")
        .expression_attribute_names("#pk", PK)
        .expression_attribute_values(":p", av_s("tenants"))
}

type Seen = Arc<Mutex<Vec<String>>>;

fn collector(seen: &Seen) -> impl FnMut(Page) -> std::future::Ready<Result<(), std::convert::Infallible>> {
    let seen = seen.clone();
    move |page| {
        seen.lock().unwrap().extend(page.items.iter().map(|i| i["sk"].as_s().unwrap().clone()));
        std::future::ready(Ok(()))
    }
}

#[tokio::test]
async fn pages_to_exhaustion_once_each() {
    let (local, table) = seeded().await;
    let seen: Seen = Default::default();
    local.db.meter().reset();
    let run = for_each_page(&local.db, query(&local, &table), None, 100, &Unlimited, "tenants", collector(&seen))
        .await
        .unwrap();
    // 1,050 items at 100 a page: 11 pages (the last has 50 and no LastEvaluatedKey).
    assert_eq!(run, PageRun::Exhausted { pages: 11, items: N as u64 });
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), N);
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), N, "each item once");
    assert_eq!(local.db.meter().op("Query").requests, 11);
    assert_eq!(local.db.meter().op("Query").items_read, N as u64);
}

#[tokio::test]
async fn stopped_by_budget_then_resumed_from_serialised_cursor() {
    let (local, table) = seeded().await;
    let seen: Seen = Default::default();
    // The budget allows two more pages after the first: stop after 3.
    let run = for_each_page(&local.db, query(&local, &table), None, 100, &Steps::new(2), "tenants", collector(&seen))
        .await
        .unwrap();
    let PageRun::Stopped { cursor, pages: 3, items: 300 } = run else {
        panic!("expected a stop after 3 pages, got {run:?}")
    };
    // Persist and read back as text, as a checkpoint would.
    let stored = serde_json::to_string(&cursor).unwrap();
    let restored: Cursor = serde_json::from_str(&stored).unwrap();
    let rest =
        for_each_page(&local.db, query(&local, &table), Some(&restored), 100, &Unlimited, "tenants", collector(&seen))
            .await
            .unwrap();
    assert_eq!(rest, PageRun::Exhausted { pages: 8, items: 750 });
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), N, "union is everything");
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), N, "nothing twice");
}

#[tokio::test]
async fn unreadable_cursor_is_a_clear_error() {
    let (local, table) = seeded().await;
    let seen: Seen = Default::default();
    let bad = serde_json::from_str::<Cursor>("\"garbage\"");
    assert!(bad.is_err());
    // A cursor that decodes but names another key space still goes to DynamoDB: only shape is checked
    // locally. A page size below 1 is refused before any request.
    let r = for_each_page(&local.db, query(&local, &table), None, 0, &Unlimited, "tenants", collector(&seen)).await;
    assert!(matches!(r, Err(PageError::Db(tickwork::DbError::Invalid(_)))));
}
