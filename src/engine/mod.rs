//! The runbook engine: runs a runbook's steps against a platform, with checks, a journal,
//! a per-target lock, dry runs and resume.
//!
//! Decisions (check verdicts, ramp moves, restart batches, what a resumed run still has to
//! do) are pure functions in [`check`], [`ramp`], [`batches`] and [`journal::resume_point`];
//! [`executor`] and [`actions`] only carry them out through the [`Platform`] trait.
//!
//! Entry points: [`run`] for a new run and [`resume`] for one that was interrupted. Both
//! return a [`RunReport`]; the rehearsal and the webhook receiver call them in-process.

pub mod actions;
pub mod batches;
pub mod check;
pub mod executor;
pub mod history;
pub mod journal;
pub mod progress;
pub mod ramp;
pub mod report;
pub mod vars;

pub use executor::{resume, run};
pub use progress::{Observer, ProgressEvent};
pub use report::{Outcome, Phase, RunReport, StepOutcome, StepRecord};

use crate::metrics::source::{MetricError, MetricSource};
use crate::plan::{Overrides, SourcedInputs};
use crate::platform::{Platform, PlatformError, Target};
use crate::runbook::LoadedRunbook;
use std::path::PathBuf;
use std::sync::Arc;

/// Everything a run needs.
pub struct RunRequest {
    pub runbook: LoadedRunbook,
    pub platform: Arc<dyn Platform>,
    pub metrics: Arc<dyn MetricSource>,
    pub options: RunOptions,
}

/// Asked before the first action, with the dry-run preview; `false` declines the run.
pub type Confirm = Arc<dyn Fn(&RunReport) -> bool + Send + Sync>;

/// How to run.
#[derive(Clone)]
pub struct RunOptions {
    /// Print what would happen; touch nothing (no lock, no journal, no action).
    pub dry_run: bool,
    /// Where run journals live (default `./recover-runs/`).
    pub journal_dir: PathBuf,
    /// Plan inputs the operator gives, each winning over the measured one. With all of
    /// arrival rate, cold capacity and k given, the plan does not rest on the verdict: it
    /// is still observed and recorded, but need not be one the runbook's `when` allows.
    pub overrides: Overrides,
    /// Plan inputs the caller already resolved from a verdict on a full window (the
    /// webhook's check, the rehearsal's detector): the engine plans from them and takes
    /// its own short look only to record it.
    pub inputs: Option<SourcedInputs>,
    /// How to reach the target, recorded in the journal so `recover resume` can
    /// reconnect (None: the run cannot be resumed from another process).
    pub target: Option<Target>,
    /// Who starts the run, recorded in the journal (`recover serve` and its route).
    pub started_by: Option<String>,
    /// Progress events (terminal rendering, logs, the webhook's status).
    pub observer: Option<Arc<dyn Observer>>,
    /// Confirmation before the first action (None: proceed).
    pub confirm: Option<Confirm>,
    /// Timeout of a step that sets none.
    pub default_step_timeout: std::time::Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            dry_run: false,
            journal_dir: PathBuf::from("recover-runs"),
            overrides: Overrides::default(),
            inputs: None,
            target: None,
            started_by: None,
            observer: None,
            confirm: None,
            default_step_timeout: std::time::Duration::from_secs(300),
        }
    }
}

/// Why a run could not start or continue. A run that started and then failed is not an
/// error: it is a [`RunReport`] with outcome `failed` or `aborted`.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("refused: another recovery holds the lock on {target}: {holder} (run {run_id})")]
    LockHeld {
        target: String,
        holder: String,
        run_id: String,
    },
    #[error("refused: {0}")]
    Precondition(String),
    #[error("declined at the confirmation prompt; nothing was changed")]
    Declined,
    #[error("cancelled before the first action; nothing was changed")]
    Cancelled,
    #[error("journal: {0}")]
    Journal(#[from] std::io::Error),
    #[error("metrics: {0}")]
    Metrics(#[from] MetricError),
    #[error("platform: {0}")]
    Platform(PlatformError),
    #[error("{0}")]
    Runbook(#[from] crate::runbook::RunbookError),
    #[error("resume: {0}")]
    Resume(String),
}

impl From<PlatformError> for EngineError {
    fn from(e: PlatformError) -> Self {
        match e {
            PlatformError::LockHeld {
                target,
                holder,
                run_id,
            } => EngineError::LockHeld {
                target,
                holder,
                run_id,
            },
            other => EngineError::Platform(other),
        }
    }
}

impl EngineError {
    /// The exit code this error deserves.
    pub fn exit(&self) -> crate::exit::Exit {
        use crate::exit::Exit;
        match self {
            EngineError::LockHeld { .. } | EngineError::Precondition(_) | EngineError::Declined => {
                Exit::Refused
            }
            EngineError::Runbook(_) => Exit::Usage,
            _ => Exit::Failed,
        }
    }
}
