//! `recover detect`.

use super::{CliResult, Failure};

#[derive(Debug, clap::Args)]
pub struct DetectArgs {}

pub fn run(_args: DetectArgs) -> CliResult {
    Err(Failure::usage(anyhow::anyhow!(
        "`recover detect` is not built yet"
    )))
}
