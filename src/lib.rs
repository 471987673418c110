//! `recover`: an incident-response runbook engine and recovery controller for stuck
//! overloads (metastable failures).
//!
//! Data flows one way, and the modules are laid out in that order:
//!
//! ```text
//! metrics (sources) -> detect (verdict) -> plan (shed, ramp) -> engine (runbook steps)
//!                                                              -> platform (local, kube) + gate
//! ```
//!
//! Beside that path live the components the rehearsal and the tests drive for real: the
//! admission [`gate`], the [`demo`] victim system, the [`rehearse`] orchestration, the
//! deterministic [`simulate`] model and the [`serve`] webhook receiver.

pub mod demo;
pub mod detect;
pub mod engine;
pub mod exit;
pub mod gate;
pub mod metrics;
pub mod plan;
pub mod platform;
pub mod postmortem;
pub mod rehearse;
pub mod retry;
pub mod runbook;
pub mod serve;
pub mod simulate;
pub mod util;
