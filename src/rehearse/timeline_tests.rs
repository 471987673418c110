//! Timeline tests on a synthetic incident shaped like the real one.
use super::*;
use crate::rehearse::report::*;
use std::collections::BTreeMap;

/// A made-up incident shaped like the real one: steady, a 5 s outage, a retry storm
/// that sustains itself, the runbook (block, restart, ramp), then a hold.
pub(crate) fn synthetic() -> (Report, Vec<Sample>) {
    let demand = 16.7;
    let mut samples = vec![];
    let mut t = -10.0;
    while t <= 60.0 {
        let (offered, admitted, goodput, p99, limit, retrying, queue) = if t < 0.0 {
            (demand, demand, demand, 0.05, f64::INFINITY, 0.0, 0.0)
        } else if t < 5.0 {
            (
                demand + t * 10.0,
                0.0,
                0.0,
                2.0,
                f64::INFINITY,
                t * 100.0,
                0.0,
            )
        } else if t < 22.0 {
            (170.0, 170.0, 3.0, 2.0, f64::INFINITY, 500.0, 400.0)
        } else if t < 30.0 {
            (
                170.0 - (t - 22.0) * 15.0,
                30.0,
                25.0,
                0.3,
                30.0,
                500.0 - (t - 22.0) * 60.0,
                0.0,
            )
        } else if t < 40.0 {
            (demand + 5.0, demand + 5.0, demand, 0.1, 45.0, 0.0, 0.0)
        } else {
            (demand, demand, demand, 0.05, f64::INFINITY, 0.0, 0.0)
        };
        samples.push(Sample {
            t_s: t,
            offered_per_s: Some(offered),
            admitted_per_s: Some(admitted),
            rejected_per_s: Some(offered - admitted),
            goodput_per_s: Some(goodput),
            first_attempt_per_s: Some(demand),
            p99_latency_s: (!(0.0..5.0).contains(&t)).then_some(p99),
            gate_limit_per_s: Some(limit),
            queue_depth: (!(0.0..5.0).contains(&t)).then_some(queue),
            workers_retrying: Some(retrying),
            work_per_s: None,
            services_up: 1,
        });
        t += 0.5;
    }
    let phase = |name: &str, a: f64, b: f64| PhaseRecord {
        name: name.into(),
        start_s: a,
        end_s: b,
        note: String::new(),
    };
    let report = Report {
        schema_version: SCHEMA_VERSION,
        runbook: "stuck-overload".into(),
        scenario: ScenarioFacts {
            name: "synthetic".into(),
            replicas: 1,
            workers: 500,
            demand_per_s: demand,
            capacity_per_s: 100.0,
            unavailable_s: 5.0,
            client_timeout_s: 2.0,
            attach_after_s: None,
            attempt_header: "x-attempt".into(),
        },
        recovered: true,
        failure: None,
        trigger_end_s: 5.0,
        attached_s: None,
        plan_inputs: None,
        detected_stuck_s: Some(16.0),
        detection: None,
        time_to_recover_s: Some(14.0),
        lower_bound_s: Some(7.5),
        lower_bound: None,
        under_lower_bound: None,
        unsteady_at_bound: None,
        relapses: 0,
        ramp_step_backs: 0,
        p99_over_timeout_s: 0.0,
        k: Some(4.0),
        shed_fraction: Some(0.82),
        admit_rate_per_s: Some(30.0),
        dropped_requests: 1200,
        dropped: Dropped {
            drained: 400,
            rejected_at_gate: 800,
            ..Dropped::default()
        },
        steps: [
            "block at the edge",
            "drain backlog",
            "restart in batches",
            "warm caches",
            "readmit progressively",
        ]
        .iter()
        .enumerate()
        .map(|(i, n)| StepRecord {
            name: n.to_string(),
            start_s: 22.0 + i as f64 * 2.0,
            end_s: 24.0 + i as f64 * 2.0,
            outcome: "ok".into(),
        })
        .collect(),
        phases: vec![
            phase("steady", -10.0, 0.0),
            phase("trigger", 0.0, 5.0),
            phase("stuck", 5.0, 22.0),
            phase("recovery", 22.0, 36.0),
            phase("hold", 36.0, 60.0),
        ],
        baselines: BTreeMap::new(),
        predicted_time_to_recover_s: None,
        predicted_unknown: None,
        k_unknown: None,
        k_true: None,
        not_stuck: None,
        wall_time_s: 70.0,
        files: Files::default(),
        endpoints: BTreeMap::new(),
        slow_replica: None,
        run: None,
    };
    (report, samples)
}

#[test]
fn draws_every_series_phase_and_the_detection_mark() {
    let (report, samples) = synthetic();
    let svg = render_svg(&report, &samples).unwrap();
    for needle in [
        "goodput",
        "offered",
        "gate limit",
        "client timeout",
        "stuck detected",
        "recovery",
        "retry loop",
    ] {
        assert!(svg.contains(needle), "timeline lacks {needle:?}");
    }
    if let Ok(path) = std::env::var("RECOVER_TIMELINE_OUT") {
        std::fs::write(path, &svg).unwrap();
    }
}
