//! The simulator's prediction for the same system and plan, for the report's
//! `predicted_time_to_recover_s`.
//!
//! Why it exists: a rehearsal whose measured recovery is far from the model's prediction
//! says that either the model or the procedure is wrong; both are worth knowing.

use super::scenario::Scenario;
use crate::plan::Plan;
use crate::simulate::{check_plan, params::SystemParams};
use std::time::Duration;

/// How long the engine's ramp stands at the admit rate: its check's windows must first
/// leave the drain and the restart behind (the built-in `*_recent` signals' window), then
/// the check needs its passes (the plan's step hold).
pub fn admit_hold(plan: &Plan) -> Duration {
    let window = crate::util::duration::parse(crate::detect::default_signals::RECENT_WINDOW)
        .unwrap_or_default();
    window + plan.ramp.first().map_or(Duration::ZERO, |s| s.hold)
}

/// The scenario as simulator parameters: the outage at 10 s, the plan `plan_after` after
/// the outage ended (when the rehearsal's runbook started).
pub fn system_params(sc: &Scenario, plan_after: Duration) -> SystemParams {
    let outage_at = Duration::from_secs(10);
    SystemParams {
        clients: sc.workers.count,
        interval: sc.workers.interval,
        timeout: sc.workers.timeout,
        retry_delay: sc.retry_delay(),
        capacity: sc.capacity_per_s(),
        overload_factor: sc.service.overload_factor,
        cold_factor: 1.0 / sc.service.cold_factor.max(1.0),
        warmup: sc.service.warm_duration,
        outage_at,
        outage: sc.outage,
        plan_at: outage_at + sc.outage + plan_after,
        settle_window: sc.hold,
        ..SystemParams::default()
    }
}

/// Predicted seconds from the plan's start to recovery; `None` if the model says it does
/// not recover.
pub fn predicted_time_to_recover(sc: &Scenario, plan: &Plan, plan_after: Duration) -> Option<f64> {
    let p = SystemParams {
        plan_admit_hold: Some(admit_hold(plan)),
        ..system_params(sc, plan_after)
    };
    let check = check_plan(&p, plan, 1);
    check.recovers.then_some(check.time_to_recover_s).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::RampStep;

    #[test]
    fn the_admit_rate_stands_for_the_checks_window_and_its_passes() {
        let plan = Plan {
            ramp: vec![RampStep {
                rate_per_s: 20.0,
                hold: Duration::from_secs(3),
            }],
            ..Plan::default()
        };
        assert_eq!(admit_hold(&plan), Duration::from_secs(6));
    }
}
