//! `recover --runbook NAME ...`: run a runbook against a target.

use super::{CliResult, Failure};

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Runbook name (looked up in runbooks/ and --runbook-dir) or path.
    #[arg(long)]
    pub runbook: Option<String>,
}

pub fn run(args: RunArgs) -> CliResult {
    match args.runbook {
        None => Err(Failure::usage(anyhow::anyhow!(
            "nothing to do: give --runbook NAME or a subcommand (see recover --help)"
        ))),
        Some(_) => Err(Failure::usage(anyhow::anyhow!(
            "running runbooks is not built yet"
        ))),
    }
}
