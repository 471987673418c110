//! `recover runbooks validate|list|show`.

use super::{CliResult, Failure};

#[derive(Debug, clap::Subcommand)]
pub enum RunbooksCommand {
    /// Validate runbook files; exit 2 on any error.
    Validate { files: Vec<std::path::PathBuf> },
    /// List the runbooks found.
    List,
    /// Show one runbook.
    Show { name: String },
}

pub fn run(_cmd: RunbooksCommand) -> CliResult {
    Err(Failure::usage(anyhow::anyhow!(
        "`recover runbooks` is not built yet"
    )))
}
