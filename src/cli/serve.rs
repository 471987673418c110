//! `recover serve`: the Alertmanager webhook receiver, and `recover serve reset TARGET`,
//! which closes a target's breaker through the running receiver's admin API.

use super::{runtime, CliResult, Failure, Output};
use anyhow::Context;
use recover::exit::Exit;
use recover::serve::{self, Mode};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
#[command(subcommand_negates_reqs = true, args_conflicts_with_subcommands = true)]
pub struct ServeArgs {
    #[command(subcommand)]
    pub command: Option<ServeCommand>,
    /// Address to listen on (e.g. 0.0.0.0:9095).
    #[arg(long, required = true, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// The receiver's configuration (routes, auth, budgets).
    #[arg(long, required = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// `observe` (the default) only dry-runs and records what it would have done; `act`
    /// runs runbooks.
    #[arg(long, value_enum, default_value_t = Mode::Observe)]
    pub mode: Mode,
}

#[derive(Debug, clap::Subcommand)]
pub enum ServeCommand {
    /// Close a target's breaker (after a human has looked) via the admin API.
    Reset(ResetArgs),
}

#[derive(Debug, clap::Args)]
pub struct ResetArgs {
    /// Target id as the receiver reports it (`local:demo`, `kube:shop/config-service`).
    pub target: String,
    /// Base URL of the running receiver.
    #[arg(long, default_value = "http://127.0.0.1:9095")]
    pub url: String,
    /// File holding the admin token.
    #[arg(long, value_name = "FILE", conflicts_with = "token_env")]
    pub token_file: Option<PathBuf>,
    /// Environment variable holding the admin token.
    #[arg(long, value_name = "VAR", default_value = "RECOVER_SERVE_ADMIN_TOKEN")]
    pub token_env: String,
    /// Also free the target's run budget.
    #[arg(long)]
    pub budget: bool,
    /// The reset target's state in words, or the receiver's JSON answer.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

pub fn run(args: ServeArgs) -> CliResult {
    match args.command {
        Some(ServeCommand::Reset(r)) => reset(r),
        None => {
            let listen = args
                .listen
                .ok_or_else(|| Failure::usage(anyhow::anyhow!("--listen ADDR is required")))?;
            let path = args
                .config
                .ok_or_else(|| Failure::usage(anyhow::anyhow!("--config FILE is required")))?;
            serve_forever(listen, path, args.mode)
        }
    }
}

fn serve_forever(listen: SocketAddr, path: PathBuf, mode: Mode) -> CliResult {
    let cfg = serve::config::load(&path).map_err(Failure::usage)?;
    let launcher =
        serve::engine_launcher::launcher(&cfg).map_err(|e| Failure::usage(anyhow::anyhow!(e)))?;
    let rt = runtime()?;
    let rx = match cfg.state_configmap.clone() {
        None => serve::Receiver::new(cfg, mode, launcher).map_err(Failure::usage)?,
        Some(spec) => {
            use serve::state::{ConfigMapStore, StateStore};
            // The store's writer runs on this runtime: build and load it there.
            let (store, book) = rt
                .block_on(async {
                    let store = ConfigMapStore::connect(&spec).await?;
                    let book = store.load().await?;
                    Ok::<_, serve::state::StateError>((store, book))
                })
                .map_err(|e| Failure::new(Exit::Refused, e))?;
            let store: std::sync::Arc<dyn StateStore> = std::sync::Arc::new(store);
            serve::Receiver::with_store(cfg, mode, launcher, Some(store), book)
                .map_err(Failure::usage)?
        }
    };
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("--listen {listen}"))
            .map_err(Failure::usage)?;
        let addr = listener
            .local_addr()
            .map_err(|e| Failure::new(Exit::Failed, e))?;
        tracing::info!(mode = ?mode, "recover serve listening on http://{addr}");
        if mode == Mode::Observe {
            tracing::warn!("observe mode: runbooks run as dry runs only; use --mode act to act");
        }
        serve::http::serve(listener, rx.clone(), stop_signal())
            .await
            .context("serving")?;
        // A run cut off mid-step would skip its on_failure steps: abort cleanly and wait.
        let left = rx.shutdown(std::time::Duration::from_secs(120)).await;
        if left > 0 {
            tracing::error!("{left} run(s) still in progress at exit; see `recover history` and `recover resume`");
            return Ok(Exit::Failed);
        }
        Ok(Exit::Done)
    })
}

/// Ctrl-C or SIGTERM (what Kubernetes sends when it replaces the pod).
async fn stop_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
    tracing::info!("stopping: no new alerts; aborting runs in progress cleanly");
}

fn reset(args: ResetArgs) -> CliResult {
    let token = match &args.token_file {
        Some(f) => std::fs::read_to_string(f)
            .with_context(|| format!("--token-file {}", f.display()))
            .map_err(Failure::usage)?,
        None => std::env::var(&args.token_env).map_err(|_| {
            Failure::usage(anyhow::anyhow!(
                "no admin token: set {} or give --token-file",
                args.token_env
            ))
        })?,
    };
    let token = token.trim().to_string();
    let url = format!("{}/admin/reset", args.url.trim_end_matches('/'));
    let body = serde_json::json!({"target": args.target, "budget": args.budget}).to_string();
    runtime()?.block_on(async move {
        let (status, body) = post(&url, &token, body)
            .await
            .with_context(|| format!("POST {url}"))?;
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        if !(200..300).contains(&status) {
            let msg = body["error"].as_str().unwrap_or("no detail").to_string();
            let code = match status {
                401 | 403 => Exit::Refused,
                404 | 400 => Exit::Usage,
                _ => Exit::Failed,
            };
            return Err(Failure::new(
                code,
                anyhow::anyhow!("{url}: HTTP {status}: {msg}"),
            ));
        }
        if args.output == Output::Json {
            println!("{body:#}");
            return Ok(Exit::Done);
        }
        let r = &body["reset"];
        println!(
            "{}: breaker {}, failures {}, budget {} of {} left",
            r["target"].as_str().unwrap_or(&args.target),
            if r["budget"]["breaker_open"] == true {
                "OPEN"
            } else {
                "closed"
            },
            r["budget"]["failures"],
            r["budget"]["remaining"],
            r["budget"]["limit"],
        );
        Ok(Exit::Done)
    })
}

/// POST JSON over plain HTTP (the receiver serves no TLS; put a proxy in front for that).
async fn post(url: &str, token: &str, body: String) -> anyhow::Result<(u16, bytes::Bytes)> {
    use http_body_util::Full;
    use recover::util::http_body::{read_body, BodyCaps};
    if !url.starts_with("http://") {
        anyhow::bail!("--url must be http://HOST:PORT (the receiver serves plain HTTP)");
    }
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<bytes::Bytes>>();
    let req = http::Request::post(url)
        .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(bytes::Bytes::from(body)))?;
    let resp = tokio::time::timeout(std::time::Duration::from_secs(10), client.request(req))
        .await
        .map_err(|_| anyhow::anyhow!("no answer in 10 s"))??;
    let status = resp.status().as_u16();
    let bytes = read_body(resp.into_body(), BodyCaps::small_json(1024 * 1024)).await?;
    Ok((status, bytes))
}
