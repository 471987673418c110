//! The model's procedure readmits while the caches warm after a drain alone, as the
//! engine's `cache.warm` does (`engine::warm_readmit`); after a restart it holds the plan's
//! rate through the warming.

use super::engine::run;
use super::params::SystemParams;
use super::readmission::shipped_runbook_for_tests;
use super::readmission::Readmission;
use crate::plan::{make_plan, PlanInputs};
use std::time::Duration;

/// The default system stuck after its outage, the shipped runbook's procedure from 60 s:
/// drained (and restarted when `restart`), warmed for 5 s, then readmitted. The gate's
/// rate at the end of each second from 61 s to 64 s, and the plan's admit rate.
fn gate_while_warming(restart: bool) -> (Vec<Option<f64>>, f64) {
    let base = SystemParams::default();
    let inputs = PlanInputs {
        arrival_rate: 400.0,
        capacity_cold: base.capacity * base.cold_factor,
        k: base.overload_factor,
        capacity: Some(base.capacity),
        demand: None,
    };
    let rb = shipped_runbook_for_tests();
    let plan = make_plan(&inputs, &rb.plan);
    let admit = plan.admit_rate;
    let p = SystemParams {
        plan_restart: restart,
        plan_warm: Some(Duration::from_secs(5)),
        plan_readmission: Readmission::of(&rb, &inputs),
        plan: Some(plan),
        ..base
    };
    let report = run(&p, 1);
    let rates = report
        .series
        .iter()
        .filter(|s| (61..65).contains(&s.t))
        .map(|s| s.gate_rate)
        .collect();
    (rates, admit)
}

/// Drained alone, the service answers at the warmth it kept: the gate goes to the ramp's
/// start rate there (0.9 x what it answers now, above the plan's rate) for the warming,
/// not the plan's rate for a cold, overloaded service.
#[test]
fn after_a_drain_alone_the_model_readmits_while_the_caches_warm() {
    let (rates, admit) = gate_while_warming(false);
    assert_eq!(rates.len(), 4);
    for r in &rates {
        let r = r.expect("a limit while warming");
        assert!(
            r > admit * 1.5,
            "{r} while warming vs the plan's {admit}: {rates:?}"
        );
    }
    let (rates, admit) = gate_while_warming(true);
    assert!(
        rates.iter().all(|r| *r == Some(admit)),
        "{rates:?} vs {admit}"
    );
}
