//! A loopback stand-in for the Lambda Runtime API.
//!
//! Why: Lambda cannot run here, and `sam local invoke` needs Docker. A function binary built with
//! `lambda_runtime` only needs the Runtime API's HTTP protocol — `GET
//! /2018-06-01/runtime/invocation/next` answered with an event and its headers (request id,
//! deadline), then `POST …/invocation/{id}/response` or `…/error` — so a small server on
//! `127.0.0.1:0` can run the real binary, hand it events one at a time, and collect what it
//! answered and what it printed. The benchmark measures start-up with it; the tests filter its
//! stdout as Lambda's log-level filter does and feed the metrics to the template's alarms.
//!
//! [`invoke`] is the other side: Lambda's Invoke API, for code that invokes functions; [`runtime`]
//! runs a function in another language's runtime behind it; [`streams`] is an event source
//! mapping of a DynamoDB stream.

pub mod asynchronous;
pub mod invoke;
pub mod runtime;
pub mod streams;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

enum Call {
    /// The function asks for its next event; answered with one, or never (the run is over).
    Next(oneshot::Sender<Option<(String, String)>>),
    /// The function posted a result (`response` or `error`).
    Result { ok: bool, body: String },
}

pub(crate) async fn read_request(r: &mut BufReader<TcpStream>) -> Result<Option<(String, String, String)>> {
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

async fn serve(stream: TcpStream, calls: mpsc::Sender<Call>, deadline_ms: i64) -> Result<()> {
    // One write per answer and no Nagle delay: a split write waiting for a delayed ACK would add
    // ~40 ms to every warm invocation and be measured as the function's.
    stream.set_nodelay(true)?;
    let mut r = BufReader::new(stream);
    while let Some((method, path, body)) = read_request(&mut r).await? {
        if method == "GET" && path.ends_with("/runtime/invocation/next") {
            let (tx, rx) = oneshot::channel();
            calls.send(Call::Next(tx)).await?;
            let Some((id, event)) = rx.await.ok().flatten() else { return Ok(()) };
            let deadline = jiff::Timestamp::now().as_millisecond() + deadline_ms;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Lambda-Runtime-Aws-Request-Id: {id}\r\nLambda-Runtime-Deadline-Ms: {deadline}\r\n\
                 Lambda-Runtime-Invoked-Function-Arn: arn:aws:lambda:us-east-1:123456789012:function:standin\r\n\
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

/// One invocation's result.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// `true` for `/response`, `false` for `/error`.
    pub ok: bool,
    /// What the function posted.
    pub body: String,
    /// What it printed to stdout while handling this event, line by line.
    pub stdout: Vec<String>,
    /// Event handed over → result posted.
    pub took: Duration,
}

/// A whole run.
#[derive(Debug, Clone)]
pub struct Run {
    /// Process start → first request for an event (the runtime's init).
    pub init: Duration,
    /// Per event, in order.
    pub invocations: Vec<Invocation>,
    /// Stdout printed before the first event (init).
    pub init_stdout: Vec<String>,
    /// Peak resident set of the process, bytes (Linux `VmHWM`).
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

/// The name the function runs under, as the template names it: `<stack>-<binary>` (the
/// template's `FunctionName: !Sub "${AWS::StackName}-queue-worker"`). A function that invokes
/// itself (the worker's hand-on, the sweep's helpers) invokes this name, so the IAM check holds
/// that call to the function's own statement; a bare `standin` would be a function no template
/// grants.
pub fn function_name(bin: &Path) -> String {
    let stem = bin.file_stem().and_then(|s| s.to_str()).unwrap_or("standin");
    // The tests build each function as `lambda-<part>` (the workspace's bin names are the parts').
    format!("{STACK}-{}", stem.strip_prefix("lambda-").unwrap_or(stem))
}

/// The stack the stand-in's functions belong to.
pub const STACK: &str = "standin";

/// Runs `bin` with `env` (the Runtime API variables added), hands it each of `events` in turn,
/// and returns what it answered and printed. Each invocation's deadline is `deadline` after its
/// event is handed over.
///
/// A process that exits — at start-up (an init error) or while it handles an event (a panic
/// that aborts, `std::process::abort`, the out-of-memory killer) — fails the event it held (or
/// the next one, at init), as Lambda reports `Runtime.ExitError`, and the next event starts a
/// new process, as Lambda starts a new execution environment. So does one that runs past its
/// deadline: Lambda stops it there.
pub async fn run(bin: &Path, env: &[(String, String)], events: &[String], deadline: Duration) -> Result<Run> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (tx, mut rx) = mpsc::channel(16);
    let deadline_ms = deadline.as_millis() as i64;
    let server = tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else { return };
            let tx = tx.clone();
            tokio::spawn(async move {
                let _ = serve(s, tx, deadline_ms).await;
            });
        }
    });
    let (line_tx, mut lines) = mpsc::unbounded_channel::<String>();
    let function = function_name(bin);
    let spawn =
        |line_tx: mpsc::UnboundedSender<String>| -> Result<(tokio::process::Child, tokio::task::JoinHandle<()>)> {
            let mut child = tokio::process::Command::new(bin)
                .envs(env.iter().cloned())
                .env("AWS_LAMBDA_RUNTIME_API", addr.to_string())
                .env("AWS_LAMBDA_FUNCTION_NAME", &function)
                .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
                .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
                .env("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{function}"))
                .env("AWS_LAMBDA_LOG_STREAM_NAME", "standin")
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("starting {}", bin.display()))?;
            let mut out = BufReader::new(child.stdout.take().context("stdout")?).lines();
            let reader = tokio::spawn(async move {
                while let Ok(Some(l)) = out.next_line().await {
                    if line_tx.send(l).is_err() {
                        return;
                    }
                }
            });
            Ok((child, reader))
        };
    let drain = |lines: &mut mpsc::UnboundedReceiver<String>| {
        let mut v = Vec::new();
        while let Ok(l) = lines.try_recv() {
            v.push(l);
        }
        v
    };
    let started = Instant::now();
    let mut result = Run { init: Duration::ZERO, invocations: Vec::new(), init_stdout: Vec::new(), peak_rss: 0 };
    let (mut child, reader) = spawn(line_tx.clone())?;
    let mut reader = Some(reader);
    let mut pid = child.id().context("child pid")?;
    let mut alive = true;
    // The event handed over and not yet answered, and when.
    let mut handed: Option<Instant> = None;
    let mut next_event = 0;
    let mut first = true;
    let timeout = Duration::from_secs(120);
    loop {
        if !alive {
            if next_event == events.len() && handed.is_none() {
                break;
            }
            let (c, r) = spawn(line_tx.clone())?;
            (child, reader) = (c, Some(r));
            pid = child.id().context("child pid")?;
            alive = true;
        }
        // A handed event runs until its deadline at most.
        let wait = match handed {
            Some(h) => deadline.saturating_sub(h.elapsed()) + Duration::from_millis(500),
            None => timeout,
        };
        tokio::select! {
            call = rx.recv() => match call {
                Some(Call::Next(reply)) => {
                    if first {
                        first = false;
                        result.init = started.elapsed();
                        result.init_stdout = drain(&mut lines);
                    }
                    if next_event == events.len() {
                        result.peak_rss = peak_rss(pid).unwrap_or(0);
                        drop(reply);
                        break;
                    }
                    handed = Some(Instant::now());
                    let _ = reply.send(Some((format!("req-{next_event}"), events[next_event].clone())));
                    next_event += 1;
                }
                Some(Call::Result { ok, body }) => {
                    let took = handed.take().map(|h| h.elapsed()).unwrap_or_default();
                    // The function writes its lines before it posts its result; give the pipe a moment.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    result.invocations.push(Invocation { ok, body, stdout: drain(&mut lines), took });
                }
                None => bail!("runtime API stand-in closed"),
            },
            status = child.wait() => {
                alive = false;
                let status = status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                if let Some(r) = reader.take() {
                    let _ = tokio::time::timeout(Duration::from_millis(500), r).await;
                }
                // The event it held fails; a process that died before asking for one fails the next.
                let took = match handed.take() {
                    Some(h) => h.elapsed(),
                    None if next_event < events.len() => {
                        next_event += 1;
                        Duration::ZERO
                    }
                    None => continue,
                };
                let body = format!(r#"{{"errorType":"Runtime.ExitError","errorMessage":"the process exited: {status}"}}"#);
                result.invocations.push(Invocation { ok: false, body, stdout: drain(&mut lines), took });
            }
            _ = tokio::time::sleep(wait) => {
                match handed.take() {
                    // Lambda stops an invocation at its deadline, and its environment with it.
                    Some(h) => {
                        child.kill().await.ok();
                        alive = false;
                        let body = r#"{"errorType":"Sandbox.Timedout","errorMessage":"the invocation ran past its deadline"}"#.to_string();
                        result.invocations.push(Invocation { ok: false, body, stdout: drain(&mut lines), took: h.elapsed() });
                    }
                    None => bail!("the function stopped talking"),
                }
            }
        }
    }
    child.kill().await.ok();
    server.abort();
    // Whatever is still in the pipe belongs to the last invocation.
    if let Some(r) = reader {
        let _ = tokio::time::timeout(Duration::from_millis(500), r).await;
    }
    if let Some(last) = result.invocations.last_mut() {
        last.stdout.extend(drain(&mut lines));
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_runs_under_its_template_name() {
        assert_eq!(function_name(Path::new("/t/debug/lambda-queue-worker")), "standin-queue-worker");
        assert_eq!(function_name(Path::new("/t/debug/pulse-sweep")), "standin-pulse-sweep");
    }
}
