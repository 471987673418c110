//! `recover history`: the runs in the journal directory, newest first, with how each ended
//! (or that it was interrupted and can be resumed).

use super::Output;
use super::{CliResult, Failure};
use anyhow::anyhow;
use recover::engine::history::{list, RunSummary};
use recover::exit::Exit;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    #[arg(long, value_name = "DIR", default_value = "recover-runs")]
    pub journal_dir: PathBuf,
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

pub fn run(args: HistoryArgs) -> CliResult {
    let runs: Vec<RunSummary> = list(&args.journal_dir)
        .map_err(|e| Failure::usage(anyhow!("{}: {e}", args.journal_dir.display())))?;
    match args.output {
        Output::Json => println!(
            "{}",
            serde_json::to_string_pretty(&runs).map_err(|e| Failure::new(Exit::Failed, e))?
        ),
        Output::Text => {
            println!(
                "{:<24} {:<16} {:<18} {:<26} {:<10} status",
                "run", "runbook", "target", "started", "steps"
            );
            for r in &runs {
                println!(
                    "{:<24} {:<16} {:<18} {:<26} {:<10} {}",
                    r.run_id,
                    r.runbook,
                    r.target,
                    r.started_at,
                    format!("{}/{}", r.steps_done, r.steps_started),
                    r.status
                );
            }
        }
    }
    Ok(Exit::Done)
}
