//! `tickwork-dev`: thin shell over [`tickwork_dev`] (`make dev HANDLER=dir`).
//!
//! `tickwork-dev --handler DIR [--prefix dev] [--tick-secs 5] [--port 9100] [-- SCRIPT ARGS…]`:
//! with a script, runs it with the loop's environment and exits with its code; without, prints the
//! environment and ticks until interrupted.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut handler, mut prefix, mut tick_secs, mut port, mut script) =
        (None, "dev".to_string(), 5u64, 9100u16, Vec::new());
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().with_context(|| format!("{name} needs a value"));
        match a.as_str() {
            "--handler" => handler = Some(PathBuf::from(value("--handler")?)),
            "--prefix" => prefix = value("--prefix")?,
            "--tick-secs" => tick_secs = value("--tick-secs")?.parse().context("--tick-secs")?,
            "--port" => port = value("--port")?.parse().context("--port")?,
            "--" => {
                script = args.by_ref().collect();
                break;
            }
            other => bail!("unknown argument `{other}` (--handler DIR, --prefix, --tick-secs, --port, -- SCRIPT)"),
        }
    }
    let handler = handler.context("--handler DIR: the team's handler (e.g. examples/python-handler)")?;
    anyhow::ensure!(tick_secs > 0, "--tick-secs must be above 0");
    let repo = std::env::current_dir()?;
    let dynamodb = std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
        .context("AWS_ENDPOINT_URL_DYNAMODB is not set: run through `make dev`, which starts the local servers")?;
    // The SDK reads its endpoints from the process environment: set before any thread starts.
    for (k, v) in tickwork_dev::environment(&prefix, &dynamodb, port) {
        // SAFETY: single-threaded here; the runtime starts below.
        unsafe { std::env::set_var(k, v) };
    }
    let o = tickwork_dev::Options { handler, repo: repo.clone(), prefix, tick_secs, port };
    let code = tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(async move {
        let dev = tickwork_dev::Dev::start(&o).await?;
        if !script.is_empty() {
            return tickwork_dev::run_script(&dev, o.tick_secs, &script, &repo).await;
        }
        println!("tickwork dev: the stack's functions at {} (Ctrl-C stops)\n", dev.api.endpoint());
        print!("{}", dev.exports());
        println!("\n# in another shell: paste the lines above, then for example");
        println!("#   .tools/python-client/bin/python clients/python/examples/first_hour.py");
        println!(
            "# ticks every {} s; tickctl invoke pulse-sweep --event events/pulse-sweep.json --now ticks at once",
            o.tick_secs
        );
        // Until interrupted (Ctrl-C ends the process; `make dev` stops the servers then).
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(o.tick_secs)).await;
            dev.tick().await;
        }
        #[allow(unreachable_code)]
        Ok::<i32, anyhow::Error>(0)
    })?;
    std::process::exit(code)
}
