//! `recover resume`.

use super::{CliResult, Failure};

#[derive(Debug, clap::Args)]
pub struct ResumeArgs {}

pub fn run(_args: ResumeArgs) -> CliResult {
    Err(Failure::usage(anyhow::anyhow!(
        "`recover resume` is not built yet"
    )))
}
