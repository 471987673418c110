//! `recover resume RUN_ID`: continue a run that was interrupted (engine killed, host
//! rebooted). The journal names the runbook text, the plan and the target. With no local
//! journal (a killed Job's pod is gone), `--target kube --namespace NS ...` fetches the
//! journal the run mirrored into its cluster.

use super::run::{cancel_on_signals, confirmation, engine_failure, finish, reach};
use super::Output;
use super::{runtime, CliResult, Failure};
use anyhow::anyhow;
use recover::engine::{self, journal, RunOptions};
use recover::exit::Exit;
use recover::platform::kube::Workload;
use recover::platform::{KubeTarget, Target};
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    /// The run to continue (a unique prefix is enough); see `recover history`.
    pub run_id: String,
    /// Where run journals are (the --journal-dir the run was started with).
    #[arg(long, value_name = "DIR", default_value = "recover-runs")]
    pub journal_dir: PathBuf,
    /// Do not ask for confirmation (required without a TTY).
    #[arg(long)]
    pub yes: bool,
    /// Final report format on stdout.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    #[command(flatten)]
    pub mirror: MirrorArgs,
}

/// Where a run's journal was mirrored (`recover resume`, `recover report`).
#[derive(Debug, clap::Args)]
pub struct MirrorArgs {
    /// Where the run's journal was mirrored, when there is no local one: only `kube`
    /// mirrors (the recover-journal ConfigMap).
    #[arg(long, value_name = "KIND", value_parser = ["kube"])]
    pub target: Option<String>,
    /// Kubernetes: the namespace of the run's target.
    #[arg(long, value_name = "NS", requires = "target")]
    pub namespace: Option<String>,
    /// Kubernetes: kubeconfig context (default: current context or in-cluster).
    #[arg(long, value_name = "CTX", requires = "target")]
    pub context: Option<String>,
    /// Kubernetes: the run's Deployment.
    #[arg(
        long,
        value_name = "NAME",
        requires = "target",
        conflicts_with = "selector"
    )]
    pub deployment: Option<String>,
    /// Kubernetes: the run's pods by label selector.
    #[arg(long, value_name = "LABELS", requires = "target")]
    pub selector: Option<String>,
}

/// The cluster a mirrored journal is fetched from, from the flags.
fn mirror_target(args: &MirrorArgs) -> Result<Option<Target>, Failure> {
    if args.target.is_none() {
        return Ok(None);
    }
    let namespace = args
        .namespace
        .clone()
        .ok_or_else(|| Failure::usage(anyhow!("--target kube needs --namespace NS")))?;
    let workload = match (&args.deployment, &args.selector) {
        (Some(d), None) => Workload::Deployment(d.clone()),
        (None, Some(s)) => Workload::Selector(s.clone()),
        _ => {
            return Err(Failure::usage(anyhow!(
                "--target kube needs --deployment NAME or --selector LABELS"
            )))
        }
    };
    Ok(Some(Target::Kube(KubeTarget {
        namespace,
        workload,
        context: args.context.clone(),
        prometheus: None,
    })))
}

/// The local journal of the run, or the one mirrored in the cluster written into the
/// journal dir.
fn journal_path(args: &ResumeArgs, rt: &tokio::runtime::Runtime) -> Result<PathBuf, Failure> {
    let local = journal_of(&args.journal_dir, &args.run_id);
    if local.is_ok() || args.mirror.target.is_none() {
        return local;
    }
    fetch_mirrored(&args.journal_dir, &args.run_id, &args.mirror, rt)
}

/// Fetch the journal of `run_id` mirrored where `mirror` says (with the run's observed
/// series, when there is one) into `journal_dir`; its path.
pub fn fetch_mirrored(
    journal_dir: &Path,
    run_id: &str,
    mirror: &MirrorArgs,
    rt: &tokio::runtime::Runtime,
) -> Result<PathBuf, Failure> {
    let target = mirror_target(mirror)?
        .ok_or_else(|| Failure::usage(anyhow!("no --target to fetch a mirrored journal from")))?;
    rt.block_on(async {
        let (platform, _) = reach(&target).await?;
        match engine::mirror::fetch_to(platform.as_ref(), run_id, journal_dir).await {
            Ok(Some(p)) => {
                eprintln!("fetched the journal of run {run_id} from {}", target.id());
                Ok(p)
            }
            Ok(None) => Err(Failure::usage(anyhow!(
                "no run {:?} in {} nor in the journal mirror of {} (give the full run id)",
                run_id,
                journal_dir.display(),
                target.id()
            ))),
            Err(e) => Err(Failure::new(Exit::Refused, e)),
        }
    })
}

/// The journal file of a run id or unique prefix.
pub fn journal_of(dir: &Path, run_id: &str) -> Result<PathBuf, Failure> {
    let exact = journal::path_for(dir, run_id);
    if exact.is_file() {
        return Ok(exact);
    }
    let matches: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Failure::usage(anyhow!("journal dir {}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "jsonl")
                && p.file_stem()
                    .is_some_and(|s| s.to_string_lossy().starts_with(run_id))
        })
        .collect();
    match matches.len() {
        1 => Ok(matches[0].clone()),
        0 => Err(Failure::usage(anyhow!(
            "no run {run_id:?} in {}",
            dir.display()
        ))),
        n => Err(Failure::usage(anyhow!(
            "{n} runs start with {run_id:?}; give more of the id"
        ))),
    }
}

pub fn run(args: ResumeArgs) -> CliResult {
    let rt = runtime()?;
    let path = journal_path(&args, &rt)?;
    let entries = journal::read(&path).map_err(Failure::usage)?;
    let point = journal::resume_point(&entries)
        .map_err(|e| Failure::usage(anyhow!("{}: {e}", path.display())))?;
    let target = point.target_spec.clone().ok_or_else(|| {
        Failure::usage(anyhow!(
            "{}: the journal does not say how to reach target {}; this run cannot be resumed",
            path.display(),
            point.target
        ))
    })?;
    let confirm = confirmation(args.yes, false)?;
    rt.block_on(async {
        let (platform, metrics) = reach(&target).await?;
        let options = RunOptions {
            journal_dir: args.journal_dir.clone(),
            target: Some(target.clone()),
            observer: Some(args.output.progress_observer()),
            confirm,
            ..RunOptions::default()
        };
        let report = engine::resume(&path, platform, metrics, options, cancel_on_signals())
            .await
            .map_err(engine_failure)?;
        finish(&report, args.output)
    })
}
