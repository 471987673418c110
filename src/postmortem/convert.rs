//! A real run as the rehearsal's report and samples: the one place a run's journal and
//! observed series become `report.json`'s fields and the timeline's series. Pure.
//!
//! The clock's zero is the run's start (its first journal line). The signals map onto the
//! rehearsal's series by their well-known names ([`crate::metrics::signal::names`]); a
//! runbook that names none of them draws an empty panel, never a made-up line. Every
//! figure the run cannot know keeps the schema's type and is listed, with why, in
//! `run.unknown`.

use super::onset::Before;
use super::Evidence;
use crate::engine::journal::Event;
use crate::engine::observed::{epoch_s, Observed, Point};
use crate::engine::ramp::RampMove;
use crate::engine::{Outcome, Phase, StepOutcome};
use crate::metrics::signal::names;
use crate::rehearse::report::{
    Dropped, Files, PhaseRecord, Report, RunFacts, ScenarioFacts, StepRecord, SCHEMA_VERSION,
};
use crate::rehearse::series::Sample;
use std::collections::{BTreeMap, BTreeSet};

/// Seconds since the Unix epoch of an RFC 3339 time.
pub fn epoch_of(ts: &str) -> Option<f64> {
    humantime::parse_rfc3339_weak(ts).ok().map(epoch_s)
}

/// The samples of `o`, on the clock whose zero is `zero` (epoch seconds).
pub fn samples(o: &Observed, zero: f64) -> Vec<Sample> {
    o.points.iter().map(|p| sample(o, p, zero)).collect()
}

fn sample(o: &Observed, p: &Point, zero: f64) -> Sample {
    let v = |name: &str| o.value(p, name);
    Sample {
        t_s: ms(p.t - zero),
        offered_per_s: v(names::OFFERED_RATE),
        admitted_per_s: v(names::GATE_ADMITTED_RATE),
        rejected_per_s: v(names::GATE_REJECTED_RATE),
        goodput_per_s: v(names::GOODPUT),
        first_attempt_per_s: v(names::FIRST_ATTEMPT_RATE),
        p99_latency_s: v(names::LATENCY_P99),
        gate_limit_per_s: limit_at(o, p.t),
        queue_depth: v(names::QUEUE_DEPTH),
        workers_retrying: v(names::CLIENTS_RETRYING),
        work_per_s: v(names::WORK_RATE),
        services_up: v(names::REPLICAS_READY).map(|r| r as u32).unwrap_or(0),
    }
}

/// The gate's limit at `t` as the run saw it: +inf when unlimited, None before the run's
/// first gate action or while the gate did not say.
fn limit_at(o: &Observed, t: f64) -> Option<f64> {
    let l = o.limits.iter().rev().find(|l| l.t <= t)?;
    match (&l.unknown, l.rate_per_s) {
        (Some(_), _) => None,
        (None, Some(r)) => Some(r),
        (None, None) => Some(f64::INFINITY),
    }
}

/// Requests the gate rejected from `from` to `to` (clock seconds), integrated from the
/// observed rejection rate; None when the series has fewer than two values in the span.
pub fn rejected_between(samples: &[Sample], from: f64, to: f64) -> Option<f64> {
    let pts: Vec<(f64, f64)> = samples
        .iter()
        .filter(|s| s.t_s >= from && s.t_s <= to)
        .filter_map(|s| s.rejected_per_s.map(|r| (s.t_s, r)))
        .collect();
    (pts.len() >= 2).then(|| {
        pts.windows(2)
            .map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0)
            .sum()
    })
}

/// The report and samples of the run in `ev`, with the series from before it when there
/// is one.
pub fn convert(ev: &Evidence, before: Option<&Before>) -> (Report, Vec<Sample>) {
    let r = &ev.report;
    let zero = epoch_of(&r.started_at).unwrap_or(0.0);
    let at = |ts: &Option<String>| ts.as_deref().and_then(epoch_of).map(|t| ms(t - zero));
    let end_s = epoch_of(&r.finished_at)
        .map(|t| ms(t - zero))
        .unwrap_or(0.0);
    let mut unknown = BTreeMap::new();
    let mut sources = vec![format!("journal {}", r.journal.clone().unwrap_or_default())];
    let mut samples = Vec::new();
    if let Some(b) = before {
        samples.extend(super::samples_of(&b.snapshots, zero));
        sources.push(b.from.clone());
    }
    match &ev.observed {
        Ok(o) => {
            let first = o.points.first().map(|p| p.t - zero);
            samples.retain(|s| first.is_none_or(|f| s.t_s < f));
            samples.extend(self::samples(o, zero));
            sources.push(format!(
                "observed series {} ({} points, one observation in {})",
                r.observed.clone().unwrap_or_default(),
                o.points.len(),
                o.stride
            ));
        }
        Err(why) => {
            unknown.insert("series".into(), why.clone());
        }
    }
    let steps: Vec<StepRecord> = r
        .steps
        .iter()
        .map(|s| StepRecord {
            name: s.name.clone(),
            start_s: at(&s.started_at).unwrap_or(end_s),
            end_s: at(&s.finished_at).unwrap_or(end_s),
            outcome: match (&s.outcome, &s.message) {
                (StepOutcome::Succeeded, _) => "ok".into(),
                (o, Some(m)) => format!("{}: {m}", o.words()),
                (o, None) => o.words().into(),
            },
        })
        .collect();
    let first_action = steps.first().map(|s| s.start_s);
    let last_main_ok = r
        .steps
        .iter()
        .rev()
        .find(|s| s.phase == Phase::Main)
        .filter(|s| s.outcome == StepOutcome::Succeeded)
        .and_then(|s| at(&s.finished_at));
    let recovered = r.outcome == Outcome::Succeeded;
    let time_to_recover_s = match (recovered, first_action, last_main_ok) {
        (true, Some(a), Some(b)) => Some(ms(b - a)),
        _ => None,
    };
    let decided_s = ev.entries.iter().find_map(|e| match &e.event {
        Event::Decided(_) => epoch_of(&e.ts).map(|t| ms(t - zero)),
        _ => None,
    });
    let stuck = r
        .verdict
        .as_ref()
        .is_some_and(|v| v.verdict.as_str() == "stuck");
    let drained = r.dropped_requests();
    if drained.is_none() {
        unknown.insert(
            "dropped.drained".into(),
            "a replica's drain gave no count (the step's drain_counts_unknown)".into(),
        );
    }
    let rejected = first_action.and_then(|a| rejected_between(&samples, a, end_s));
    if rejected.is_none() {
        unknown.insert(
            "dropped.rejected_at_gate".into(),
            "fewer than two observed values of gate_rejected_rate during the run".into(),
        );
    }
    let onset_s = before.and_then(|b| b.onset).map(|t| ms(epoch_s(t) - zero));
    let mut phases = Vec::new();
    let stuck_from = onset_s.or(samples.first().map(|s| s.t_s)).unwrap_or(0.0);
    if let Some(a) = first_action {
        phases.push(phase("stuck", stuck_from.min(a), a, "before the run acted"));
        phases.push(phase("recovery", a, end_s, "the runbook's steps"));
    }
    let client_timeout = ev
        .entries
        .iter()
        .find_map(|e| match &e.event {
            Event::RunStarted { runbook_source, .. } => {
                crate::runbook::parse_str("journal", runbook_source).ok()
            }
            _ => None,
        })
        .and_then(|rb| rb.params.get("client_timeout_s").copied());
    let inputs = r.plan_inputs;
    let demand = inputs.and_then(|i| i.demand);
    let capacity = inputs.and_then(|i| i.capacity);
    let replicas: BTreeSet<String> = ev
        .entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::ActionFinished { action, .. } => action.replica().map(String::from),
            _ => None,
        })
        .collect();
    let no_scenario = "a real run has no scenario: nothing told it";
    for (field, known, why) in [
        ("scenario.workers", false, no_scenario.to_string()),
        ("scenario.unavailable_s", false, no_scenario.to_string()),
        (
            "scenario.replicas",
            !replicas.is_empty(),
            "no action named a replica".to_string(),
        ),
        (
            "scenario.demand_per_s",
            demand.is_some(),
            "the plan had no demand baseline".to_string(),
        ),
        (
            "scenario.capacity_per_s",
            capacity.is_some(),
            "the plan had no warm capacity".to_string(),
        ),
        (
            "scenario.client_timeout_s",
            client_timeout.is_some(),
            "the runbook has no params.client_timeout_s".to_string(),
        ),
        (
            "lower_bound_s",
            false,
            "the lower bound needs the system's restart time and backlog, which only a rehearsal measures".to_string(),
        ),
        (
            "relapses",
            false,
            "a relapse is judged against a rehearsal's steady state; see ramp_step_backs".to_string(),
        ),
        (
            "p99_over_timeout_s",
            false,
            "not computed for a real run; the latency panel shows the series".to_string(),
        ),
        (
            "detection",
            false,
            "a run records its verdict (plan_inputs, k), not the detector's windows".to_string(),
        ),
    ] {
        if !known {
            unknown.insert(field.into(), why);
        }
    }
    if time_to_recover_s.is_none() {
        unknown.insert(
            "time_to_recover_s".into(),
            "the run did not finish its main steps".into(),
        );
    }
    let ramp_step_backs = ev
        .entries
        .iter()
        .filter(|e| {
            matches!(&e.event, Event::RampDecided(d) if matches!(d.decision, RampMove::StepBack { .. }))
        })
        .count() as u32;
    let k = r.verdict.as_ref().and_then(|v| v.k);
    let dropped = Dropped {
        drained: drained.unwrap_or(0.0).round() as u64,
        rejected_at_gate: rejected.unwrap_or(0.0).round() as u64,
        // A run's unknowns are in `run.unknown`, with every other field's.
        ..Dropped::default()
    };
    let report = Report {
        schema_version: SCHEMA_VERSION,
        runbook: r.runbook.clone(),
        scenario: ScenarioFacts {
            name: format!("run {} on {}", r.run_id, r.target),
            replicas: replicas.len() as u32,
            workers: 0,
            demand_per_s: demand.unwrap_or(0.0),
            capacity_per_s: capacity.unwrap_or(0.0),
            unavailable_s: 0.0,
            client_timeout_s: client_timeout.unwrap_or(0.0),
            attach_after_s: None,
            attempt_header: String::new(),
        },
        recovered,
        failure: (!recovered).then(|| {
            r.message
                .clone()
                .unwrap_or_else(|| r.outcome.words().into())
        }),
        trigger_end_s: 0.0,
        detected_stuck_s: if stuck { decided_s } else { None },
        attached_s: None,
        plan_inputs: r.input_sources.clone(),
        detection: None,
        time_to_recover_s,
        lower_bound_s: None,
        lower_bound: None,
        under_lower_bound: None,
        unsteady_at_bound: None,
        relapses: 0,
        p99_over_timeout_s: 0.0,
        ramp_step_backs,
        k,
        k_unknown: k
            .is_none()
            .then(|| "the detector had no estimate of k when the run decided".into()),
        k_true: None,
        not_stuck: None,
        shed_fraction: r.plan.as_ref().map(|p| p.shed_fraction),
        admit_rate_per_s: r.plan.as_ref().map(|p| p.admit_rate),
        dropped_requests: dropped.drained + dropped.rejected_at_gate,
        dropped,
        steps,
        phases,
        baselines: BTreeMap::new(),
        predicted_time_to_recover_s: None,
        predicted_unknown: Some("a real run has no simulator prediction".into()),
        wall_time_s: end_s,
        files: Files::default(),
        endpoints: BTreeMap::new(),
        slow_replica: None,
        run: Some(RunFacts {
            run_id: r.run_id.clone(),
            target: r.target.clone(),
            outcome: r.outcome.words().into(),
            message: r.message.clone(),
            started_at: r.started_at.clone(),
            finished_at: r.finished_at.clone(),
            onset_s,
            onset_from: before
                .map(|b| b.onset_from.clone())
                .unwrap_or_else(|| "no series from before the run (give --prometheus URL)".into()),
            gate: r.gate.clone(),
            unknown,
            sources,
        }),
    };
    (report, samples)
}

/// Times are recorded to the millisecond; differences are written so, not with the
/// binary fraction's noise.
fn ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

fn phase(name: &str, start_s: f64, end_s: f64, note: &str) -> PhaseRecord {
    PhaseRecord {
        name: name.into(),
        start_s,
        end_s,
        note: note.into(),
    }
}
