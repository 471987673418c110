//! The runbook engine: runs a runbook's steps against a platform, with checks, a journal,
//! a per-target lock, dry runs and resume.
//!
//! Decisions (check verdicts, ramp moves, restart batches, what a resumed run still has to
//! do) are pure functions in [`check`], [`ramp`], [`batches`] and [`journal::resume_point`];
//! [`planning`] decides before acting; [`executor`] and [`actions`] only carry it out
//! through the [`Platform`] trait.
//!
//! Entry points: [`run`] for a new run and [`resume`] for one that was interrupted. Both
//! return a [`RunReport`]; the rehearsal and the webhook receiver call them in-process.

pub mod actions;
pub mod batches;
pub mod check;
pub mod executor;
pub mod history;
pub mod journal;
pub mod lock_loss;
pub mod mirror;
pub mod observed;
pub mod planning;
pub mod preflight;
pub mod prior;
pub mod progress;
pub mod ramp;
pub mod recorded;
pub mod report;
pub mod restart;
pub mod status;
mod steps;
pub mod vars;
pub mod warm_readmit;

pub use executor::{resume, run};
pub use progress::{Observer, ProgressEvent};
pub use report::{RunReport, StepRecord};
pub use status::{Figures, Outcome, Phase, StepOutcome};

use crate::detect::VerdictKind;
use crate::metrics::source::{MetricError, MetricSource};
use crate::plan::inputs::MissingInputs;
use crate::plan::{Overrides, PlanError, SourcedInputs};
use crate::platform::{Platform, PlatformError, Target};
use crate::runbook::LoadedRunbook;
use std::path::PathBuf;
use std::sync::Arc;

/// How long a step that sets no `timeout` may take.
pub const DEFAULT_STEP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5 * 60);

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
    /// Asked for plan inputs nothing else supplied (an operator at a terminal); None:
    /// a missing input refuses the run.
    pub ask: Option<prior::Ask>,
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
            ask: None,
            default_step_timeout: DEFAULT_STEP_TIMEOUT,
        }
    }
}

/// Why a run could not start or continue. Every one means nothing was changed: a run
/// that acted and then failed is not an error but a [`RunReport`] with outcome `failed` or
/// `aborted`.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("refused: another recovery holds the lock on {target}: {holder} (run {run_id})")]
    LockHeld {
        target: String,
        holder: String,
        run_id: String,
    },
    #[error("refused: the detector says {}; runbook {runbook} runs only when it says {} [{evidence}] (give the plan inputs by hand to override)", verdict.as_str(), when.iter().map(|w| w.as_str()).collect::<Vec<_>>().join(" or "))]
    NotWhen {
        verdict: VerdictKind,
        runbook: String,
        when: Vec<VerdictKind>,
        evidence: String,
    },
    #[error("refused: the detector found {source} [{evidence}]")]
    MissingInputs {
        source: MissingInputs,
        evidence: String,
    },
    #[error("refused: cannot plan from these inputs: {0}")]
    BadInputs(#[source] PlanError),
    #[error("refused: {0}")]
    Preflight(preflight::Unmet),
    #[error("refused: run {run_id} already finished ({outcome:?}); nothing to resume")]
    AlreadyFinished { run_id: String, outcome: Outcome },
    #[error(
        "resume: run {run_id} stopped before it decided a plan; nothing was done, start a new run"
    )]
    NotDecided { run_id: String },
    #[error("declined at the confirmation prompt; nothing was changed")]
    Declined,
    #[error("cancelled before the first action; nothing was changed")]
    Cancelled,
    #[error("journal: {0}")]
    Journal(#[from] std::io::Error),
    #[error("resume: {0}")]
    BadJournal(#[from] journal::JournalError),
    #[error("metrics: {0}")]
    Metrics(#[from] MetricError),
    #[error("refused: the runbook's detection windows do not fit the metrics: {0}")]
    Windows(#[from] crate::detect::windows::WindowError),
    #[error("platform: {0}")]
    Platform(#[source] PlatformError),
    #[error("{0}")]
    Runbook(#[from] crate::runbook::RunbookError),
}

impl From<crate::detect::WatchError> for EngineError {
    fn from(e: crate::detect::WatchError) -> Self {
        match e {
            crate::detect::WatchError::Window(e) => EngineError::Windows(e),
            crate::detect::WatchError::Metrics(e) => EngineError::Metrics(e),
        }
    }
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
    /// A decision not to act (lock held, verdict or inputs not good enough, declined,
    /// cancelled), as opposed to being unable to start (metrics, platform, journal, a bad
    /// runbook), which needs a human to look.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            EngineError::LockHeld { .. }
                | EngineError::NotWhen { .. }
                | EngineError::MissingInputs { .. }
                | EngineError::BadInputs(_)
                | EngineError::Preflight(_)
                | EngineError::AlreadyFinished { .. }
                | EngineError::NotDecided { .. }
                | EngineError::Declined
                | EngineError::Cancelled
        )
    }

    /// The exit code this error deserves: bad input is a usage error; everything else
    /// changed nothing, so a hook can tell "could not start" (3) from "recovery failed"
    /// (1, a report, never an error).
    pub fn exit(&self) -> crate::exit::Exit {
        use crate::exit::Exit;
        match self {
            EngineError::Runbook(_) | EngineError::BadJournal(_) | EngineError::Windows(_) => {
                Exit::Usage
            }
            _ => Exit::Refused,
        }
    }
}
