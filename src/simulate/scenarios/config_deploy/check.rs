//! A plan checked on the model before acting: `recover plan --check-with-sim`, the
//! rehearsal's prediction, and `run_system` for the full series from code.

use super::engine;
use super::params::SystemParams;
use super::report::SystemReport;
use crate::plan::Plan;
use serde::Serialize;

/// Run the continuous model; with a plan, its procedure starts at `params.plan_at`.
pub fn run_system(params: &SystemParams, plan: Option<&Plan>, seed: u64) -> SystemReport {
    let p = SystemParams {
        plan: plan.cloned(),
        ..params.clone()
    };
    engine::run(&p, seed)
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
    p.plan = Some(plan.clone());
    let r = engine::run(&p, seed);
    PlanCheck {
        recovers: r.recovery.recovered,
        relapses: r.relapses,
        time_to_recover_s: r.recovery.time_to_recover_s,
    }
}
