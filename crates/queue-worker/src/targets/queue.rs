//! An SQS queue, standard or FIFO, as a kind's handler: `SendMessageBatch`, 10 units a request.
//!
//! Each message's body is the unit ([`super::envelope::unit_body`]), its attributes the key, kind
//! and tenant. On a FIFO queue the deduplication id is derived from the unit key and the group id
//! is the tenant ([`super::envelope::dedup_id`], [`super::envelope::group_id`]), so a batch sent
//! again within SQS's five-minute deduplication interval adds nothing. An entry SQS reports failed
//! is retried under the queue's policy and dead-lettered alone after its attempts, whoever SQS
//! says is at fault: a sender fault can be the deployment's (a KMS key the worker may not use, a
//! queue policy) as well as the message's, and dead-lettering at once would send every unit there
//! on a configuration slip. A failed request retries every unit it carried.

use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
use futures::future::BoxFuture;
use tickwork::queue::Job;

use super::envelope::{dedup_id, entry_ends, entry_id, group_id, requests, MAX_ENTRIES};
use crate::registry::{Handler, HandlerError};

/// A queue target.
pub struct QueueTarget {
    client: aws_sdk_sqs::Client,
    url: String,
    fifo: bool,
}

impl std::fmt::Debug for QueueTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueTarget").field("url", &self.url).field("fifo", &self.fifo).finish()
    }
}

fn attr(v: &str) -> MessageAttributeValue {
    MessageAttributeValue::builder().data_type("String").string_value(v).build().expect("data type is set")
}

impl QueueTarget {
    /// Sends to the queue at `url`.
    pub fn new(client: aws_sdk_sqs::Client, url: &str, fifo: bool) -> Self {
        Self { client, url: url.into(), fifo }
    }

    /// One request of at most 10 entries.
    async fn send(&self, jobs: &[Job], bodies: &[String]) -> Vec<Result<(), HandlerError>> {
        let entries: Vec<SendMessageBatchRequestEntry> = jobs
            .iter()
            .zip(bodies)
            .enumerate()
            .map(|(i, (j, body))| {
                let tenant = j.tenant.clone().unwrap_or_default();
                let mut e = SendMessageBatchRequestEntry::builder()
                    .id(entry_id(i))
                    .message_body(body)
                    .message_attributes("key", attr(&j.id))
                    .message_attributes("kind", attr(&j.kind));
                if !tenant.is_empty() {
                    e = e.message_attributes("tenant", attr(&tenant));
                }
                if self.fifo {
                    e = e.message_deduplication_id(dedup_id(&j.id)).message_group_id(group_id(&tenant));
                }
                e.build().expect("id and body are set")
            })
            .collect();
        let out = match self.client.send_message_batch().queue_url(&self.url).set_entries(Some(entries)).send().await {
            Ok(out) => out,
            Err(e) => {
                let why = format!("sending to {}: {}", self.url, tickwork_lambda::error_chain(&e));
                use aws_sdk_sqs::error::ProvideErrorMetadata;
                let e = match crate::throttle::is_throttle_code(e.code()) {
                    true => HandlerError::throttled(why),
                    false => HandlerError::Retry(why),
                };
                return vec![Err(e); jobs.len()];
            }
        };
        // An entry refused for the queue's rate (a FIFO queue's per-group or per-queue limit) is
        // a throttle, not a failure of its unit.
        let throttled: Vec<&str> =
            out.failed().iter().filter(|f| crate::throttle::is_throttle_code(Some(f.code()))).map(|f| f.id()).collect();
        let failed: Vec<(&str, String)> = out
            .failed()
            .iter()
            .map(|f| {
                let fault = if f.sender_fault() { "the sender's fault" } else { "the service's fault" };
                (f.id(), format!("{} refused it ({fault}): {} {}", self.url, f.code(), f.message().unwrap_or_default()))
            })
            .collect();
        let sent: Vec<&str> = out.successful().iter().map(|s| s.id()).collect();
        entry_ends(jobs.len(), &sent, &failed)
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                r.map_err(|why| {
                    let why = format!("{}: {why}", self.url);
                    match throttled.contains(&entry_id(i).as_str()) {
                        true => HandlerError::throttled(why),
                        false => HandlerError::Retry(why),
                    }
                })
            })
            .collect()
    }
}

impl Handler for QueueTarget {
    fn handle<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<(), HandlerError>> {
        Box::pin(async move { self.handle_batch(std::slice::from_ref(job)).await.remove(0) })
    }

    fn batch_limit(&self) -> usize {
        MAX_ENTRIES
    }

    fn handle_batch<'a>(&'a self, jobs: &'a [Job]) -> BoxFuture<'a, Vec<Result<(), HandlerError>>> {
        Box::pin(async move {
            // A message's size counts its body and its attributes' names, types and values.
            let (bodies, ranges) = requests(jobs, |j| j.id.len() + 100);
            let mut out = Vec::with_capacity(jobs.len());
            for r in ranges {
                out.extend(self.send(&jobs[r.clone()], &bodies[r]).await);
            }
            out
        })
    }
}
