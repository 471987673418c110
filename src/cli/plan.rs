//! `recover plan`.

use super::{CliResult, Failure};

#[derive(Debug, clap::Args)]
pub struct PlanArgs {}

pub fn run(_args: PlanArgs) -> CliResult {
    Err(Failure::usage(anyhow::anyhow!(
        "`recover plan` is not built yet"
    )))
}
