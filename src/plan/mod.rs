//! The shed plan: how much load to shed so the service can leave the stuck state, and the
//! readmission ramp, with the arithmetic shown.
//!
//! The shed is `shed_fraction = max(0, 1 - (capacity_cold / k) / arrival_rate)`. The safety
//! headroom is applied to the admit rate only
//! (`admit_rate = headroom x capacity_cold / k`), and the arithmetic says so, so the
//! stated shed and the gate's setting never silently disagree.
//!
//! [`inputs`] turns a verdict, the runbook's declarations and the operator's numbers into
//! [`PlanInputs`]; [`vars`] is the table of `plan.*` values runbook expressions read.

pub mod inputs;
mod ramp;
pub mod vars;

pub use crate::detect::Source;
pub use inputs::{assume_k_max_where_unknown, MissingInputs, Overrides, Sourced, SourcedInputs};

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
    /// How long each ramp step is expected to stand: the time its gating check needs for
    /// its consecutive successes (the engine raises as soon as the check passes).
    #[serde(with = "crate::util::duration::serde_human")]
    pub step_hold: Duration,
    /// A step passes when goodput is at least this fraction of the admitted rate.
    pub min_goodput_ratio: f64,
    /// A step passes when p99 latency is under this (e.g. half the clients' timeout).
    #[serde(with = "crate::util::duration::serde_human_opt")]
    pub max_p99: Option<Duration>,
    /// At most this many ramp steps (the last one jumps to the end rate).
    pub max_steps: usize,
}

impl Default for PlanConfig {
    fn default() -> Self {
        PlanConfig {
            headroom: 0.9,
            step_factor: 1.5,
            step_hold: Duration::from_secs(5),
            min_goodput_ratio: 0.9,
            max_p99: None,
            max_steps: 20,
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
    /// Healthy demand (first attempts/s); with it the ramp can end below capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<f64>,
}

/// Inputs that cannot make a plan.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("{field} must be a finite number above zero, got {value}")]
    NotPositive { field: &'static str, value: f64 },
    #[error(
        "k must be at least 1 (work per useful response cannot shrink under overload), got {0}"
    )]
    KBelowOne(f64),
}

impl PlanInputs {
    /// Check the numbers before planning with them.
    pub fn validate(&self) -> Result<(), PlanError> {
        let positive = |field, value: f64| {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                Err(PlanError::NotPositive { field, value })
            }
        };
        positive("arrival_rate", self.arrival_rate)?;
        positive("capacity_cold", self.capacity_cold)?;
        positive("k", self.k)?;
        if let Some(c) = self.capacity {
            positive("capacity", c)?;
        }
        if let Some(d) = self.demand {
            positive("demand", d)?;
        }
        if self.k < 1.0 {
            return Err(PlanError::KBelowOne(self.k));
        }
        Ok(())
    }
}

/// One readmission step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RampStep {
    pub rate_per_s: f64,
    #[serde(with = "crate::util::duration::serde_human")]
    pub hold: Duration,
}

/// What shedding a given fraction would do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShedOutcome {
    pub shed_fraction: f64,
    /// Rate still reaching the service.
    pub reaching_rate: f64,
    /// True when that is below capacity_cold / k.
    pub clears: bool,
    pub note: String,
}

/// The plan, with the arithmetic that produced it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub shed_fraction: f64,
    pub admit_rate: f64,
    pub ramp: Vec<RampStep>,
    pub arithmetic: Vec<String>,
    /// capacity_cold / k: the rate below which the service leaves the stuck state.
    #[serde(default)]
    pub clear_rate: f64,
    /// The fraction the gate actually rejects at `admit_rate` (shed plus headroom).
    #[serde(default)]
    pub gate_reject_fraction: f64,
    /// The rate at which the ramp ends and the gate's limit can be lifted.
    #[serde(default)]
    pub ramp_end_rate: f64,
    /// What each ramp step checks before the next one.
    #[serde(default)]
    pub checks: Vec<String>,
    /// What smaller (and the computed) sheds would do.
    #[serde(default)]
    pub alternatives: Vec<ShedOutcome>,
}

/// Compute the shed: `shed_fraction = max(0, 1 - (capacity_cold / k) / arrival_rate)`.
/// Inputs should pass [`PlanInputs::validate`]; out-of-range ones are clamped (k to at
/// least 1, rates to at least 0) and the arithmetic says so.
pub fn make_plan(inputs: &PlanInputs, cfg: &PlanConfig) -> Plan {
    let mut lines = Vec::new();
    let k = if inputs.k.is_finite() && inputs.k >= 1.0 {
        inputs.k
    } else {
        lines.push(format!(
            "k = {} is not a valid amplification; using k = 1",
            inputs.k
        ));
        1.0
    };
    let arrival = inputs.arrival_rate.max(0.0);
    let cold = inputs.capacity_cold.max(0.0);
    let clear = cold / k;
    let shed = if arrival > 0.0 {
        (1.0 - clear / arrival).max(0.0)
    } else {
        0.0
    };
    let headroom = cfg.headroom.clamp(0.0, 1.0);
    let admit = clear * headroom;
    let gate_reject = if arrival > 0.0 {
        (1.0 - admit / arrival).max(0.0)
    } else {
        0.0
    };

    lines.push(format!(
        "to leave the stuck state the rate reaching the service must drop below capacity_cold / k = {cold:.1} / {k:.2} = {clear:.1} req/s"
    ));
    lines.push(format!(
        "shed_fraction = max(0, 1 - (capacity_cold / k) / arrival) = max(0, 1 - {clear:.1} / {arrival:.1}) = {shed:.3} ({:.1}%)",
        100.0 * shed
    ));
    lines.push(format!(
        "admit_rate = headroom x capacity_cold / k = {headroom} x {clear:.1} = {admit:.1} req/s (headroom for estimation error); at this rate the gate rejects {:.1}% of the arrival",
        100.0 * gate_reject
    ));
    if shed == 0.0 {
        lines.push(format!(
            "arrival {arrival:.1} req/s is already below {clear:.1} req/s: no shedding is needed to clear"
        ));
    }
    let (ramp, end, ramp_lines) = ramp::ramp(admit, inputs, cfg);
    lines.extend(ramp_lines);
    let checks = ramp::checks(cfg);
    let alternatives = alternatives(arrival, clear, shed);
    lines.extend(alternatives.iter().map(|a| a.note.clone()));
    Plan {
        shed_fraction: shed,
        admit_rate: admit,
        ramp,
        arithmetic: lines,
        clear_rate: clear,
        gate_reject_fraction: gate_reject,
        ramp_end_rate: end,
        checks,
        alternatives,
    }
}

/// What shedding 20%, 50%, just under the computed shed, and the computed shed would do.
fn alternatives(arrival: f64, clear: f64, shed: f64) -> Vec<ShedOutcome> {
    let mut fractions = vec![0.2, 0.5];
    if shed > 0.05 {
        fractions.push(((shed - 0.05) * 100.0).round() / 100.0);
    }
    fractions.push(shed);
    fractions.retain(|f| *f <= shed + 1e-9);
    fractions.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    fractions
        .into_iter()
        .map(|f| {
            let reaching = (1.0 - f) * arrival;
            let clears = reaching <= clear + 1e-9;
            let note = format!(
                "shedding {:.0}% leaves {:.2} x {arrival:.1} = {reaching:.1} req/s {} capacity_cold / k = {clear:.1}: {}",
                100.0 * f,
                1.0 - f,
                if clears { "<=" } else { ">" },
                if clears { "clears (the queue can drain)" } else { "stays stuck" }
            );
            ShedOutcome {
                shed_fraction: f,
                reaching_rate: reaching,
                clears,
                note,
            }
        })
        .collect()
}
