//! An EventBridge bus as a kind's handler: `PutEvents`, 10 units a request, `source` `tickwork`,
//! `detail-type` the kind, `detail` the unit ([`super::envelope::unit_body`]).
//!
//! EventBridge does not deduplicate: a unit delivered again is an event again, and the rule's
//! target deduplicates on the unit key. An entry EventBridge reports failed (EventBridge API
//! reference, "PutEventsResultEntry": `InternalFailure`, `ThrottlingException`, an access or
//! policy refusal, a malformed entry) is retried under the queue's policy and dead-lettered alone
//! after its attempts: a refusal can be the deployment's, which dead-lettering at once would turn
//! into every unit dead. A failed request retries every unit it carried.

use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use futures::future::BoxFuture;
use tickwork::queue::Job;

use super::envelope::{positional_ends, requests, MAX_ENTRIES};
use crate::registry::{Handler, HandlerError};

/// Every event's `source`.
pub const SOURCE: &str = "tickwork";

/// A bus target.
pub struct BusTarget {
    client: aws_sdk_eventbridge::Client,
    arn: String,
}

impl std::fmt::Debug for BusTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BusTarget").field("arn", &self.arn).finish()
    }
}

impl BusTarget {
    /// Puts events on the bus `arn`.
    pub fn new(client: aws_sdk_eventbridge::Client, arn: &str) -> Self {
        Self { client, arn: arn.into() }
    }

    async fn put(&self, jobs: &[Job], bodies: &[String]) -> Vec<Result<(), HandlerError>> {
        let entries: Vec<PutEventsRequestEntry> = jobs
            .iter()
            .zip(bodies)
            .map(|(j, body)| {
                PutEventsRequestEntry::builder()
                    .event_bus_name(&self.arn)
                    .source(SOURCE)
                    .detail_type(&j.kind)
                    .detail(body)
                    .build()
            })
            .collect();
        let out = match self.client.put_events().set_entries(Some(entries)).send().await {
            Ok(out) => out,
            Err(e) => {
                let why = format!("putting events on {}: {}", self.arn, tickwork_lambda::error_chain(&e));
                use aws_sdk_eventbridge::error::ProvideErrorMetadata;
                let e = match crate::throttle::is_throttle_code(e.code()) {
                    true => HandlerError::throttled(why),
                    false => HandlerError::Retry(why),
                };
                return vec![Err(e); jobs.len()];
            }
        };
        // An entry refused for the bus's rate (`ThrottlingException` as its `ErrorCode`) is a
        // throttle, not a failure of its unit.
        let throttled: Vec<bool> =
            out.entries().iter().map(|r| crate::throttle::is_throttle_code(r.error_code())).collect();
        let errors: Vec<Option<String>> = out
            .entries()
            .iter()
            .map(|r| r.error_code().map(|code| format!("refused it: {code} {}", r.error_message().unwrap_or_default())))
            .collect();
        positional_ends(jobs.len(), &errors)
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                r.map_err(|why| {
                    let why = format!("{}: {why}", self.arn);
                    match throttled.get(i).copied().unwrap_or(false) {
                        true => HandlerError::throttled(why),
                        false => HandlerError::Retry(why),
                    }
                })
            })
            .collect()
    }
}

impl Handler for BusTarget {
    fn handle<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<(), HandlerError>> {
        Box::pin(async move { self.handle_batch(std::slice::from_ref(job)).await.remove(0) })
    }

    fn batch_limit(&self) -> usize {
        MAX_ENTRIES
    }

    fn handle_batch<'a>(&'a self, jobs: &'a [Job]) -> BoxFuture<'a, Vec<Result<(), HandlerError>>> {
        Box::pin(async move {
            // An entry's size: its source, detail-type, detail and bus name (EventBridge User
            // Guide, "Calculating PutEvents event entry size"), plus a margin.
            let (bodies, ranges) = requests(jobs, |j| SOURCE.len() + j.kind.len() + self.arn.len() + 64);
            let mut out = Vec::with_capacity(jobs.len());
            for r in ranges {
                out.extend(self.put(&jobs[r.clone()], &bodies[r]).await);
            }
            out
        })
    }
}
