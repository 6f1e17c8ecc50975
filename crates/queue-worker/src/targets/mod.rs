//! Targets: a kind's units delivered to a Lambda function in any runtime, an SQS queue or an
//! EventBridge bus, instead of a Rust handler compiled into the worker.
//!
//! Why: most teams write their product code in TypeScript, Python, Java or Go. A target is a
//! [`Handler`] like any other — the drain claims, batches, retries, isolates and dead-letters its
//! units exactly as it does a Rust handler's — that takes several units a call
//! ([`Handler::batch_limit`]): the drain hands it up to `TICKWORK_TARGET_BATCH` units (a
//! function, [`function::FUNCTION_BATCH`] by default) or 10 (a queue, a bus) of one item at once,
//! one unit a call on the item's last attempt, and each unit ends as the target reports it.
//!
//! `TICKWORK_TARGETS` routes kinds to targets by ARN ([`route`]); the template names each ARN in
//! an IAM statement of its own. A kind routed to a target replaces the built-in handler of that
//! kind; a kind not routed keeps it.
//!
//! IAM, for the recorded-calls check ([`tickwork::iam`]): `Invoke` is `lambda:InvokeFunction` on
//! the function; `SendMessageBatch` is authorised as `sqs:SendMessage` on the queue ("the
//! permission for SendMessageBatch is the same as for SendMessage", SQS Developer Guide, "Amazon
//! SQS API permissions: Actions and resource reference"); `PutEvents` is `events:PutEvents` on the
//! bus (Service Authorization Reference, "Actions defined by Amazon EventBridge").

pub mod bus;
pub mod envelope;
pub mod function;
pub mod queue;
pub mod route;

use std::sync::Arc;

use aws_smithy_runtime_api::client::interceptors::context::Input;
use tickwork::clock::SharedClock;
use tickwork::config::{ConfigError, Env};
use tickwork::iam::{Access, Resource};

pub use route::{parse_arn, parse_routes, Route, RouteError, Target};

use crate::registry::{Handler, Registry};

/// `registry` with the kinds `TICKWORK_TARGETS` routes replaced by their targets; refused at
/// start-up when the setting cannot be right.
pub fn route(
    registry: Registry,
    env: &Env,
    sdk: &aws_config::SdkConfig,
    clock: &SharedClock,
) -> Result<Registry, ConfigError> {
    let routes = parse_routes(&env.get(tickwork::env::TARGETS).unwrap_or_default())
        .map_err(|e| ConfigError::invalid(tickwork::env::TARGETS, e.to_string()))?;
    let batch = function::function_batch(env)?;
    let mut registry = registry;
    for r in routes {
        let handler = target(&r, sdk, batch, clock);
        for kind in &r.kinds {
            tracing::info!(kind, target = r.target.arn(), "kind routed to a target");
            registry = registry.with(kind, handler.clone());
        }
    }
    Ok(registry)
}

/// The retry partition of the clients that call a function target: not `lambda`, the worker's
/// own hand-on client's.
pub const TARGET_LAMBDA_PARTITION: &str = "tickwork-target-lambda";

/// The handler that delivers to `r`'s target, with a client for the target's region (`batch`:
/// units an Invoke of a function).
pub fn target(r: &Route, sdk: &aws_config::SdkConfig, batch: usize, clock: &SharedClock) -> Arc<dyn Handler> {
    let region = aws_config::Region::new(r.target.region().to_string());
    match &r.target {
        Target::Function { arn, region: name } => {
            // A retry partition of its own: a throttled target spends its own client's retry
            // tokens, never those of the worker's hand-on Invoke (the SDK shares a token bucket
            // among the clients of one partition, by default the service's name).
            let mut b = aws_sdk_lambda::config::Builder::from(sdk)
                .region(region)
                .retry_partition(aws_sdk_lambda::config::retry::RetryPartition::new(TARGET_LAMBDA_PARTITION));
            if let Some(rec) = tickwork::iam::suite_recorder() {
                b = b.interceptor(rec.map(tickwork_lambda::lambda::lambda_accesses));
            }
            let source = format!("tickwork:{}", r.kinds.join(","));
            Arc::new(function::FunctionTarget::new(
                aws_sdk_lambda::Client::from_conf(b.build()),
                arn,
                name,
                &source,
                batch,
                clock.clone(),
            ))
        }
        Target::Queue { url, fifo, .. } => {
            let mut b = aws_sdk_sqs::config::Builder::from(sdk)
                .region(region)
                .retry_partition(aws_sdk_sqs::config::retry::RetryPartition::new("tickwork-target-sqs"));
            if let Some(rec) = tickwork::iam::suite_recorder() {
                b = b.interceptor(rec.map(sqs_accesses));
            }
            Arc::new(queue::QueueTarget::new(aws_sdk_sqs::Client::from_conf(b.build()), url, *fifo))
        }
        Target::Bus { arn, .. } => {
            let mut b = aws_sdk_eventbridge::config::Builder::from(sdk)
                .region(region)
                .retry_partition(aws_sdk_eventbridge::config::retry::RetryPartition::new("tickwork-target-events"));
            if let Some(rec) = tickwork::iam::suite_recorder() {
                b = b.interceptor(rec.map(events_accesses));
            }
            Arc::new(bus::BusTarget::new(aws_sdk_eventbridge::Client::from_conf(b.build()), arn))
        }
    }
}

/// A queue's ARN from its URL (`https://sqs.<region>.<domain>/<account>/<name>`), as
/// [`route::parse_arn`] built it. Pure.
pub fn queue_arn_of_url(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let (host, path) = rest.split_once('/')?;
    let region = host.strip_prefix("sqs.")?.split('.').next()?;
    let (account, name) = path.split_once('/')?;
    Some(format!("arn:{}:sqs:{region}:{account}:{name}", route::partition_of(region)))
}

/// SQS requests → accesses: `SendMessageBatch` is `sqs:SendMessage` on the queue.
pub fn sqs_accesses(input: &Input) -> Option<Vec<Access>> {
    let i = input.downcast_ref::<aws_sdk_sqs::operation::send_message_batch::SendMessageBatchInput>()?;
    let url = i.queue_url().unwrap_or_default();
    let arn = queue_arn_of_url(url).unwrap_or_else(|| url.to_string());
    Some(vec![Access { action: "sqs:SendMessage".into(), resource: Resource::Queue { arn }, leading_key: None }])
}

/// EventBridge requests → accesses: `PutEvents` is `events:PutEvents` on each bus an entry names.
pub fn events_accesses(input: &Input) -> Option<Vec<Access>> {
    let i = input.downcast_ref::<aws_sdk_eventbridge::operation::put_events::PutEventsInput>()?;
    let buses: std::collections::BTreeSet<String> =
        i.entries().iter().map(|e| e.event_bus_name().unwrap_or("default").to_string()).collect();
    Some(
        buses
            .into_iter()
            .map(|arn| Access { action: "events:PutEvents".into(), resource: Resource::Bus { arn }, leading_key: None })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_that_cannot_be_right_stops_the_worker_at_start_up_naming_the_setting() {
        let sdk = aws_config::SdkConfig::builder().region(aws_config::Region::new("us-east-1")).build();
        let clock: SharedClock = std::sync::Arc::new(tickwork::clock::SystemClock);
        let env = |pairs: &[(&str, &str)]| Env::from_pairs(pairs.iter().copied());
        for (pairs, why) in [
            (vec![("TICKWORK_TARGETS", "pulse=arn:aws:s3:::bucket")], "TICKWORK_TARGETS"),
            (vec![("TICKWORK_TARGETS", "=arn:aws:lambda:us-east-1:123456789012:function:f")], "names no kind"),
            (vec![("TICKWORK_TARGET_BATCH", "101")], "TICKWORK_TARGET_BATCH"),
        ] {
            let e = route(Registry::new(), &env(&pairs), &sdk, &clock).unwrap_err();
            assert!(format!("{}: {}", e.var, e.problem).contains(why), "{pairs:?}: {e:?}");
        }
        // A routed kind replaces the built-in handler; the others keep theirs.
        let ok =
            env(&[("TICKWORK_TARGETS", "pulse=arn:aws:sqs:us-east-1:123456789012:q"), ("TICKWORK_TARGET_BATCH", "25")]);
        let reg = route(Registry::new(), &ok, &sdk, &clock).unwrap();
        assert_eq!(reg.kinds(), ["pulse"]);
        assert_eq!(reg.get("pulse").unwrap().batch_limit(), 10, "a queue takes 10 a request");
        let f = env(&[
            ("TICKWORK_TARGETS", "sched=arn:aws:lambda:us-east-1:123456789012:function:f"),
            ("TICKWORK_TARGET_BATCH", "25"),
        ]);
        assert_eq!(route(Registry::new(), &f, &sdk, &clock).unwrap().get("sched").unwrap().batch_limit(), 25);
    }

    #[test]
    fn a_queue_url_built_from_an_arn_gives_the_arn_back() {
        for arn in [
            "arn:aws:sqs:eu-west-1:123456789012:work.fifo",
            "arn:aws-cn:sqs:cn-north-1:123456789012:q",
            "arn:aws-us-gov:sqs:us-gov-west-1:123456789012:q",
            "arn:aws-iso-e:sqs:eu-isoe-west-1:123456789012:q",
        ] {
            let Target::Queue { url, .. } = parse_arn(arn).unwrap() else { panic!() };
            assert_eq!(queue_arn_of_url(&url).as_deref(), Some(arn));
        }
    }

    #[test]
    fn a_batch_send_is_send_message_on_its_queue_and_put_events_names_each_bus() {
        let i = aws_sdk_sqs::operation::send_message_batch::SendMessageBatchInput::builder()
            .queue_url("https://sqs.us-east-1.amazonaws.com/1/q")
            .build()
            .unwrap();
        let a = sqs_accesses(&Input::erase(i)).unwrap();
        assert_eq!(a[0].action, "sqs:SendMessage");
        assert_eq!(a[0].resource, Resource::Queue { arn: "arn:aws:sqs:us-east-1:1:q".into() });
        let e = |bus: &str| aws_sdk_eventbridge::types::PutEventsRequestEntry::builder().event_bus_name(bus).build();
        let i = aws_sdk_eventbridge::operation::put_events::PutEventsInput::builder()
            .entries(e("arn:b1"))
            .entries(e("arn:b2"))
            .entries(e("arn:b1"))
            .build()
            .unwrap();
        let a = events_accesses(&Input::erase(i)).unwrap();
        assert_eq!(a.len(), 2);
        assert!(a.iter().all(|a| a.action == "events:PutEvents"));
    }
}
