//! Runs the runbook against the stuck system through the engine, in-process, on the local
//! platform whose inventory the rehearsal generates.
//!
//! Why it exists: the rehearsal proves the real procedure, so it must go through the same
//! engine an on-call engineer runs; this module is the one seam between the rehearsal and
//! the engine, turning the engine's result into report steps on the rehearsal clock.

use super::report::StepRecord;
use super::stage::Stage;
use crate::detect::Verdict;
use crate::plan::Plan;
use std::path::Path;

/// What the runbook did.
#[derive(Debug, Clone, Default)]
pub struct RunbookOutcome {
    /// Steps on the rehearsal clock.
    pub steps: Vec<StepRecord>,
    /// Relapses the engine saw and stepped back from during readmission.
    pub relapses: u32,
    /// Queued requests the drain step reported dropping.
    pub drained: Option<u64>,
    /// The engine's own error, if the run failed or aborted.
    pub error: Option<String>,
    /// When the engine was started (rehearsal clock), even if it did nothing.
    pub started_s: f64,
}

/// Run `runbook` against `stage`'s system.
pub async fn run_runbook(
    stage: &mut Stage,
    runbook: &str,
    _runbook_dir: Option<&Path>,
    _verdict: &Verdict,
    _plan: &Plan,
) -> RunbookOutcome {
    let started_s = stage.clock.now_s();
    RunbookOutcome {
        started_s,
        error: Some(format!(
            "cannot run runbook {runbook}: the runbook engine and local platform (issue 5) are not on main yet"
        )),
        ..RunbookOutcome::default()
    }
}
