//! `recover simulate`.

use super::{CliResult, Failure};

#[derive(Debug, clap::Args)]
pub struct SimulateArgs {}

pub fn run(_args: SimulateArgs) -> CliResult {
    Err(Failure::usage(anyhow::anyhow!(
        "`recover simulate` is not built yet"
    )))
}
