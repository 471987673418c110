//! `recover serve`.

use super::{CliResult, Failure};

#[derive(Debug, clap::Args)]
pub struct ServeArgs {}

pub fn run(_args: ServeArgs) -> CliResult {
    Err(Failure::usage(anyhow::anyhow!(
        "`recover serve` is not built yet"
    )))
}
