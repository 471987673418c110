//! `recover --runbook NAME ...`: run a runbook against a target. Flags map onto
//! [`recover::engine::run`]; this file only turns the flags into a [`Target`], asks for
//! confirmation, wires Ctrl-C to a clean abort, and prints the report.

use super::{runtime, CliResult, Failure, Output};
use anyhow::{anyhow, Context};
use recover::engine::{self, Outcome, RunOptions, RunReport, RunRequest};
use recover::exit::Exit;
use recover::plan::Overrides;
use recover::platform::kube::Workload;
use recover::platform::{Connected, KubeTarget, Target};
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The kind of target, as the `--target` flag names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TargetKind {
    Local,
    Kube,
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Runbook name (looked up in --runbook-dir, ./runbooks/, then the built-in ones) or path.
    #[arg(long)]
    pub runbook: Option<String>,
    /// Extra directory to look for runbooks in, before ./runbooks/ (repeatable).
    #[arg(long, value_name = "DIR")]
    pub runbook_dir: Vec<PathBuf>,
    /// What to act on.
    #[arg(long, value_enum, default_value_t = TargetKind::Local)]
    pub target: TargetKind,
    /// Local target: the inventory YAML (replicas, gate, clients).
    #[arg(long, value_name = "FILE")]
    pub inventory: Option<PathBuf>,
    /// Kubernetes target: the namespace of the Deployment.
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Kubernetes target: kubeconfig context (default: current context or in-cluster).
    #[arg(long, value_name = "CTX")]
    pub context: Option<String>,
    /// Kubernetes target: the Deployment [default: the runbook's spec.target].
    #[arg(long, value_name = "NAME", conflicts_with = "selector")]
    pub deployment: Option<String>,
    /// Kubernetes target: pods by label selector instead of a Deployment name.
    #[arg(long, value_name = "LABELS")]
    pub selector: Option<String>,
    /// Kubernetes target: read signals from this Prometheus server instead of scraping
    /// pods through the API server (the runbook's `promql` expressions are used). Refused
    /// on a local target, which is always scraped directly.
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,
    /// Show the plan and every action it would take; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation (required without a TTY).
    #[arg(long)]
    pub yes: bool,
    /// Final report format on stdout.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Where run journals are written.
    #[arg(long, value_name = "DIR", default_value = "recover-runs")]
    pub journal_dir: PathBuf,
    /// Plan inputs the operator gives, each alone or together, each winning over the
    /// measured or declared one: arrival rate, req/s. The verdict is still observed and
    /// recorded; with arrival, cold capacity and k all given it need not be Stuck.
    #[arg(long, value_name = "REQ_PER_S")]
    pub assume_arrival_rate: Option<f64>,
    /// Capacity right after a restart, req/s (see --assume-arrival-rate).
    #[arg(long, value_name = "REQ_PER_S")]
    pub assume_capacity_cold: Option<f64>,
    /// Work amplification k (see --assume-arrival-rate).
    #[arg(long, value_name = "K")]
    pub assume_k: Option<f64>,
    /// Healthy capacity, req/s (see --assume-arrival-rate).
    #[arg(long, value_name = "REQ_PER_S")]
    pub assume_capacity: Option<f64>,
    /// How far back to search a Prometheus history for the last healthy period when the
    /// observed window has none [default: the runbook's spec.detect.lookback, 24h].
    #[arg(long, value_parser = recover::util::duration::parse)]
    pub lookback: Option<std::time::Duration>,
}

/// The target the flags name (recorded in the journal, so `recover resume` reconnects).
pub fn target(args: &RunArgs, runbook_target: &str) -> Result<Target, Failure> {
    match args.target {
        TargetKind::Local => {
            // The local platform reads each process's /metrics itself; a Prometheus URL
            // it did not use would make a direct-scrape run look like a Prometheus one.
            if args.prometheus.is_some() {
                return Err(Failure::usage(anyhow!(
                    "--prometheus applies to --target kube only: a local target is measured \
                     by scraping its inventory's metrics_url directly; drop --prometheus \
                     (to judge a Prometheus history, use recover detect --prometheus URL)"
                )));
            }
            let path = args
                .inventory
                .as_deref()
                .ok_or_else(|| Failure::usage(anyhow!("--target local needs --inventory FILE")))?;
            Target::local(path).map_err(Failure::usage)
        }
        TargetKind::Kube => {
            let namespace = args
                .namespace
                .clone()
                .ok_or_else(|| Failure::usage(anyhow!("--target kube needs --namespace NS")))?;
            let workload = match &args.selector {
                Some(sel) => Workload::Selector(sel.clone()),
                None => Workload::Deployment(
                    args.deployment
                        .clone()
                        .unwrap_or_else(|| runbook_target.to_string()),
                ),
            };
            Ok(Target::Kube(KubeTarget {
                namespace,
                workload,
                context: args.context.clone(),
                prometheus: args.prometheus.clone(),
            }))
        }
    }
}

/// Connect to a target; the exit code says whether the input was bad or the target
/// unreachable.
pub async fn reach(target: &Target) -> Result<Connected, Failure> {
    recover::platform::connect(target)
        .await
        .map_err(|e| Failure::new(e.exit(), e))
}

/// The confirmation rule: --yes, or a TTY to ask on; otherwise refuse (exit 3).
pub fn confirmation(yes: bool, dry_run: bool) -> Result<Option<engine::Confirm>, Failure> {
    if yes || dry_run {
        return Ok(None);
    }
    if !std::io::stdin().is_terminal() {
        return Err(Failure::new(
            Exit::Refused,
            anyhow!("refusing to act without confirmation: no TTY to ask on; pass --yes"),
        ));
    }
    Ok(Some(Arc::new(|preview: &RunReport| {
        eprintln!("{}", preview.summary_table());
        eprint!(
            "Proceed with run {} on {}? [y/N] ",
            preview.run_id, preview.target
        );
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        matches!(line.trim(), "y" | "Y" | "yes")
    })))
}

/// Ctrl-C and SIGTERM cancel the run cleanly (on_failure steps still run).
pub fn cancel_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return,
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        eprintln!("interrupted: aborting cleanly (running on_failure steps)...");
        t.cancel();
    });
    token
}

/// Print the report and turn its outcome into an exit code.
pub fn finish(report: &RunReport, output: Output) -> CliResult {
    match output {
        Output::Json => println!(
            "{}",
            serde_json::to_string_pretty(report).context("encoding the report")?
        ),
        Output::Text => print!("{}", report.summary_table()),
    }
    Ok(match report.outcome {
        Outcome::Succeeded | Outcome::Planned => Exit::Done,
        Outcome::Failed | Outcome::Aborted => Exit::Failed,
    })
}

pub fn engine_failure(e: engine::EngineError) -> Failure {
    Failure::new(e.exit(), e)
}

pub fn run(args: RunArgs) -> CliResult {
    let Some(name) = args.runbook.clone() else {
        return Err(Failure::usage(anyhow!(
            "nothing to do: give --runbook NAME or a subcommand (see recover --help)"
        )));
    };
    let mut loaded = recover::runbook::find(&name, &args.runbook_dir).map_err(Failure::usage)?;
    if let Some(l) = args.lookback {
        loaded.runbook.detect.lookback = l;
    }
    let target = target(&args, &loaded.runbook.target)?;
    let confirm = confirmation(args.yes, args.dry_run)?;
    let overrides = Overrides {
        arrival_rate: args.assume_arrival_rate,
        capacity_cold: args.assume_capacity_cold,
        k: args.assume_k,
        capacity: args.assume_capacity,
        demand: None,
    };
    let rt = runtime()?;
    rt.block_on(async {
        let (platform, metrics) = reach(&target).await?;
        let options = RunOptions {
            dry_run: args.dry_run,
            journal_dir: args.journal_dir.clone(),
            overrides,
            target: Some(target.clone()),
            observer: Some(args.output.progress_observer()),
            confirm,
            ask: super::ask::on_terminal(),
            ..RunOptions::default()
        };
        let cancel = cancel_on_signals();
        let report = engine::run(
            RunRequest {
                runbook: loaded,
                platform,
                metrics,
                options,
            },
            cancel,
        )
        .await
        .map_err(engine_failure)?;
        finish(&report, args.output)
    })
}
