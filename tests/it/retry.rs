//! Throttling, injected by an SDK interceptor that replaces real responses from the local server
//! with DynamoDB's `ThrottlingException`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::config::interceptors::{
    BeforeDeserializationInterceptorContextMut, BeforeTransmitInterceptorContextRef,
};
use aws_sdk_dynamodb::config::retry::RetryPartition;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_types::body::SdkBody;
use tickwork::meter::{CapacitySource, Meter};
use tickwork::retry::RetryPolicy;
use tickwork::schema::key;
use tickwork::{Db, DbError};
use tickwork_tests::{unique, Local};

#[derive(Debug, Clone, Default)]
struct Throttle {
    remaining: Arc<AtomicU32>,
    attempts: Arc<Mutex<Vec<Instant>>>,
}

impl Intercept for Throttle {
    fn name(&self) -> &'static str {
        "Throttle"
    }
    fn read_before_transmit(
        &self,
        _: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        self.attempts.lock().unwrap().push(Instant::now());
        Ok(())
    }
    fn modify_before_deserialization(
        &self,
        ctx: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        if self.remaining.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
            let resp = ctx.response_mut();
            *resp.status_mut() = aws_smithy_runtime_api::http::StatusCode::try_from(400).unwrap();
            resp.headers_mut().insert("x-amzn-ErrorType", "ThrottlingException");
            *resp.body_mut() = SdkBody::from(
                r#"{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}"#,
            );
        }
        Ok(())
    }
}

fn policy() -> RetryPolicy {
    RetryPolicy { max_attempts: 4, initial_backoff: Duration::from_millis(20), max_backoff: Duration::from_millis(200) }
}

fn client(local: &Local, throttle: &Throttle, retry: aws_sdk_dynamodb::config::retry::RetryConfig) -> Db {
    let conf = aws_sdk_dynamodb::config::Builder::from(&local.sdk)
        .retry_config(retry)
        .retry_partition(RetryPartition::new(unique("throttle")))
        .interceptor(throttle.clone())
        .build();
    Db::new(aws_sdk_dynamodb::Client::from_conf(conf), Meter::new(CapacitySource::Estimate))
}

#[tokio::test]
async fn throttled_twice_then_succeeds_with_jittered_backoff() {
    let local = Local::new().await;
    let table = local.control().await;
    let mut waits = Vec::new();
    for _ in 0..5 {
        let throttle = Throttle { remaining: Arc::new(AtomicU32::new(2)), ..Default::default() };
        let db = client(&local, &throttle, policy().sdk());
        let out = db.get(db.client().get_item().table_name(&table).set_key(Some(key("x", "y")))).await;
        assert!(out.is_ok(), "third attempt succeeds: {:?}", out.err());
        let at = throttle.attempts.lock().unwrap().clone();
        assert_eq!(at.len(), 3, "two throttled attempts, then success");
        for w in at.windows(2) {
            let d = w[1] - w[0];
            assert!(d < Duration::from_secs(2), "backoff bounded by max_backoff (+ request time): {d:?}");
            waits.push(d);
        }
    }
    // Full jitter: the ten waits are not all the same length.
    let min = waits.iter().min().unwrap();
    let max = waits.iter().max().unwrap();
    assert!(*max > *min + Duration::from_millis(1), "waits vary (jitter): {waits:?}");
}

#[tokio::test]
async fn throttled_past_the_attempts_is_a_typed_error() {
    let local = Local::new().await;
    let table = local.control().await;
    let throttle = Throttle { remaining: Arc::new(AtomicU32::new(100)), ..Default::default() };
    let db = client(&local, &throttle, policy().sdk());
    let err = db.get(db.client().get_item().table_name(&table).set_key(Some(key("x", "y")))).await.unwrap_err();
    assert!(matches!(err, DbError::Throttled { .. }), "{err:?}");
    assert_eq!(throttle.attempts.lock().unwrap().len(), 4);
    assert_eq!(db.meter().total().errors, 1);
}

#[tokio::test]
async fn probe_client_fails_at_once() {
    let local = Local::new().await;
    let table = local.control().await;
    let throttle = Throttle { remaining: Arc::new(AtomicU32::new(1)), ..Default::default() };
    let db = client(&local, &throttle, aws_sdk_dynamodb::config::retry::RetryConfig::disabled());
    let err = db.get(db.client().get_item().table_name(&table).set_key(Some(key("x", "y")))).await.unwrap_err();
    assert!(matches!(err, DbError::Throttled { .. }), "{err:?}");
    assert_eq!(throttle.attempts.lock().unwrap().len(), 1, "no retry");
    // tickwork's own probe client is built the same way.
    let probe = tickwork::retry::probe_client(&local.sdk);
    assert_eq!(probe.config().retry_config().map(|r| r.max_attempts()), Some(1));
}

/// An unreachable endpoint is told apart from a lost condition: a distinct error variant.
#[tokio::test]
async fn unreachable_is_distinct() {
    let sdk = tickwork_tests::sdk_config_for("http://127.0.0.1:9").await;
    let conf = aws_sdk_dynamodb::config::Builder::from(&sdk)
        .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
        .build();
    let db = Db::new(aws_sdk_dynamodb::Client::from_conf(conf), Meter::new(CapacitySource::Estimate));
    let err = db.get(db.client().get_item().table_name("nope").set_key(Some(key("x", "y")))).await.unwrap_err();
    assert!(matches!(err, DbError::Unreachable { .. }), "{err:?}");
}

/// A missing table names itself.
#[tokio::test]
async fn missing_table_is_named() {
    let local = Local::new().await;
    let err = local
        .db
        .get(local.db.client().get_item().table_name("no-such-table").set_key(Some(key("x", "y"))))
        .await
        .unwrap_err();
    assert!(matches!(err, DbError::TableNotFound { ref table } if table == "no-such-table"), "{err:?}");
    assert!(err.to_string().contains("no-such-table"));
}
