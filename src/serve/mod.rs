//! `recover serve`: an Alertmanager webhook receiver that checks for itself before it runs
//! a runbook, and never becomes a remediation storm.
//!
//! An alert is a hint, not a verdict. For each firing alert the receiver finds its route
//! (runbook + target), then: joins a run or detection already in progress on the target,
//! or refuses (breaker, a failed run's limit still on the gate, budget, cooldown), or runs the runbook's own detection; only a
//! Stuck verdict starts a run (a dry run in observe mode). Resolved alerts never act.
//!
//! Layout: [`config`] (serve.yaml), [`alert`] (payload), [`auth`], [`policy`] (pure
//! decisions), [`standing`] (a failed run's limit), [`budget`], [`runs`] (registry), [`state`] (where budgets and breakers are
//! kept: a file or a ConfigMap), [`receiver`] (carrying decisions out),
//! [`http`] (routes), [`metrics`], [`launcher`] (the seam to the engine).

pub mod alert;
pub mod answer;
pub mod auth;
pub mod budget;
pub mod config;
pub mod engine_launcher;
pub mod http;
pub mod launcher;
pub mod log_lines;
pub mod metrics;
pub mod notify;
pub mod policy;
pub mod receiver;
pub mod replay;
pub mod runs;
pub mod standing;
pub mod state;

pub use launcher::{CheckRequest, LaunchRequest, RunLauncher, RunOutcome, RunSummary};
pub use policy::Mode;
pub use receiver::Receiver;
