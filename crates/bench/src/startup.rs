//! Start-up time and memory of the Lambda binaries.
//!
//! Why: every tick of a 1-minute schedule may land on a fresh execution environment, so the time
//! from process start to a finished first invocation, and the memory the function needs, are part
//! of what a job costs. Lambda cannot run here, so each binary (release build, this machine's
//! architecture) runs against a stand-in for the Lambda Runtime API on loopback: the same HTTP
//! protocol (`GET …/invocation/next`, `POST …/invocation/{id}/response`) that the real service
//! speaks, two invocations each, against the local DynamoDB server. Peak resident memory is the
//! kernel's `VmHWM` for the process.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Result};

/// One function's figures.
pub struct Startup {
    /// Process start → first request for an event (the runtime's init: config, SDK clients).
    pub init: Duration,
    /// First invocation: event handed over → result posted (cold connections).
    pub first: Duration,
    /// Second invocation (warm).
    pub second: Duration,
    /// Peak resident set, bytes.
    pub peak_rss: u64,
}

/// Runs `bin` for two invocations of `event` with `env`, behind the Runtime API stand-in.
pub async fn measure(bin: &Path, event: &str, env: &[(String, String)]) -> Result<Startup> {
    let run = lambda_standin::run(bin, env, &[event.to_string(), event.to_string()], Duration::from_secs(60)).await?;
    for inv in &run.invocations {
        if !inv.ok {
            bail!("{} failed: {}", bin.display(), inv.body);
        }
    }
    Ok(Startup {
        init: run.init,
        first: run.invocations[0].took,
        second: run.invocations[1].took,
        peak_rss: run.peak_rss,
    })
}
