//! `make dev`'s loop as a team first meets it: the `tickwork-dev` binary with the Python example
//! handler in its real runtime, driven by the Python client's first-hour script (add a tenant, set
//! a timer ahead, advance a tick), which succeeds only when the handler's effect for the timer's
//! fire is written under the fire's unit key. The script's timer is set 5 s ahead here, not the
//! minute it takes by default, to keep the suite short; nothing else differs.

use std::path::Path;
use std::process::Stdio;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_hour_script_sees_its_handler_write_the_timers_effect() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let python = repo.join(".tools/python-client/bin/python");
    assert!(python.exists(), "the Python client is not installed: run `make deps`");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let prefix = tickwork_tests::unique("dev");
    let local = tickwork_tests::Local::new().await;
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_lambda-dev"))
        .current_dir(&repo)
        .args([
            "--handler",
            "examples/python-handler",
            "--prefix",
            &prefix,
            "--port",
            &port.to_string(),
            "--tick-secs",
            "2",
        ])
        .arg("--")
        .arg(&python)
        .arg("clients/python/examples/first_hour.py")
        .env("AWS_ENDPOINT_URL_DYNAMODB", &local.endpoint)
        .env("TICKWORK_DEV_AHEAD_SECS", "5")
        .env_remove(tickwork::iam::IAM_LOG)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().rev().find(|l| l.starts_with("{\"tenant\"")).unwrap_or_default();
    assert!(out.status.success(), "exit {:?}\n{last}\n{}", out.status.code(), String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_str(last).unwrap();
    let tenant = r["tenant"].as_str().unwrap();
    assert_eq!(r["timer"]["outcome"], "added");
    assert!(r["effect"]["pk"]["S"].as_str().unwrap().starts_with(&format!("sched#{tenant}#welcome#")), "{r}");
    assert_eq!(
        (r["effect"]["kind"]["S"].as_str(), r["effect"]["runtime"]["S"].as_str()),
        (Some("sched"), Some("python"))
    );
}
