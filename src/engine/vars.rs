//! The values runbook expressions read: `plan.*` from the plan, `params.*` from the
//! runbook, and signal names from the latest metrics snapshot. One lookup, so checks,
//! abort conditions and quantities all see the same numbers.

use crate::metrics::signal::Snapshot;
use crate::plan::{Plan, PlanConfig, PlanInputs};
use crate::runbook::action::Quantity;
use crate::runbook::expr::Value;
use std::collections::BTreeMap;

/// Plan figures and runbook params, fixed for a run.
#[derive(Debug, Clone)]
pub struct Fixed {
    pub plan: Plan,
    pub inputs: PlanInputs,
    pub config: PlanConfig,
    pub params: BTreeMap<String, f64>,
}

impl Fixed {
    pub fn get(&self, name: &str) -> Option<f64> {
        if let Some(p) = name.strip_prefix("params.") {
            return self.params.get(p).copied();
        }
        let v = match name.strip_prefix("plan.")? {
            "admit_rate" => self.plan.admit_rate,
            "shed_fraction" => self.plan.shed_fraction,
            "step_factor" => self.config.step_factor,
            "step_hold_s" => self.config.step_hold.as_secs_f64(),
            "arrival_rate" => self.inputs.arrival_rate,
            "capacity" => self.inputs.capacity?,
            "capacity_cold" => self.inputs.capacity_cold,
            "k" => self.inputs.k,
            "clear_rate" => self.plan.clear_rate,
            "ramp_end_rate" => self.plan.ramp_end_rate,
            _ => return None,
        };
        Some(v)
    }

    /// Look up a name in the plan/params, then in the snapshot.
    pub fn lookup<'a>(&'a self, snap: Option<&'a Snapshot>) -> impl Fn(&str) -> Option<f64> + 'a {
        move |name: &str| self.get(name).or_else(|| snap.and_then(|s| s.get(name)))
    }

    /// Resolve a quantity (plan and params only).
    pub fn quantity(&self, q: &Quantity) -> Result<f64, String> {
        match q.0.eval(&|n| self.get(n)) {
            Value::Number(v) if v.is_finite() => Ok(v),
            Value::Missing(names) => Err(format!(
                "`{}` needs {} which the plan does not have",
                q.0,
                names.join(", ")
            )),
            other => Err(format!("`{}` gave {other:?}, not a number", q.0)),
        }
    }
}
