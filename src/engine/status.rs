//! Where a run and its steps stand: the phase a step belongs to, how a step and a run
//! ended, and the figures a step reports. The journal records these and the run report
//! shows them, so they live below both.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Figures a step reports (dropped requests, rates, counts); a figure not known is absent,
/// never 0.
pub type Figures = BTreeMap<String, f64>;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Succeeded,
    Failed,
    Aborted,
    /// A dry run: nothing was done.
    Planned,
}

/// Which list a step came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Main,
    OnFailure,
}

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepOutcome {
    Succeeded,
    Failed,
    Aborted,
    TimedOut,
    /// Done by an earlier attempt of this run (resume).
    AlreadyDone,
    /// Dry run: what would happen.
    Planned,
    Skipped,
}

impl Outcome {
    /// How a person says it.
    pub fn words(&self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::Aborted => "aborted",
            Outcome::Planned => "planned (dry run)",
        }
    }
}

impl StepOutcome {
    /// How a person says it.
    pub fn words(&self) -> &'static str {
        match self {
            StepOutcome::Succeeded => "succeeded",
            StepOutcome::Failed => "failed",
            StepOutcome::Aborted => "aborted",
            StepOutcome::TimedOut => "timed out",
            StepOutcome::AlreadyDone => "already done",
            StepOutcome::Planned => "planned",
            StepOutcome::Skipped => "skipped",
        }
    }
}
