//! `recover rehearse`.

use super::{CliResult, Failure};

#[derive(Debug, clap::Args)]
pub struct RehearseArgs {}

pub fn run(_args: RehearseArgs) -> CliResult {
    Err(Failure::usage(anyhow::anyhow!(
        "`recover rehearse` is not built yet"
    )))
}
