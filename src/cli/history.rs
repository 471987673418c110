//! `recover history`: the runs in the journal directory, newest first, with how each ended
//! (or that it was interrupted and can be resumed).

use super::Output;
use super::{CliResult, Failure};
use anyhow::anyhow;
use recover::engine::history::{list, RunSummary};
use recover::exit::Exit;
use recover::util::table::Table;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    /// Where run journals are (what `recover --runbook` wrote with --journal-dir).
    #[arg(long, value_name = "DIR", default_value = "recover-runs")]
    pub journal_dir: PathBuf,
    /// Table for people or JSON for scripts.
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
        Output::Text => print!("{}", table(&runs)),
    }
    Ok(Exit::Done)
}

/// The runs as a table whose columns fit the longest run id, runbook and target.
pub fn table(runs: &[RunSummary]) -> String {
    let mut t = Table::new(["run", "runbook", "target", "started", "steps", "status"]);
    for r in runs {
        t.row([
            r.run_id.clone(),
            r.runbook.clone(),
            r.target.clone(),
            r.started_at.clone(),
            format!("{}/{}", r.steps_done, r.steps_started),
            r.status.clone(),
        ]);
    }
    t.render()
}
