//! The plan values a runbook expression may read (`plan.admit_rate`, ...): one table, read
//! by the runbook validator (which names are known) and by the engine (what each is
//! worth), so the two cannot disagree.

use super::{Plan, PlanConfig, PlanInputs};

/// One `plan.*` variable: its name and how to read it.
pub struct PlanVar {
    pub name: &'static str,
    /// None when the plan has no such figure (capacity unknown).
    pub read: fn(&Plan, &PlanInputs, &PlanConfig) -> Option<f64>,
}

/// Every `plan.*` variable.
pub const PLAN_VARS: &[PlanVar] = &[
    PlanVar {
        name: "plan.admit_rate",
        read: |p, _, _| Some(p.admit_rate),
    },
    PlanVar {
        name: "plan.shed_fraction",
        read: |p, _, _| Some(p.shed_fraction),
    },
    PlanVar {
        name: "plan.step_factor",
        read: |_, _, c| Some(c.step_factor),
    },
    PlanVar {
        name: "plan.step_hold_s",
        read: |_, _, c| Some(c.step_hold.as_secs_f64()),
    },
    PlanVar {
        name: "plan.arrival_rate",
        read: |_, i, _| Some(i.arrival_rate),
    },
    PlanVar {
        name: "plan.capacity",
        read: |_, i, _| i.capacity,
    },
    PlanVar {
        name: "plan.capacity_cold",
        read: |_, i, _| Some(i.capacity_cold),
    },
    PlanVar {
        name: "plan.k",
        read: |_, i, _| Some(i.k),
    },
    PlanVar {
        name: "plan.clear_rate",
        read: |p, _, _| Some(p.clear_rate),
    },
    PlanVar {
        name: "plan.ramp_end_rate",
        read: |p, _, _| Some(p.ramp_end_rate),
    },
];

/// The variable called `name`, if there is one.
pub fn plan_var(name: &str) -> Option<&'static PlanVar> {
    PLAN_VARS.iter().find(|v| v.name == name)
}

/// The names, for messages.
pub fn plan_var_names() -> impl Iterator<Item = &'static str> {
    PLAN_VARS.iter().map(|v| v.name)
}
