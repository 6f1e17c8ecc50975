//! The `tickctl` binary as the tests run it: the runbook's environment for a stack on the local
//! servers (its table prefix, the endpoint, the template's fan-out job), nothing else from the
//! shell's tickwork settings that a test did not choose.

use std::process::{Command, Output};

use tickwork_tests::Local;

/// `tickctl` pointed at the stack `prefix` on `local`'s server.
pub fn tickctl_command(local: &Local, prefix: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tickctl-cli"));
    c.env("TICKWORK_FANOUT_JOB", "utc-daily")
        .env("AWS_ENDPOINT_URL_DYNAMODB", &local.endpoint)
        .env("TICKWORK_TABLE_PREFIX", prefix)
        .env("TICKWORK_CAPACITY_SOURCE", "estimate")
        .env_remove("TICKWORK_ARCHIVE_BUCKET")
        .env_remove("TICKWORK_PULSE_MAX_LATENESS_SECS")
        .env_remove(tickwork::iam::IAM_LOG);
    c
}

/// `tickctl ARGS` against the stack `prefix`.
pub fn tickctl(local: &Local, prefix: &str, args: &[&str]) -> Output {
    tickctl_command(local, prefix).args(args).output().expect("run tickctl")
}

/// Its standard output, after checking it succeeded.
pub fn ok(o: &Output) -> String {
    assert!(o.status.success(), "exit {:?}: {}", o.status.code(), String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}
