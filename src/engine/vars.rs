//! The values runbook expressions read: `plan.*` from the plan, `params.*` from the
//! runbook, and signal names from the latest metrics snapshot. One lookup, so checks,
//! abort conditions and quantities all see the same numbers.

use crate::metrics::signal::Snapshot;
use crate::plan::vars::plan_var;
use crate::plan::{Plan, PlanConfig, PlanInputs};
use crate::runbook::action::Quantity;
use crate::runbook::expr::Value;
use std::collections::BTreeMap;

/// A quantity that has no number in this run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QuantityError {
    #[error("`{expr}` needs {} which the plan does not have", names.join(", "))]
    Missing { expr: String, names: Vec<String> },
    #[error("`{expr}` gave {got}, not a number")]
    NotANumber { expr: String, got: String },
}

/// Plan figures and runbook params, fixed for a run.
#[derive(Debug, Clone)]
pub struct Fixed {
    pub plan: Plan,
    pub inputs: PlanInputs,
    pub config: PlanConfig,
    pub params: BTreeMap<String, f64>,
    /// The replica the run's verdict named slow (a slow-replica run), for
    /// `restart.batched` with `replicas: slow`.
    pub slow_replica: Option<String>,
}

impl Fixed {
    pub fn get(&self, name: &str) -> Option<f64> {
        if let Some(p) = name.strip_prefix("params.") {
            return self.params.get(p).copied();
        }
        (plan_var(name)?.read)(&self.plan, &self.inputs, &self.config)
    }

    /// Look up a name in the plan/params, then in the snapshot.
    pub fn lookup<'a>(&'a self, snap: Option<&'a Snapshot>) -> impl Fn(&str) -> Option<f64> + 'a {
        move |name: &str| self.get(name).or_else(|| snap.and_then(|s| s.get(name)))
    }

    /// Resolve a quantity (plan and params only).
    pub fn quantity(&self, q: &Quantity) -> Result<f64, QuantityError> {
        match q.0.eval(&|n| self.get(n)) {
            Value::Number(v) if v.is_finite() => Ok(v),
            Value::Missing(names) => Err(QuantityError::Missing {
                expr: q.0.to_string(),
                names,
            }),
            other => Err(QuantityError::NotANumber {
                expr: q.0.to_string(),
                got: format!("{other:?}"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::make_plan;
    use crate::plan::vars::PLAN_VARS;

    /// Every variable the validator accepts has a value in a run, and nothing else does.
    #[test]
    fn every_plan_variable_the_validator_knows_has_a_value() {
        let inputs = PlanInputs {
            arrival_rate: 500.0,
            capacity_cold: 100.0,
            k: 4.0,
            capacity: Some(200.0),
            demand: Some(17.0),
        };
        let config = PlanConfig::default();
        let fixed = Fixed {
            plan: make_plan(&inputs, &config),
            inputs,
            config,
            params: BTreeMap::new(),
            slow_replica: None,
        };
        for v in PLAN_VARS {
            assert!(v.name.starts_with("plan."), "{}", v.name);
            assert!(fixed.get(v.name).is_some(), "{} has no value", v.name);
            let rb = format!(
                "apiVersion: recover/v1\nkind: Runbook\nmetadata: {{ name: t }}\nspec:\n  target: svc\n  signals: {{ x: {{ scrape: gate_x }} }}\n  steps:\n    - name: s\n      action: gate.limit\n      with: {{ rate: '{}' }}\n",
                v.name
            );
            crate::runbook::parse_str("t.yaml", &rb)
                .unwrap_or_else(|e| panic!("the validator refuses {}: {e}", v.name));
        }
        assert_eq!(fixed.get("plan.nonsense"), None);
        let names: std::collections::BTreeSet<_> = PLAN_VARS.iter().map(|v| v.name).collect();
        assert_eq!(names.len(), PLAN_VARS.len(), "duplicate names");
    }
}
