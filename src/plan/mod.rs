//! The shed plan: how much load to shed so the service can leave the stuck state, and the
//! readmission ramp, with the arithmetic shown.
//!
//! CONTRACT (lead): `make_plan`, `PlanInputs`, `PlanConfig`, `Plan`, `RampStep` are what the
//! engine and the rehearsal call. Fields may be added; keep these.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Planning settings; the `spec.plan` section of a runbook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlanConfig {
    /// Admit this fraction of capacity_cold / k, leaving room for estimation error.
    pub headroom: f64,
    /// Each ramp step multiplies the admitted rate by this.
    pub step_factor: f64,
    /// How long each ramp step is held (and checked) before the next.
    #[serde(with = "crate::util::duration::serde_human")]
    pub step_hold: Duration,
}

impl Default for PlanConfig {
    fn default() -> Self {
        PlanConfig {
            headroom: 0.9,
            step_factor: 1.5,
            step_hold: Duration::from_secs(5),
        }
    }
}

/// The measured (or given) numbers a plan is computed from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PlanInputs {
    pub arrival_rate: f64,
    pub capacity_cold: f64,
    pub k: f64,
    /// Healthy capacity; the ramp ends when admitting this much (or all demand).
    pub capacity: Option<f64>,
}

/// One readmission step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RampStep {
    pub rate_per_s: f64,
    #[serde(with = "crate::util::duration::serde_human")]
    pub hold: Duration,
}

/// The plan, with the arithmetic that produced it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub shed_fraction: f64,
    pub admit_rate: f64,
    pub ramp: Vec<RampStep>,
    pub arithmetic: Vec<String>,
}

/// Compute the shed: `shed_fraction = max(0, 1 - (capacity_cold / k) / arrival_rate)`.
pub fn make_plan(inputs: &PlanInputs, cfg: &PlanConfig) -> Plan {
    let target = inputs.capacity_cold / inputs.k.max(1.0) * cfg.headroom;
    let shed = if inputs.arrival_rate > 0.0 {
        (1.0 - target / inputs.arrival_rate).max(0.0)
    } else {
        0.0
    };
    Plan {
        shed_fraction: shed,
        admit_rate: target,
        ramp: vec![],
        arithmetic: vec![],
    }
}
