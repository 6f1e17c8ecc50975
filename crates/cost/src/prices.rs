//! Prices in US dollars, each with its source and the date it was read; any of them can be
//! overridden (`tickctl cost --price name=value`). The figures were read from third-party copies
//! of the AWS pricing pages on 2026-11-30 (the official pages render their tables client-side and
//! were not retrievable here): check them against <https://aws.amazon.com/pricing/> before
//! relying on a cent.

use anyhow::{bail, Result};
use serde::Serialize;

/// Prices in US dollars, us-east-1.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Prices {
    /// DynamoDB on-demand, per million write request units (after the 2024-11-01 cut;
    /// third-party copies of aws.amazon.com/dynamodb/pricing/on-demand, read 2026-11-30).
    pub ddb_write_million: f64,
    /// DynamoDB on-demand, per million read request units (same source).
    pub ddb_read_million: f64,
    /// DynamoDB Standard table storage, per GB-month (same source).
    pub ddb_storage_gb_month: f64,
    /// Lambda requests, per million (aws.amazon.com/lambda/pricing, third-party copy, 2026-11-30).
    pub lambda_requests_million: f64,
    /// Lambda arm64 duration, per GB-second (first 7.5 billion GB-s a month; same source).
    pub lambda_arm_gb_second: f64,
    /// CloudWatch custom metric, per metric-month (first 10,000; aws.amazon.com/cloudwatch/pricing,
    /// third-party copy, 2026-11-30).
    pub cw_metric_month: f64,
    /// CloudWatch standard-resolution alarm, per metric it reads per month (same source).
    pub cw_alarm_metric_month: f64,
    /// CloudWatch dashboard, per month beyond an account's three free ones (same source).
    pub cw_dashboard_month: f64,
    /// CloudWatch Logs ingestion (Standard class), per GB (same source).
    pub cw_logs_ingest_gb: f64,
    /// CloudWatch Logs storage, per GB-month (same source).
    pub cw_logs_storage_gb_month: f64,
    /// S3 Standard PUT, per 1,000 requests (aws.amazon.com/s3/pricing, widely quoted, 2026-11-30).
    pub s3_put_thousand: f64,
    /// S3 Standard storage, per GB-month (first 50 TB; same source).
    pub s3_storage_gb_month: f64,
    /// EventBridge Scheduler, per million invocations beyond the free ones
    /// (aws.amazon.com/eventbridge/pricing, third-party copies, 2026-11-30).
    pub scheduler_million: f64,
    /// EventBridge Scheduler invocations free each month (same source).
    pub scheduler_free_millions: f64,
    /// EventBridge scheduled rules (what SAM's `Schedule` event creates), per million events.
    /// Taken as free: no per-event charge for scheduled rules was found in the copies read
    /// (unconfirmed; at 3,600 events a month it is cents either way).
    pub rule_event_million: f64,
    /// SQS standard queue requests, per million beyond the first million a month; each 64 KB
    /// chunk of a request's payload is billed as one request (aws.amazon.com/sqs/pricing,
    /// third-party copies, 2026-12-01).
    pub sqs_standard_million: f64,
    /// SQS FIFO queue requests, per million (same source and chunking).
    pub sqs_fifo_million: f64,
    /// EventBridge custom events put on a bus, per million; each 64 KB chunk of an entry is one
    /// event (aws.amazon.com/eventbridge/pricing, third-party copies, 2026-12-01).
    pub events_custom_million: f64,
}

impl Default for Prices {
    fn default() -> Self {
        Prices {
            ddb_write_million: 0.625,
            ddb_read_million: 0.125,
            ddb_storage_gb_month: 0.25,
            lambda_requests_million: 0.20,
            lambda_arm_gb_second: 0.000_013_333_4,
            cw_metric_month: 0.30,
            cw_alarm_metric_month: 0.10,
            cw_dashboard_month: 3.00,
            cw_logs_ingest_gb: 0.50,
            cw_logs_storage_gb_month: 0.03,
            s3_put_thousand: 0.005,
            s3_storage_gb_month: 0.023,
            scheduler_million: 1.00,
            scheduler_free_millions: 14.0,
            rule_event_million: 0.0,
            sqs_standard_million: 0.40,
            sqs_fifo_million: 0.50,
            events_custom_million: 1.00,
        }
    }
}

impl Prices {
    /// DynamoDB on-demand: `rru` read and `wru` write request units, in dollars. The one place
    /// units become dollars.
    pub fn units_usd(&self, rru: f64, wru: f64) -> f64 {
        (rru * self.ddb_read_million + wru * self.ddb_write_million) / 1e6
    }

    /// Overrides one price: `name=value`, `name` a field of [`Prices`].
    pub fn set(&mut self, spec: &str) -> Result<()> {
        let Some((name, value)) = spec.split_once('=') else {
            bail!("--price `{spec}`: expected name=value (e.g. ddb_write_million=1.25)")
        };
        let v: f64 =
            value.trim().parse().map_err(|_| anyhow::anyhow!("--price `{spec}`: `{value}` is not a number"))?;
        if !v.is_finite() || v < 0.0 {
            bail!("--price `{spec}`: a price is a finite amount of at least 0");
        }
        let mut all = serde_json::to_value(&*self)?;
        match all.get_mut(name.trim()) {
            Some(slot) => *slot = serde_json::json!(v),
            None => {
                let names: Vec<String> = all.as_object().into_iter().flatten().map(|(k, _)| k.clone()).collect();
                bail!("--price `{spec}`: no price named `{name}`; known: {}", names.join(", "))
            }
        }
        *self = Prices::from_value(all)?;
        Ok(())
    }

    fn from_value(v: serde_json::Value) -> Result<Self> {
        let f = |k: &str| v[k].as_f64().ok_or_else(|| anyhow::anyhow!("price {k}"));
        Ok(Prices {
            ddb_write_million: f("ddb_write_million")?,
            ddb_read_million: f("ddb_read_million")?,
            ddb_storage_gb_month: f("ddb_storage_gb_month")?,
            lambda_requests_million: f("lambda_requests_million")?,
            lambda_arm_gb_second: f("lambda_arm_gb_second")?,
            cw_metric_month: f("cw_metric_month")?,
            cw_alarm_metric_month: f("cw_alarm_metric_month")?,
            cw_dashboard_month: f("cw_dashboard_month")?,
            cw_logs_ingest_gb: f("cw_logs_ingest_gb")?,
            cw_logs_storage_gb_month: f("cw_logs_storage_gb_month")?,
            s3_put_thousand: f("s3_put_thousand")?,
            s3_storage_gb_month: f("s3_storage_gb_month")?,
            scheduler_million: f("scheduler_million")?,
            scheduler_free_millions: f("scheduler_free_millions")?,
            rule_event_million: f("rule_event_million")?,
            sqs_standard_million: f("sqs_standard_million")?,
            sqs_fifo_million: f("sqs_fifo_million")?,
            events_custom_million: f("events_custom_million")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_price_is_overridden_by_name_and_a_bad_one_is_named() {
        let mut p = Prices::default();
        p.set("ddb_write_million=1.25").unwrap();
        assert_eq!(p.ddb_write_million, 1.25);
        assert_eq!(p.ddb_read_million, Prices::default().ddb_read_million);
        let e = p.set("ddb_writes=1").unwrap_err().to_string();
        assert!(e.contains("no price named `ddb_writes`") && e.contains("ddb_write_million"), "{e}");
        assert!(p.set("ddb_write_million=-1").is_err());
        assert!(p.set("ddb_write_million").unwrap_err().to_string().contains("name=value"));
    }
}
