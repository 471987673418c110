//! `recover demo config-service` and `recover demo workers`.

use super::{CliResult, Failure};

#[derive(Debug, clap::Subcommand)]
pub enum DemoCommand {
    /// The victim: a FIFO config service without load shedding.
    ConfigService(ConfigServiceArgs),
    /// The clients: N pollers with a retry policy.
    Workers(WorkersArgs),
}

#[derive(Debug, clap::Args)]
pub struct ConfigServiceArgs {}

#[derive(Debug, clap::Args)]
pub struct WorkersArgs {}

pub fn run(_cmd: DemoCommand) -> CliResult {
    Err(Failure::usage(anyhow::anyhow!(
        "`recover demo` is not built yet"
    )))
}
