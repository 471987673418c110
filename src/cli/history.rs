//! `recover history`.

use super::{CliResult, Failure};

#[derive(Debug, clap::Args)]
pub struct HistoryArgs {}

pub fn run(_args: HistoryArgs) -> CliResult {
    Err(Failure::usage(anyhow::anyhow!(
        "`recover history` is not built yet"
    )))
}
