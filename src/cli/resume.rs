//! `recover resume RUN_ID`: continue a run that was interrupted (engine killed, host
//! rebooted). The journal names the runbook text, the plan and the target.

use super::run::{cancel_on_signals, confirmation, engine_failure, finish, reach};
use super::Output;
use super::{runtime, CliResult, Failure};
use anyhow::anyhow;
use recover::engine::{self, journal, RunOptions};
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
    let path = journal_of(&args.journal_dir, &args.run_id)?;
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
    let rt = runtime()?;
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
