//! The readmission ramp: from the admit rate up, one multiplicative step at a time, to the
//! rate the healthy service can take (headroom x capacity), or to the demand when the
//! capacity is not known. Raising in steps, each held and checked, lets a relapse show up
//! while it is small. The engine lifts the limit at the first step where the gate rejects
//! nothing, usually well below the end, and holds at the end while it still rejects: the
//! clients it turns away are retrying, and lifting would let them in as one wave.

use super::{PlanConfig, PlanInputs, RampStep};

/// The steps, the end rate, and the arithmetic lines explaining them.
pub fn ramp(
    admit: f64,
    inputs: &PlanInputs,
    cfg: &PlanConfig,
) -> (Vec<RampStep>, f64, Vec<String>) {
    let demand = inputs.demand.unwrap_or(inputs.arrival_rate).max(0.0);
    let headroom = cfg.headroom.clamp(0.0, 1.0);
    let end = match inputs.capacity {
        Some(c) if c > 0.0 => headroom * c,
        _ => demand,
    };
    let mut lines = vec![match inputs.capacity {
        Some(c) if c > 0.0 => format!(
            "the ramp may rise to headroom x capacity = {headroom} x {c:.1} = {end:.1} req/s; the limit is lifted at the first step where the gate rejects nothing (expected near demand {demand:.1} once the retrying clients are served)"
        ),
        _ if inputs.demand.is_some() => format!(
            "the ramp rises to the healthy demand {end:.1} req/s (capacity unknown); the limit is lifted once the gate rejects nothing"
        ),
        _ => format!(
            "the ramp rises to the current arrival rate {end:.1} req/s (capacity and demand unknown); the limit is lifted once the gate rejects nothing"
        ),
    }];
    let factor = if cfg.step_factor.is_finite() && cfg.step_factor > 1.0 {
        cfg.step_factor
    } else {
        1.5
    };
    let hold = cfg.step_hold;
    let mut steps = vec![RampStep {
        rate_per_s: admit,
        hold,
    }];
    if admit >= end {
        lines.push(format!(
            "admit rate {admit:.1} already covers {end:.1}: hold there until the gate rejects nothing, then lift the limit"
        ));
        return (steps, admit, lines);
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
        "ramp: start {admit:.1} req/s, x{factor} per step (or straight to what is offered), hold {} each: {} req/s (at most {} rates)",
        crate::util::duration::format(hold),
        rates.join(" -> "),
        steps.len(),
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
