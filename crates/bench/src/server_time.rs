//! The local server's own time a request ([`ServerTime`]), measured on the benchmark's own tables
//! as they stand before its tick: the burst model adds it to every request, as the server serves
//! one at a time.
//!
//! Four kinds of request, 8 at once as the sweep makes them, each timed over many: a small
//! GetItem, a BatchWriteItem of 25 record-sized puts (mostly bytes sent), a BatchGetItem of 100
//! tenants (mostly bytes answered) and a one-item Query of the control table (the local server
//! reads a whole table for a Query, which DynamoDB does not). Their bytes are read off the wire
//! ([`tickwork_tests::slow`]); the time a request, a kilobyte sent and a kilobyte answered are
//! solved from the first three, and a Query's extra from the fourth.

use std::collections::HashMap;
use std::time::Instant;

use anyhow::{ensure, Result};
use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, PutRequest, WriteRequest};
use futures::stream::{self, StreamExt};
use tickctl::burst::{ServerTime, Wire};
use tickwork::schema;
use tickwork_tests::slow::{Delay, Log};

const AT_ONCE: usize = 8;
const ROUNDS: usize = 12;

/// One kind's time a request, ms, and its average bytes.
async fn timed<F, Fut>(log: &Log, make: F) -> Result<(f64, Wire)>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    log.lock().expect("log").clear();
    let n = AT_ONCE * ROUNDS;
    let start = Instant::now();
    let done: Vec<Result<()>> = stream::iter(0..n).map(&make).buffer_unordered(AT_ONCE).collect().await;
    let took = start.elapsed();
    for r in done {
        r?;
    }
    let log = log.lock().expect("log");
    ensure!(!log.is_empty(), "no request was seen on the wire");
    let k = log.len() as f64;
    let w = Wire {
        sent: log.iter().map(|s| s.request_bytes as f64).sum::<f64>() / k,
        got: log.iter().map(|s| s.response_bytes as f64).sum::<f64>() / k,
    };
    Ok((took.as_secs_f64() * 1000.0 / n as f64, w))
}

/// The local server's time a request on `control` and `tenants` (whose first 100 `tenant_ids`
/// are read), and the four kinds' times and bytes for the benchmark's lines.
pub(crate) async fn measure(
    sdk: &SdkConfig,
    control: &str,
    tenants: &str,
    tenant_ids: &[String],
) -> Result<(ServerTime, Vec<(&'static str, f64, Wire)>)> {
    let log: Log = Default::default();
    let db = crate::scale::sized_db(sdk, Delay::default(), Some(log.clone()));
    let c = db.client();
    let small = timed(&log, |_| async {
        c.get_item().table_name(control).set_key(Some(schema::key("probe", "probe"))).send().await?;
        Ok(())
    })
    .await?;
    let pad = "x".repeat(250);
    let puts = timed(&log, |i| {
        let reqs: Vec<WriteRequest> = (0..25)
            .map(|j| {
                let mut item: HashMap<String, AttributeValue> = schema::key(format!("calib#{i}"), format!("{j:03}"));
                item.insert("pad".into(), AttributeValue::S(pad.clone()));
                WriteRequest::builder()
                    .put_request(PutRequest::builder().set_item(Some(item)).build().expect("a put"))
                    .build()
            })
            .collect();
        async move {
            c.batch_write_item().request_items(control, reqs).send().await?;
            Ok(())
        }
    })
    .await?;
    let keys: Vec<HashMap<String, AttributeValue>> = tenant_ids
        .iter()
        .take(100)
        .map(|t| HashMap::from([(schema::PK.to_string(), AttributeValue::S(t.clone()))]))
        .collect();
    let gets = timed(&log, |_| {
        let ka = KeysAndAttributes::builder().set_keys(Some(keys.clone())).consistent_read(true).build().expect("keys");
        async move {
            c.batch_get_item().request_items(tenants, ka).send().await?;
            Ok(())
        }
    })
    .await?;
    let query = timed(&log, |i| async move {
        c.query()
            .table_name(control)
            .key_condition_expression("pk = :p")
            .expression_attribute_values(":p", AttributeValue::S(format!("calib#{}", i % AT_ONCE)))
            .limit(1)
            .consistent_read(true)
            .send()
            .await?;
        Ok(())
    })
    .await?;
    let server = solve(small, puts, gets, query);
    Ok((
        server,
        vec![
            ("GetItem, small", small.0, small.1),
            ("BatchWriteItem, 25 puts", puts.0, puts.1),
            ("BatchGetItem, 100 tenants", gets.0, gets.1),
            ("Query, one item", query.0, query.1),
        ],
    ))
}

/// A request's, a kilobyte sent's and a kilobyte answered's times from three kinds' (each `r +
/// s·sent + g·got`), and a Query's extra from a fourth; none below zero. Pure.
pub(crate) fn solve(a: (f64, Wire), b: (f64, Wire), c: (f64, Wire), q: (f64, Wire)) -> ServerTime {
    let kb = |w: Wire| (1.0, w.sent / 1024.0, w.got / 1024.0);
    let rows = [kb(a.1), kb(b.1), kb(c.1)];
    let t = [a.0, b.0, c.0];
    let det = |m: [(f64, f64, f64); 3]| {
        m[0].0 * (m[1].1 * m[2].2 - m[1].2 * m[2].1) - m[0].1 * (m[1].0 * m[2].2 - m[1].2 * m[2].0)
            + m[0].2 * (m[1].0 * m[2].1 - m[1].1 * m[2].0)
    };
    let d = det(rows);
    let col = |k: usize| {
        let mut m = rows;
        for (i, row) in m.iter_mut().enumerate() {
            match k {
                0 => row.0 = t[i],
                1 => row.1 = t[i],
                _ => row.2 = t[i],
            }
        }
        (det(m) / d).max(0.0)
    };
    let s = ServerTime { request_ms: col(0), query_ms: 0.0, sent_per_kb_ms: col(1), got_per_kb_ms: col(2) };
    ServerTime { query_ms: (q.0 - s.of(q.1, false)).max(0.0), ..s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_time_is_solved_back_from_the_kinds_it_made() {
        let truth = ServerTime { request_ms: 2.0, query_ms: 40.0, sent_per_kb_ms: 0.5, got_per_kb_ms: 2.0 };
        let w = |sent: f64, got: f64| Wire { sent, got };
        let kinds = [w(150.0, 430.0), w(8_800.0, 170.0), w(2_300.0, 18_000.0), w(290.0, 350.0)];
        let t = |k: usize| (truth.of(kinds[k], k == 3), kinds[k]);
        let s = solve(t(0), t(1), t(2), t(3));
        for (got, want) in [(s.request_ms, 2.0), (s.query_ms, 40.0), (s.sent_per_kb_ms, 0.5), (s.got_per_kb_ms, 2.0)] {
            assert!((got - want).abs() < 1e-6, "{s:?}");
        }
    }
}
