//! The seam between the receiver and the runbook engine. The receiver decides; a
//! [`RunLauncher`] carries out the two things that touch the world: run a runbook's own
//! detection, and run the runbook. Keeping them behind a trait lets every decision be
//! tested over real HTTP with a launcher that records what it was asked to do.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

use crate::detect::Verdict;
use crate::platform::Target;

/// Run the detection of `runbook` against `target`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckRequest {
    pub route: String,
    pub runbook: String,
    pub target: Target,
    /// Read the signals from this Prometheus's history instead of the target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<String>,
}

/// Run `runbook` against `target`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaunchRequest {
    /// The receiver's id for the run (also the engine's, where the engine accepts one).
    pub run_id: String,
    pub route: String,
    pub runbook: String,
    pub target: Target,
    /// Observe mode: plan and print, touch nothing.
    pub dry_run: bool,
    /// The Stuck verdict that justified the run.
    pub verdict: Verdict,
}

/// How a run ended, as the breaker counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    Succeeded,
    Failed,
    Aborted,
    /// Refused before acting (the target's lock is held, a precondition is unmet).
    Refused,
    /// A dry run completed (observe mode).
    DryRun,
}

impl RunOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Succeeded => "succeeded",
            RunOutcome::Failed => "failed",
            RunOutcome::Aborted => "aborted",
            RunOutcome::Refused => "refused",
            RunOutcome::DryRun => "dry_run",
        }
    }

    /// Does this outcome count towards the breaker?
    pub fn is_failure(self) -> bool {
        matches!(self, RunOutcome::Failed | RunOutcome::Aborted)
    }
}

/// What a finished run reports back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    pub outcome: RunOutcome,
    pub message: String,
    /// The run's JSONL journal, served by `GET /runs/ID`.
    pub journal: Option<PathBuf>,
    /// The engine's own report (the plan with its numbers, each step): for a dry run,
    /// this is the record of what would have been done.
    pub details: Option<serde_json::Value>,
}

/// Detection could not be run at all (the receiver treats it as an Unknown verdict).
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Runbook(#[from] crate::runbook::RunbookError),
    #[error(transparent)]
    Connect(#[from] crate::platform::ConnectError),
    #[error("metrics: {0}")]
    Metrics(#[from] crate::metrics::source::MetricError),
    #[error("the runbook's detection windows do not fit the metrics: {0}")]
    Windows(#[from] crate::detect::windows::WindowError),
    #[error("reading the gate's limit: {0}")]
    Gate(#[from] crate::platform::PlatformError),
    #[error("this launcher cannot read a gate")]
    NoGate,
}

impl From<crate::detect::WatchError> for LaunchError {
    fn from(e: crate::detect::WatchError) -> Self {
        match e {
            crate::detect::WatchError::Window(e) => LaunchError::Windows(e),
            crate::detect::WatchError::Metrics(e) => LaunchError::Metrics(e),
        }
    }
}

/// Starts real things; the receiver only decides.
#[async_trait::async_trait]
pub trait RunLauncher: Send + Sync {
    /// Run the runbook's detection against the target now and return its verdict.
    async fn check(&self, req: &CheckRequest) -> Result<crate::detect::Verdict, LaunchError>;
    /// Run the runbook to the end (or as a dry run) and report how it ended.
    async fn launch(&self, req: &LaunchRequest) -> RunSummary;
    /// The limit in force on the target's gate now (to tell whether a failed run's limit
    /// still stands). Default: the launcher cannot read gates.
    async fn gate_limit(&self, _target: &Target) -> Result<crate::gate::limit::Limit, LaunchError> {
        Err(LaunchError::NoGate)
    }
    /// Where the journal of a run will be, if known before it ends.
    fn journal_path(&self, _req: &LaunchRequest) -> Option<PathBuf> {
        None
    }
    /// The receiver is stopping: abort runs in progress cleanly (their on_failure steps
    /// still run) so none is left half-done without them.
    fn cancel_all(&self) {}
}
