//! The stack's functions as operators name them, and the job each one's lease and state use:
//! the one vocabulary `pause`, `status` and the parts check share.

use serde::Serialize;
use tickwork::config::{ConfigError, Env};

/// The four functions, as operators name them (`tickctl pause tenant-fanout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Function {
    /// The pulse sweep.
    PulseSweep,
    /// The tenant fan-out.
    TenantFanout,
    /// The queue worker.
    QueueWorker,
    /// The archiver.
    Archiver,
}

impl Function {
    /// The name operators type (`tenant-fanout`).
    pub fn name(self) -> &'static str {
        match self {
            Function::PulseSweep => "pulse-sweep",
            Function::TenantFanout => "tenant-fanout",
            Function::QueueWorker => "queue-worker",
            Function::Archiver => "archiver",
        }
    }

    /// The job name its lease, state item and metrics line use, read as the function reads it.
    pub fn job(self, env: &Env) -> Result<String, ConfigError> {
        Ok(match self {
            Function::PulseSweep => pulse_sweep::config::job(env)?,
            Function::TenantFanout => tenant_fanout::config::lease_job(&tenant_fanout::config::job(env)?),
            Function::QueueWorker => queue_worker::JOB.into(),
            Function::Archiver => archiver::config::JOB.into(),
        })
    }
}
