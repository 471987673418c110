//! `recover simulate`: a seeded, deterministic model of clients, gate and server for
//! what-if questions ("if I change only one thing, which one?") and for checking a plan's
//! shed and ramp before acting on a real system.
//!
//! Two models share the concepts of the real components: a tick model small enough to check
//! by hand (`retry-storm`), and a continuous-time model of the demo system
//! (`config-deploy`: workers, gate, config service, a deploy outage) driven by
//! [`SystemParams`]. Output is byte for byte stable for a seed: the PRNG is our own.

pub mod compare;
mod engine;
pub mod error;
pub mod from_plan;
pub mod kernel;
pub mod model;
pub mod overrides;
pub mod params;
pub mod plot;
pub mod policy;
pub mod procedure;
pub mod report;
pub mod scenarios;
pub mod text;
mod wheel;

pub use error::SimError;
pub use params::SystemParams;
pub use policy::Policy;
pub use report::{Second, SystemReport, Totals};
pub use scenarios::retry_storm::{StormParams, StormReport, StormTick};
pub use scenarios::{Report, Scenario};

use crate::plan::Plan;
use serde::Serialize;

/// The seed used when none is given.
pub const DEFAULT_SEED: u64 = 1;

/// Run the continuous model; with a plan, its procedure starts at `params.plan_at`.
pub fn run_system(params: &SystemParams, plan: Option<&Plan>, seed: u64) -> SystemReport {
    engine::run(params, plan, seed, "custom")
}

/// What the model predicts for a plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanCheck {
    /// Failure-free (no timeouts, gate open, nothing rejected) for the settle window at the
    /// end of the run.
    pub recovers: bool,
    /// Times a clean ramp step turned into timeouts (the procedure then steps back).
    pub relapses: u32,
    /// Seconds from the procedure's start until the final failure-free stretch began.
    pub time_to_recover_s: Option<f64>,
}

/// Predict whether `plan`, started at `system.plan_at`, gets `system` out of its stuck
/// state without relapse, and how fast. `system` describes the service, the clients and
/// the trigger (the defaults are the worked example: 500 workers, a 200 req/s service).
pub fn check_plan(system: &SystemParams, plan: &Plan, seed: u64) -> PlanCheck {
    let mut p = system.clone();
    // The run must outlast the whole procedure plus the settle window, or a good plan
    // would be judged unfinished.
    let ramp: std::time::Duration = plan.ramp.iter().map(|s| s.hold).sum();
    let admit = p
        .plan_admit_hold
        .unwrap_or(std::time::Duration::from_secs(10));
    let needed = p.plan_at + admit + ramp * 2 + p.settle_window + p.interval * 2;
    if p.duration < needed {
        p.duration = needed;
    }
    let r = engine::run(&p, Some(plan), seed, "check-plan");
    PlanCheck {
        recovers: r.recovered,
        relapses: r.relapses,
        time_to_recover_s: r.time_to_recover_s,
    }
}
