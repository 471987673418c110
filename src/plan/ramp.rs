//! The readmission ramp: from the admit rate up, one multiplicative step at a time, until
//! the gate no longer needs to reject (at demand, or at capacity when demand is higher).
//! Raising in steps, each held and checked, lets a relapse show up while it is small.

use super::{PlanConfig, PlanInputs, RampStep};

/// The steps, the end rate, and the arithmetic lines explaining them.
pub fn ramp(
    admit: f64,
    inputs: &PlanInputs,
    cfg: &PlanConfig,
) -> (Vec<RampStep>, f64, Vec<String>) {
    let demand = inputs.demand.unwrap_or(inputs.arrival_rate).max(0.0);
    let end = match inputs.capacity {
        Some(c) if c < demand => c,
        _ => demand,
    };
    let factor = if cfg.step_factor.is_finite() && cfg.step_factor > 1.0 {
        cfg.step_factor
    } else {
        1.5
    };
    let mut lines = vec![format!(
        "the ramp ends at {end:.1} req/s: {}",
        match inputs.capacity {
            Some(c) if c < demand => format!("capacity {c:.1} (demand {demand:.1} is higher)"),
            _ if inputs.demand.is_some() =>
                "the healthy demand; the gate then rejects nothing".into(),
            _ => "the current arrival rate; the gate then rejects nothing".into(),
        }
    )];
    let hold = cfg.step_hold;
    let mut steps = vec![RampStep {
        rate_per_s: admit,
        hold,
    }];
    if admit >= end {
        lines.push(format!(
            "admit rate {admit:.1} already covers {end:.1}: hold once, then lift the limit"
        ));
        return (steps, end, lines);
    }
    let mut rate = admit;
    while rate < end && steps.len() < cfg.max_steps.max(2) {
        rate = if steps.len() + 1 == cfg.max_steps.max(2) {
            end
        } else {
            (rate * factor).min(end)
        };
        steps.push(RampStep {
            rate_per_s: rate,
            hold,
        });
    }
    let rates: Vec<String> = steps
        .iter()
        .map(|s| format!("{:.1}", s.rate_per_s))
        .collect();
    lines.push(format!(
        "ramp: start {admit:.1} req/s, x{factor} per step, hold {} each: {} req/s ({} steps, at least {})",
        crate::util::duration::format(hold),
        rates.join(" -> "),
        steps.len(),
        crate::util::duration::format(hold * steps.len() as u32)
    ));
    (steps, end, lines)
}

/// What each step must show before the next.
pub fn checks(cfg: &PlanConfig) -> Vec<String> {
    let mut c = vec![
        format!(
            "goodput >= {:.0}% of the admitted rate",
            100.0 * cfg.min_goodput_ratio
        ),
        "queue depth not growing over the hold".to_string(),
    ];
    match cfg.max_p99 {
        Some(p) => c.push(format!(
            "p99 latency under {}",
            crate::util::duration::format(p)
        )),
        None => c.push("p99 latency well under the clients' timeout".to_string()),
    }
    c.push("on a failed check: step back to the previous rate and hold".to_string());
    c
}
