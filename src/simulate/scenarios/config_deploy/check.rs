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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A 15 s outage catches every one of 500 workers polling every 14 s.
    fn caught_by_an_outage() -> SystemParams {
        SystemParams {
            clients: 500,
            interval: Duration::from_secs(14),
            timeout: Duration::from_secs(1),
            capacity: 4000.0,
            overload_factor: 1.0,
            cold_factor: 1.0,
            outage_at: Duration::from_secs(10),
            outage: Duration::from_secs(15),
            duration: Duration::from_secs(60),
            settle_window: Duration::from_secs(5),
            ..SystemParams::default()
        }
    }

    /// Polls keep their phases after an outage, as the demo workers' slots do: the
    /// workers it caught, all answered within a second of its end, come back at their own
    /// slots, not all together one interval later (a spike the detector would read as
    /// the trigger still on).
    #[test]
    fn polls_after_an_outage_keep_their_phases() {
        let r = run_system(&caught_by_an_outage(), None, 1);
        let demand = 500.0 / 14.0;
        let after: Vec<u64> = r.series[27..].iter().map(|s| s.first).collect();
        assert!(
            after.iter().all(|&n| (n as f64) < 2.0 * demand),
            "first attempts per second after the outage: {after:?}"
        );
    }

    /// The time to recover reads in `recovery_step`: a system that gets out by itself
    /// (300 req/s, k 1.5, 8 slots) reads 2 s in whole seconds and 1.5 s in half seconds:
    /// its last failed attempt went out in the first half of a second.
    #[test]
    fn the_time_to_recover_reads_in_its_step() {
        let p = SystemParams {
            capacity: 300.0,
            overload_factor: 1.5,
            cold_factor: 0.5,
            warm_after_requests: 300,
            concurrency: Some(8),
            ..caught_by_an_outage()
        };
        let whole = run_system(&p, None, 1).recovery.time_to_recover_s;
        let half = SystemParams {
            recovery_step: Duration::from_millis(500),
            ..p
        };
        let half = run_system(&half, None, 1).recovery.time_to_recover_s;
        assert_eq!((whole, half), (Some(2.0), Some(1.5)));
    }
}
