//! `recover gate`.

use super::{CliResult, Failure};

#[derive(Debug, clap::Args)]
pub struct GateArgs {}

pub fn run(_args: GateArgs) -> CliResult {
    Err(Failure::usage(anyhow::anyhow!(
        "`recover gate` is not built yet"
    )))
}
