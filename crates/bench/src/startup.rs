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
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

enum Call {
    /// The function asks for its next event; answered with one, or never (the bench is done).
    Next(oneshot::Sender<Option<(String, String)>>),
    /// The function posted a result (`response` or `error`) for a request id.
    Result { ok: bool, body: String },
}

async fn read_request(r: &mut BufReader<TcpStream>) -> Result<Option<(String, String, String)>> {
    let mut line = String::new();
    if r.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        r.read_line(&mut h).await?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).await?;
    Ok(Some((method, path, String::from_utf8_lossy(&body).into_owned())))
}

async fn serve(stream: TcpStream, calls: mpsc::Sender<Call>) -> Result<()> {
    // One write per answer and no Nagle delay: a split write waiting for a delayed ACK would add
    // ~40 ms to every warm invocation and be measured as the function's.
    stream.set_nodelay(true)?;
    let mut r = BufReader::new(stream);
    while let Some((method, path, body)) = read_request(&mut r).await? {
        if method == "GET" && path.ends_with("/runtime/invocation/next") {
            let (tx, rx) = oneshot::channel();
            calls.send(Call::Next(tx)).await?;
            let Some((id, event)) = rx.await.ok().flatten() else { return Ok(()) };
            let deadline = jiff::Timestamp::now().as_millisecond() + 60_000;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Lambda-Runtime-Aws-Request-Id: {id}\r\nLambda-Runtime-Deadline-Ms: {deadline}\r\n\
                 Lambda-Runtime-Invoked-Function-Arn: arn:aws:lambda:us-east-1:123456789012:function:bench\r\n\
                 Lambda-Runtime-Trace-Id: Root=1-00000000-000000000000000000000000;Sampled=0\r\n\r\n",
                event.len()
            );
            r.get_mut().write_all(format!("{head}{event}").as_bytes()).await?;
        } else {
            let ok = path.ends_with("/response");
            calls.send(Call::Result { ok, body }).await?;
            r.get_mut().write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n").await?;
        }
    }
    Ok(())
}

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

fn peak_rss(pid: u32) -> Result<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("VmHWM in /proc status")?;
    Ok(kb * 1024)
}

/// Runs `bin` for two invocations of `event` with `env`.
pub async fn measure(bin: &Path, event: &str, env: &[(String, String)]) -> Result<Startup> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (tx, mut rx) = mpsc::channel(16);
    let server = tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else { return };
            let tx = tx.clone();
            tokio::spawn(async move {
                let _ = serve(s, tx).await;
            });
        }
    });
    let started = Instant::now();
    let mut child = tokio::process::Command::new(bin)
        .envs(env.iter().cloned())
        .env("AWS_LAMBDA_RUNTIME_API", addr.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", "bench")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/bench")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let pid = child.id().context("child pid")?;
    let mut marks = Vec::new();
    let mut answered = 0;
    let timeout = Duration::from_secs(60);
    loop {
        let call = tokio::time::timeout(timeout, rx.recv()).await.context("the function stopped talking")?;
        match call {
            Some(Call::Next(reply)) => {
                marks.push(Instant::now());
                if answered == 2 {
                    // Both invocations done: read the peak, then let the child go.
                    let rss = peak_rss(pid)?;
                    drop(reply);
                    child.kill().await.ok();
                    server.abort();
                    let (init, n1, r1, n2, r2) = (marks[0], marks[0], marks[1], marks[2], marks[3]);
                    return Ok(Startup { init: init - started, first: r1 - n1, second: r2 - n2, peak_rss: rss });
                }
                answered += 1;
                let _ = reply.send(Some((format!("req-{answered}"), event.to_string())));
            }
            Some(Call::Result { ok: true, .. }) => marks.push(Instant::now()),
            Some(Call::Result { ok: false, body }) => bail!("{} failed: {body}", bin.display()),
            None => bail!("runtime API stand-in closed"),
        }
    }
}
