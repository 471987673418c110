//! What a step did: its figures, its actions in words and a message, gathered as it goes
//! in a [`Tally`], so a step that fails, times out or is aborted halfway still reports
//! what it did (a ramp that relapsed out reports the rates it reached).

use super::super::check::CheckState;
use super::super::status::Figures;
use super::super::vars::QuantityError;
use crate::metrics::source::MetricError;
use crate::platform::PlatformError;
use std::sync::{Arc, Mutex};

/// A step's result: figures, what it did, and a message.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct StepDone {
    pub figures: Figures,
    pub actions: Vec<String>,
    pub message: Option<String>,
}

impl StepDone {
    /// The same record, with `message` saying why the step stopped.
    pub fn stopped(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }
}

/// What a step has done so far. Actions add to it as they go; the executor keeps a
/// handle, so a timeout or an abort that drops the step still finds the figures.
#[derive(Debug, Clone, Default)]
pub struct Tally(Arc<Mutex<StepDone>>);

impl Tally {
    fn with<T>(&self, f: impl FnOnce(&mut StepDone) -> T) -> T {
        // A panic elsewhere cannot leave a StepDone half-written in a harmful way.
        let mut done = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut done)
    }

    /// Set a figure.
    pub fn set(&self, name: &str, value: f64) {
        self.with(|d| d.figures.insert(name.to_string(), value));
    }

    /// Add to a figure (absent counts as 0).
    pub fn add(&self, name: &str, value: f64) {
        self.with(|d| *d.figures.entry(name.to_string()).or_insert(0.0) += value);
    }

    /// Drop a figure that is no longer known.
    pub fn forget(&self, name: &str) {
        self.with(|d| d.figures.remove(name));
    }

    /// Record an action in words.
    pub fn did(&self, line: String) {
        self.with(|d| d.actions.push(line));
    }

    /// The step's message.
    pub fn say(&self, message: String) {
        self.with(|d| d.message = Some(message));
    }

    /// The check counters, as figures.
    pub fn check(&self, st: &CheckState) {
        self.set("measurements", st.measurements as f64);
        self.set("failures", st.failures as f64);
    }

    /// What was done so far.
    pub fn snapshot(&self) -> StepDone {
        self.with(|d| d.clone())
    }
}

/// Why a step failed.
#[derive(Debug, thiserror::Error)]
pub enum StepFailure {
    #[error(transparent)]
    Quantity(#[from] QuantityError),
    #[error(transparent)]
    Platform(#[from] PlatformError),
    /// A platform call, with what it was for.
    #[error("{what}: {source}")]
    PlatformAt { what: String, source: PlatformError },
    #[error("restarting {replica}: task failed: {message}")]
    TaskFailed { replica: String, message: String },
    #[error("check {name:?} is not defined")]
    NoSuchCheck { name: String },
    #[error("check {name}: {why}")]
    CheckFailed { name: String, why: String },
    #[error("ramp needs from > 0 and factor > 1 (got {from}, {factor})")]
    BadRamp { from: f64, factor: f64 },
    /// The ramp relapsed more often than allowed.
    #[error("{0}")]
    Relapsed(String),
    /// The journal could not be written: the action it was to record did not run (or,
    /// for a record written after, ran and is not on record), so the run stops here.
    #[error(
        "journal {path}: cannot write: {source}; the run stops: nothing acts without its record"
    )]
    Journal {
        path: String,
        source: std::io::Error,
    },
    #[error("metrics: {0}")]
    Metrics(#[from] MetricError),
    /// `replicas: slow`, but the run's verdict named no slow replica, or one the platform
    /// does not have (replaced since).
    #[error("replicas: slow: {0}")]
    NoSlowReplica(String),
}

/// A failed step: why, and what it had done by then.
#[derive(Debug, thiserror::Error)]
#[error("{failure}")]
pub struct StepError {
    #[source]
    pub failure: StepFailure,
    pub done: StepDone,
}
