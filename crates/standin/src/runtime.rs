//! A function in any language, run in its real runtime under its own runtime interface client,
//! behind Lambda's Invoke API.
//!
//! Why: a target function (`queue_worker::targets` in the worker) is reached through the Lambda
//! SDK client, as on AWS; `sam local invoke` needs Docker, and the Runtime Interface Emulator is
//! not on the package registries. What a runtime interface client (`awslambdaric` from PyPI,
//! `aws-lambda-ric` from npm) needs is the Runtime API: `GET /2018-06-01/runtime/invocation/next`
//! answered with an event and its headers, then `POST …/invocation/{id}/response` or `…/error`
//! (Lambda Developer Guide, "Using the Lambda runtime API for custom runtimes"). So [`Function`]
//! serves that API on `127.0.0.1:0`, starts the client as a process with
//! `AWS_LAMBDA_RUNTIME_API` pointing at it, and answers each synchronous invocation of the
//! Invoke API stand-in ([`crate::invoke`]) with what the process posted: `/error` as a function
//! error (`X-Amz-Function-Error: Unhandled`), as Lambda does.
//!
//! One process, one invocation at a time (a function of reserved concurrency 1). A process that
//! exits is started again; an invocation that outlives `timeout` is answered `Sandbox.Timedout`
//! and its process replaced, as Lambda stops an environment at its deadline.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

use crate::invoke::{Answer, Handler, InvocationType, Request};

struct Pending {
    id: String,
    payload: Vec<u8>,
    reply: oneshot::Sender<Answer>,
}

struct Shared {
    events: tokio::sync::Mutex<mpsc::UnboundedReceiver<Pending>>,
    /// To put an event back that a connection could not hand over (its process died).
    again: mpsc::UnboundedSender<Pending>,
    inflight: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
    timeout: Duration,
}

/// A function process behind the Invoke API; stops when dropped.
pub struct Function {
    send: mpsc::UnboundedSender<Pending>,
    kill: mpsc::UnboundedSender<()>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    timeout: Duration,
    /// What the process printed (stdout and stderr), line by line.
    pub output: Arc<Mutex<Vec<String>>>,
    /// Invocations answered.
    pub invocations: Arc<AtomicU64>,
    /// Processes started (1 + restarts).
    pub starts: Arc<AtomicU64>,
}

impl Drop for Function {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Function {
    /// Starts `program args…` in `dir` with `env`, its runtime API on a loopback port.
    pub async fn start(
        program: impl AsRef<Path>,
        args: &[&str],
        dir: impl AsRef<Path>,
        env: &[(&str, &str)],
        timeout: Duration,
    ) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (send, recv) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            events: tokio::sync::Mutex::new(recv),
            again: send.clone(),
            inflight: Default::default(),
            timeout,
        });
        let server = {
            let shared = shared.clone();
            tokio::spawn(async move {
                loop {
                    let Ok((s, _)) = listener.accept().await else { return };
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        let _ = serve(s, shared).await;
                    });
                }
            })
        };
        let output: Arc<Mutex<Vec<String>>> = Default::default();
        let starts = Arc::new(AtomicU64::new(0));
        let (kill, mut killed) = mpsc::unbounded_channel::<()>();
        let program: PathBuf = program.as_ref().to_path_buf();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let dir: PathBuf = dir.as_ref().to_path_buf();
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        // Fail early on a program that cannot start at all.
        spawn(&program, &args, &dir, &env, &addr.to_string(), &output)
            .with_context(|| format!("starting {} {}", program.display(), args.join(" ")))?
            .kill()
            .await
            .ok();
        let supervisor = {
            let (output, starts) = (output.clone(), starts.clone());
            tokio::spawn(async move {
                loop {
                    let Ok(mut child) = spawn(&program, &args, &dir, &env, &addr.to_string(), &output) else { return };
                    starts.fetch_add(1, Ordering::SeqCst);
                    tokio::select! {
                        status = child.wait() => {
                            output.lock().expect("output").push(format!("[standin] the process exited: {status:?}"));
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        _ = killed.recv() => {
                            child.kill().await.ok();
                        }
                    }
                }
            })
        };
        Ok(Self {
            send,
            kill,
            tasks: vec![server, supervisor],
            timeout,
            output,
            invocations: Arc::new(AtomicU64::new(0)),
            starts,
        })
    }

    /// Runs one synchronous invocation.
    pub async fn invoke(&self, payload: Vec<u8>) -> Answer {
        static N: AtomicU64 = AtomicU64::new(0);
        let id = format!("standin-{}", N.fetch_add(1, Ordering::Relaxed));
        let (reply, answer) = oneshot::channel();
        if self.send.send(Pending { id, payload, reply }).is_err() {
            return failed("Runtime.Unavailable", "the function is stopped");
        }
        // Queued time counts too: Lambda answers a throttled synchronous call at once, and a
        // caller here waits its turn, up to one timeout.
        let a = match tokio::time::timeout(self.timeout * 2, answer).await {
            Ok(Ok(a)) => a,
            Ok(Err(_)) | Err(_) => {
                let _ = self.kill.send(());
                failed("Sandbox.Timedout", "the invocation ran past its deadline")
            }
        };
        self.invocations.fetch_add(1, Ordering::SeqCst);
        a
    }

    /// The Invoke API handler that runs synchronous invocations here (an `Event` invocation runs
    /// too, its answer dropped).
    pub fn handler(self: &Arc<Self>) -> Handler {
        let f = self.clone();
        Arc::new(move |req: Request| {
            let f = f.clone();
            Box::pin(async move {
                let a = f.invoke(req.payload).await;
                match req.kind {
                    InvocationType::RequestResponse => a,
                    _ => Answer::default(),
                }
            })
        })
    }

    /// Everything the process printed so far.
    pub fn printed(&self) -> String {
        self.output.lock().expect("output").join("\n")
    }
}

fn failed(kind: &str, msg: &str) -> Answer {
    Answer {
        body: format!(r#"{{"errorType":"{kind}","errorMessage":"{msg}"}}"#).into_bytes(),
        function_error: Some("Unhandled".into()),
    }
}

fn spawn(
    program: &Path,
    args: &[String],
    dir: &Path,
    env: &[(String, String)],
    api: &str,
    output: &Arc<Mutex<Vec<String>>>,
) -> Result<tokio::process::Child> {
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .envs(env.iter().cloned())
        .env("AWS_LAMBDA_RUNTIME_API", api)
        .env("AWS_LAMBDA_FUNCTION_NAME", "standin")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/standin")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "standin")
        .env("LAMBDA_TASK_ROOT", dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    for pipe in [
        child.stdout.take().map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
        child.stderr.take().map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
    ]
    .into_iter()
    .flatten()
    {
        let output = output.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(pipe).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                output.lock().expect("output").push(l);
            }
        });
    }
    Ok(child)
}

async fn serve(stream: TcpStream, shared: Arc<Shared>) -> Result<()> {
    stream.set_nodelay(true)?;
    let mut r = BufReader::new(stream);
    while let Some((method, path, body)) = crate::read_request(&mut r).await? {
        if method == "GET" && path.ends_with("/runtime/invocation/next") {
            let Some(p) = shared.events.lock().await.recv().await else { return Ok(()) };
            if p.reply.is_closed() {
                continue; // its caller gave up (timed out) while it waited
            }
            let deadline = jiff::Timestamp::now().as_millisecond() + shared.timeout.as_millis() as i64;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Lambda-Runtime-Aws-Request-Id: {}\r\nLambda-Runtime-Deadline-Ms: {deadline}\r\n\
                 Lambda-Runtime-Invoked-Function-Arn: arn:aws:lambda:us-east-1:123456789012:function:standin\r\n\
                 Lambda-Runtime-Trace-Id: Root=1-00000000-000000000000000000000000;Sampled=0\r\n\r\n",
                p.payload.len(),
                p.id
            );
            let mut out = head.into_bytes();
            out.extend(&p.payload);
            let Pending { id, payload, reply } = p;
            // In flight before the write: the answer can come back before the write returns.
            shared.inflight.lock().expect("inflight").insert(id.clone(), reply);
            if let Err(e) = r.get_mut().write_all(&out).await {
                // The process that asked is gone: the next one gets the event.
                if let Some(reply) = shared.inflight.lock().expect("inflight").remove(&id) {
                    let _ = shared.again.send(Pending { id, payload, reply });
                }
                return Err(e.into());
            }
            continue;
        }
        // `/2018-06-01/runtime/invocation/{id}/response|error`, or `/runtime/init/error`.
        let mut segs = path.trim_end_matches('/').rsplit('/');
        let (last, id) = (segs.next().unwrap_or_default(), segs.next().unwrap_or_default().to_string());
        let reply = shared.inflight.lock().expect("inflight").remove(&id);
        if let Some(reply) = reply {
            let function_error = (last == "error").then(|| "Unhandled".to_string());
            let _ = reply.send(Answer { body: body.into_bytes(), function_error });
        }
        r.get_mut().write_all(b"HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{\"status\":\"OK\"}\n").await?;
    }
    Ok(())
}
