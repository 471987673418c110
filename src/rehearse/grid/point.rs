//! One grid point measured: the simulator plays the true system into its stuck state, the
//! estimator reads it as a scrape would ([`super::observe`]), the plan and the prediction
//! are made from those estimates as a rehearsal makes them, and the simulator runs that
//! plan on the true parameters for the time the prediction is compared with.
//!
//! Why it exists: the grid report's two errors (k, prediction) are only meaningful if every
//! point goes the way a rehearsal goes; this is that sequence, one function, with the
//! rehearsal's own pieces: `rehearse::rehearsal::{detector_config, inputs_from_verdict}`,
//! `engine::planning::plan_run`, `engine::restart::decide`, `rehearse::predict`.

use super::draw::Point;
use super::observe::observe;
use crate::engine::planning::plan_run;
use crate::engine::restart::{decide, RestartDecision, RestartEvidence};
use crate::plan::{Overrides, SourcedInputs};
use crate::rehearse::predict::{predicted_time_to_recover, system_params};
use crate::rehearse::rehearsal::{detector_config, inputs_from_verdict};
use crate::rehearse::scenario::Scenario;
use crate::runbook::action::Action;
use crate::runbook::Runbook;
use crate::simulate::run_system;
use crate::simulate::Readmission;
use serde::Serialize;
use std::time::Duration;

/// k within this of the true k counts as estimated.
pub const K_WITHIN: f64 = 0.15;
/// A prediction within this of the simulated time counts as predicted.
pub const PREDICTION_WITHIN: f64 = 0.20;

/// What one point measured. Every figure is either a number or unknown with its reason.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measured {
    #[serde(flatten)]
    pub point: Point,
    /// Seconds after the trigger ended that the detector said Stuck.
    pub detected_after_s: Option<f64>,
    pub k_true: f64,
    pub k: Option<f64>,
    /// Why k is unknown (the detector's reason, or no Stuck verdict).
    pub k_unknown: Option<String>,
    /// Which signals k came from.
    pub k_from: Option<String>,
    /// (k - k_true) / k_true.
    pub k_error: Option<f64>,
    /// The estimates the prediction's model rests on: healthy capacity, cold factor.
    pub capacity: Option<f64>,
    pub capacity_true: f64,
    pub cold_factor: Option<f64>,
    /// The plan's admit rate, req/s.
    pub admit_rate: Option<f64>,
    /// The procedure's first action, seconds after the trigger ended.
    pub plan_after_s: Option<f64>,
    pub restarts: bool,
    pub warms: bool,
    /// The model's time to recover with the estimated parameters, from the first action.
    pub predicted_s: Option<f64>,
    pub predicted_unknown: Option<String>,
    /// The model's time to recover with the true parameters (what the prediction is
    /// compared with).
    pub simulated_s: Option<f64>,
    pub simulated_unknown: Option<String>,
    /// (predicted - simulated) / simulated.
    pub prediction_error: Option<f64>,
    /// Why the point is outside (k beyond 15%, the prediction beyond 20%, or either
    /// unknown); empty when inside.
    pub outside: Vec<String>,
}

impl Measured {
    pub fn k_within(&self) -> bool {
        self.k_error.is_some_and(|e| e.abs() <= K_WITHIN)
    }

    pub fn prediction_within(&self) -> bool {
        self.prediction_error
            .is_some_and(|e| e.abs() <= PREDICTION_WITHIN)
    }
}

/// The `cache.warm` step's threshold, if the runbook has one: a run warms when the
/// service is below it.
fn warm_threshold(rb: &Runbook) -> Option<f64> {
    rb.steps.iter().find_map(|s| match &s.action {
        Action::CacheWarm(a) => Some(a.threshold),
        _ => None,
    })
}

/// The scenario with what the estimator found in place of what it does not know: the
/// healthy capacity (through the service time, the concurrency kept), the cold factor
/// (capacity over cold capacity) and k. The clients stay the scenario's: the model needs
/// a fleet, and the rehearsal built it.
fn estimated(sc: &Scenario, inputs: &SourcedInputs, k: f64) -> Scenario {
    let mut e = sc.clone();
    let capacity = inputs
        .capacity
        .as_ref()
        .map_or(sc.capacity_per_s(), |c| c.value);
    let per_slot = f64::from(sc.replicas * sc.service.concurrency);
    e.service.service_time = Duration::from_secs_f64(per_slot / capacity.max(1e-9));
    e.service.cold_factor = (capacity / inputs.capacity_cold.value.max(1e-9)).max(1.0);
    e.service.overload_factor = k;
    e
}

/// Measure `p` against the runbook `rb`; `seed` seeds the simulated clients' phases.
pub fn measure(p: &Point, rb: &Runbook, seed: u64) -> Measured {
    let sc = p.scenario();
    let mut m = Measured {
        point: p.clone(),
        detected_after_s: None,
        k_true: sc.service.overload_factor,
        k: None,
        k_unknown: None,
        k_from: None,
        k_error: None,
        capacity: None,
        capacity_true: sc.capacity_per_s(),
        cold_factor: None,
        admit_rate: None,
        plan_after_s: None,
        restarts: false,
        warms: false,
        predicted_s: None,
        predicted_unknown: None,
        simulated_s: None,
        simulated_unknown: None,
        prediction_error: None,
        outside: Vec::new(),
    };
    let late = sc.attach_after.is_some();
    // Attached late, the detector knows only what the runbook declares, what it sees and
    // the metrics history from before it attached (`observe`).
    let detector = if late {
        rb.detect.clone()
    } else {
        detector_config(&rb.detect, &sc)
    };
    let mut params = system_params(&sc, Duration::ZERO, true, None);
    let down = (
        params.outage_at.as_secs_f64(),
        (params.outage_at + params.outage).as_secs_f64(),
    );
    let attach_s = sc.attach_after.map_or(0.0, |a| down.1 + a.as_secs_f64());
    params.duration = Duration::from_secs_f64(
        (attach_s.max(down.1) + sc.detect_timeout.as_secs_f64() + 2.0).ceil(),
    );
    let run = run_system(&params, None, seed);
    let seen = match observe(&sc, &run.series, down, attach_s, &rb.signals, &detector) {
        Ok(o) => o,
        Err(e) => {
            m.k_unknown = Some(format!("the runbook's signals cannot be read: {e}"));
            return finish(m);
        }
    };
    let Some(at_s) = seen.at_s else {
        let v = &seen.verdict;
        let own = match run.recovery.time_to_recover_s {
            Some(t) if run.recovery.recovered => format!(
                "; the simulated system recovered by itself {t:.0} s after the trigger ended"
            ),
            _ => String::new(),
        };
        let why = format!(
            "no Stuck verdict within {} of {} (last: {}: {}){own}",
            crate::util::duration::format(sc.detect_timeout),
            if late {
                "attaching"
            } else {
                "the trigger's end"
            },
            v.verdict.as_str(),
            v.summary
        );
        m.k_unknown = Some(why.clone());
        m.predicted_unknown = Some("unknown: no plan without a Stuck verdict".into());
        return finish(m);
    };
    let v = &seen.verdict;
    m.detected_after_s = Some(at_s - down.1);
    m.k = v.k;
    m.k_unknown = v.k_unknown.clone();
    m.k_from = v.k_from.clone();
    m.k_error = v.k.map(|k| (k - m.k_true) / m.k_true);

    let inputs = match inputs_from_verdict(v, None, &sc, &detector, late) {
        Ok(i) => i,
        Err(e) => {
            m.predicted_unknown = Some(format!("unknown: no plan: {e}"));
            return finish(m);
        }
    };
    let planned = match plan_run(rb, v, &Overrides::default(), Some(&inputs)) {
        Ok(p) => p,
        Err(e) => {
            m.predicted_unknown = Some(format!("unknown: no plan: {e}"));
            return finish(m);
        }
    };
    let plan = &planned.plan;
    m.admit_rate = Some(plan.admit_rate);
    m.capacity = inputs.capacity.as_ref().map(|c| c.value);
    m.cold_factor = inputs
        .capacity
        .as_ref()
        .map(|c| c.value / inputs.capacity_cold.value.max(1e-9));
    // The engine looks twice more before its first action.
    let after = Duration::from_secs_f64(at_s - down.1) + rb.observe.interval * 2;
    m.plan_after_s = Some(after.as_secs_f64());
    let names: Vec<String> = (0..sc.replicas as usize)
        .map(crate::demo::topology::replica_name)
        .collect();
    m.restarts = matches!(
        decide(&RestartEvidence {
            replicas: names.iter().map(|n| (n.clone(), true)).collect(),
            drained: names.clone(),
            admit_rate: Some(plan.admit_rate),
            capacity: inputs.capacity.as_ref().map(|c| c.value),
            capacity_cold: inputs.capacity_cold.value,
            ..RestartEvidence::default()
        }),
        RestartDecision::Restart { .. }
    );
    m.warms = warm_threshold(rb).is_some_and(|t| m.restarts || seen.warm_fraction < t);
    // The model's procedure follows the runbook's readmission with the plan's inputs, as
    // the engine's does.
    let readmission = || Readmission::of(rb, &planned.inputs);
    // The prediction and the simulated time it is compared with are the model's alike:
    // read on the same ticks (every scrape interval from the procedure's start), the
    // readmission as soon as the procedure allows.
    let phase = super::super::predict::RunTiming::default();
    let simulated =
        predicted_time_to_recover(&sc, plan, after, m.restarts, m.warms, readmission(), phase);
    (m.simulated_s, m.simulated_unknown) = split(simulated);
    match v.k {
        Some(k) => {
            let est = estimated(&sc, &inputs, k);
            let predicted = predicted_time_to_recover(
                &est,
                plan,
                after,
                m.restarts,
                m.warms,
                readmission(),
                phase,
            );
            (m.predicted_s, m.predicted_unknown) = split(predicted);
            if m.simulated_s.is_some() {
                if let Some(why) = m.predicted_unknown.as_mut() {
                    why.push_str(&estimates_differ(&sc, &est));
                }
            }
        }
        None => m.predicted_unknown = Some("unknown: k is unknown, so the model has none".into()),
    }
    if let (Some(p), Some(s)) = (m.predicted_s, m.simulated_s) {
        m.prediction_error = Some((p - s) / s);
    }
    finish(m)
}

/// Where the model from the estimates has no time while the true one has: the same
/// model, so what differs is what it was given, named with the true values.
fn estimates_differ(sc: &Scenario, est: &Scenario) -> String {
    format!(
        "; the model on the true parameters was failing then, so the estimates are what differ: cold factor {:.2} against {:.2}, k {:.2} against {:.2}, capacity {:.0}/s against {:.0}/s",
        est.service.cold_factor,
        sc.service.cold_factor,
        est.service.overload_factor,
        sc.service.overload_factor,
        est.capacity_per_s(),
        sc.capacity_per_s()
    )
}

fn split(r: Result<f64, String>) -> (Option<f64>, Option<String>) {
    match r {
        Ok(v) => (Some(v), None),
        Err(e) => (None, Some(e)),
    }
}

/// The reasons a point is outside, from its shown values.
fn finish(mut m: Measured) -> Measured {
    let pct = |e: f64| format!("{:+.0}%", 100.0 * e);
    match (m.k, m.k_error, &m.k_unknown) {
        (Some(k), Some(e), _) if e.abs() > K_WITHIN => m.outside.push(format!(
            "k {k:.2} against {:.2} ({}): {}",
            m.k_true,
            pct(e),
            m.k_from.as_deref().unwrap_or("no source given")
        )),
        (None, _, why) => m.outside.push(format!(
            "k unknown: {}",
            why.as_deref().unwrap_or("no reason given")
        )),
        _ => {}
    }
    match (
        m.prediction_error,
        &m.predicted_unknown,
        &m.simulated_unknown,
    ) {
        (Some(e), _, _) if e.abs() > PREDICTION_WITHIN => m.outside.push(format!(
            "predicted {:.1} s against {:.1} s simulated ({})",
            m.predicted_s.unwrap_or_default(),
            m.simulated_s.unwrap_or_default(),
            pct(e)
        )),
        (Some(_), _, _) => {}
        (None, _, Some(why)) => m.outside.push(format!("simulated time {why}")),
        (None, Some(why), None) => m.outside.push(format!("prediction {why}")),
        (None, None, None) => m.outside.push("prediction unknown".into()),
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attached 60 s late to a service stuck since the trigger, on the shipped runbook
    /// (declaring the demo's 4 slots x 40 ms = 100 req/s per replica and cold factor 2,
    /// stale for nearly every point): the healthy reference comes from the scrapes before
    /// the attach, as a Prometheus retains them, so capacity is the point's own (Little's
    /// law over its concurrency and the warm service time of its steady phase), and the
    /// cold factor is measured there too, not declared.
    #[test]
    fn a_late_point_reads_its_healthy_reference_from_the_history_not_the_declarations() {
        let rb = crate::runbook::find("stuck-overload", &[]).unwrap().runbook;
        let late: Vec<Point> = super::super::draw::draw(8, 7)
            .into_iter()
            .filter(|p| p.late && p.concurrency != 4)
            .collect();
        assert!(late.len() >= 4, "{late:?}");
        let mut stuck = 0;
        for p in &late {
            let m = measure(p, &rb, 1);
            let Some(cap) = m.capacity else { continue };
            stuck += 1;
            assert!(
                (cap - m.capacity_true).abs() < 0.02 * m.capacity_true,
                "{}: capacity {cap} against {}: {:?}",
                p.name(),
                m.capacity_true,
                m.k_from
            );
            let f = m.cold_factor.unwrap();
            assert!(
                (f - p.cold).abs() < 0.1 * p.cold,
                "{}: cold factor {f}",
                p.name()
            );
            let from = m.k_from.unwrap_or_default();
            assert!(!from.contains("declared"), "{}: {from}", p.name());
        }
        assert!(
            stuck >= 3,
            "only {stuck} of {} late points stuck",
            late.len()
        );
    }

    /// The seed-1 grid's point 4: the estimator used the declared cold factor 2 against a
    /// true 3.2; the reason a prediction is unknown names it beside the true value.
    #[test]
    fn an_unknown_prediction_names_the_estimates_against_the_truth() {
        let sc = Scenario::parse(
            "name: grid-4\nreplicas: 1\nservice:\n  concurrency: 5\n  cold_factor: 3.2\n  overload_factor: 4.6\n",
            "grid-4",
        )
        .unwrap();
        let mut est = sc.clone();
        est.service.cold_factor = 2.0;
        est.service.overload_factor = 6.3;
        let why = estimates_differ(&sc, &est);
        assert!(
            why.contains(
                "cold factor 2.00 against 3.20, k 6.30 against 4.60, capacity 125/s against 125/s"
            ),
            "{why}"
        );
    }
}
