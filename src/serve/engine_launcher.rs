//! The real [`RunLauncher`]: runs a runbook's detection and the runbook itself with the
//! runbook engine, against the platform a route names.

use std::sync::Arc;

use super::config::ServeConfig;
use super::launcher::RunLauncher;

/// Build the launcher for `cfg`'s routes.
pub fn launcher(_cfg: &ServeConfig) -> Result<Arc<dyn RunLauncher>, String> {
    Err("`recover serve` needs the runbook engine (issue 5), which has not landed yet".into())
}
