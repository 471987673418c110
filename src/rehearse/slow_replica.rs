//! The slow-replica rehearsal (`recover rehearse --scenario` with a `slow_replica:`
//! section): real replicas behind the gate, one made N times slower at run time
//! (`POST /admin/slow`, which a restart undoes, like a noisy neighbour a reschedule
//! escapes), the detector until it says `slow_replica`, the runbook through the engine,
//! then the p99 after; and a baseline with the same slowdown behind plain round robin and
//! no runbook, to show what the gate's balancing saves.
//!
//! Every p99 is the median of the recorder's windowed p99 of the clients' attempts over a
//! phase, so one unlucky window does not decide a figure. The report is the rehearsal's
//! `report.json` ([`super::report`]), its clock's 0 the slowdown, with the figures of this
//! rehearsal in `slow_replica`.

use super::assemble::{after_runbook, dropped, phase, rebased, rebased_steps};
use super::detection::wait_for;
use super::recorder::Recording;
use super::recovery::{run_runbook, RunbookOutcome};
use super::report::{Files, Report, ScenarioFacts, SlowReplicaFacts, SCHEMA_VERSION};
use super::scenario::{Scenario, SlowReplicaSpec};
use super::series::Sample;
use super::stage::{Stage, StageError};
use super::{Options, Rehearsed};
use crate::detect::VerdictKind;
use crate::plan::{PlanInputs, Source, SourcedInputs};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The median of the windowed p99 samples in `[from_s, to_s]`.
fn p99_between(stage: &Stage, from_s: f64, to_s: f64) -> Option<f64> {
    let mut v: Vec<f64> = stage
        .recorder
        .samples_since(from_s)
        .iter()
        .filter(|s| s.t_s <= to_s)
        .filter_map(|s| s.p99_latency_s)
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

async fn sleep_s(secs: f64) {
    tokio::time::sleep(Duration::from_secs_f64(secs.max(0.0))).await;
}

/// What the main stage saw, on the stage's clock.
struct Seen {
    facts: SlowReplicaFacts,
    /// When the slowdown began, and when the healthy measurement before it began.
    slowed_s: f64,
    healthy_from_s: f64,
    detected_s: Option<f64>,
    runbook: Option<RunbookOutcome>,
    /// When the runbook ended and when the measurement after it ended.
    runbook_end_s: Option<f64>,
    end_s: f64,
}

/// Run the rehearsal. An `Err` means the system could not be set up.
pub async fn rehearse_slow(
    opts: &Options,
    spec: &SlowReplicaSpec,
) -> Result<Rehearsed, StageError> {
    let wall = Instant::now();
    crate::util::http::ensure_tls_provider();
    let sc = &opts.scenario;
    let rb = &opts.runbook.runbook;
    let measure = spec.measure.as_secs_f64();
    let mut stage = Stage::start(&opts.exe, sc, &rb.signals, &opts.report_dir.join("main")).await?;
    let endpoints = stage.sys.endpoints();
    sleep_s(measure).await;
    let slowed_s = stage.clock.now_s();
    let mut seen = Seen {
        facts: SlowReplicaFacts {
            slowed: crate::demo::topology::replica_name(spec.replica as usize),
            factor: spec.factor,
            healthy_p99_s: p99_between(&stage, slowed_s - measure, slowed_s),
            ..SlowReplicaFacts::default()
        },
        slowed_s,
        healthy_from_s: slowed_s - measure,
        detected_s: None,
        runbook: None,
        runbook_end_s: None,
        end_s: slowed_s,
    };
    stage
        .sys
        .slow_replica(spec.replica as usize, spec.factor)
        .await?;
    tracing::info!(
        "{} made {}x slower; waiting for the detector",
        seen.facts.slowed,
        spec.factor
    );
    let found = wait_for(
        &stage.feed,
        stage.clock,
        &rb.detect,
        sc.detect_timeout,
        VerdictKind::SlowReplica,
    )
    .await;
    let failure = match found {
        Err(e) => Some(e.to_string()),
        Ok(detection) => {
            let f = &mut seen.facts;
            seen.detected_s = Some(detection.at_s);
            f.detected_after_s = Some(detection.at_s - slowed_s);
            f.detected = detection.verdict.slow_replica.map(|s| s.replica);
            f.slowed_p99_s = p99_between(
                &stage,
                slowed_s + sc.rate_window.as_secs_f64(),
                detection.at_s,
            );
            let inputs = declared_inputs(sc);
            let (clock, source) = (stage.clock, stage.source.clone());
            let outcome =
                run_runbook(&mut stage.sys, clock, source, &opts.runbook, inputs, None).await;
            let end = clock.now_s();
            f.runbook_s = Some(end - outcome.started_s);
            sleep_s(measure).await;
            seen.end_s = clock.now_s();
            f.after_p99_s = p99_between(&stage, end, seen.end_s);
            seen.runbook_end_s = Some(end);
            let failure = outcome.error.clone();
            seen.runbook = Some(outcome);
            failure
        }
    };
    if seen.runbook.is_none() {
        seen.end_s = stage.clock.now_s();
    }
    let rec = stage.finish().await;
    seen.facts.baseline_p99_s = baseline(opts, spec).await?;
    let failure = failure.or_else(
        || match (seen.facts.after_p99_s, seen.facts.healthy_p99_s) {
            (Some(a), Some(h)) if a <= 2.0 * h => None,
            (a, h) => Some(format!(
                "p99 after the runbook {} is not within 2x the healthy p99 {}",
                ms(a),
                ms(h)
            )),
        },
    );
    let engine_summary = seen
        .runbook
        .as_ref()
        .map(|o| o.summary.clone())
        .unwrap_or_default();
    let (report, samples) = assemble(opts, seen, &rec, failure, endpoints, wall.elapsed());
    Ok(Rehearsed {
        report,
        samples,
        engine_summary,
    })
}

/// The rehearsal's report, 0 on its clock the slowdown. Pure.
fn assemble(
    opts: &Options,
    seen: Seen,
    rec: &Recording,
    failure: Option<String>,
    endpoints: BTreeMap<String, String>,
    wall: Duration,
) -> (Report, Vec<Sample>) {
    let sc = &opts.scenario;
    let at = |t: f64| t - seen.slowed_s;
    let samples = rebased(rec, seen.slowed_s);
    let f = &seen.facts;
    let mut phases = vec![phase(
        "steady",
        at(seen.healthy_from_s),
        0.0,
        format!("healthy p99 {}", ms(f.healthy_p99_s)),
    )];
    // Slow until the runbook's first step (the engine watches for its own verdict first).
    let first_step = seen
        .runbook
        .as_ref()
        .map(|o| o.steps.first().map_or(o.started_s, |s| s.start_s));
    let slow_end = first_step.or(seen.detected_s).unwrap_or(seen.end_s);
    phases.push(phase(
        "slow",
        0.0,
        at(slow_end),
        format!(
            "{} {}x slower, still passing its health checks; {}",
            f.slowed,
            f.factor,
            match (&f.detected, f.detected_after_s) {
                (Some(d), Some(t)) => format!("the detector said slow_replica {d} after {t:.1} s"),
                _ => "the detector never said slow_replica".into(),
            }
        ),
    ));
    let (mut steps, mut dropped_work, mut relapses, mut over_s) =
        (vec![], Default::default(), 0, 0.0);
    let mut step_backs = 0;
    let mut plan = None;
    if let (Some(outcome), Some(end)) = (&seen.runbook, seen.runbook_end_s) {
        let start = first_step.unwrap_or(outcome.started_s);
        phases.push(phase(
            "recovery",
            at(start),
            at(end),
            format!(
                "runbook {}: {} step(s)",
                opts.runbook.runbook.name,
                outcome.steps.len()
            ),
        ));
        phases.push(phase(
            "after",
            at(end),
            at(seen.end_s),
            format!("p99 after the runbook {}", ms(f.after_p99_s)),
        ));
        steps = rebased_steps(outcome, seen.slowed_s);
        dropped_work = dropped(rec, outcome, start, seen.end_s);
        (relapses, over_s) = after_runbook(rec, sc, start);
        step_backs = outcome.relapses;
        plan = outcome.plan.clone();
    }
    let report = Report {
        schema_version: SCHEMA_VERSION,
        runbook: opts.runbook.runbook.name.clone(),
        scenario: ScenarioFacts {
            name: sc.name.clone(),
            replicas: sc.replicas,
            workers: sc.workers.count,
            demand_per_s: sc.demand_per_s(),
            capacity_per_s: sc.capacity_per_s(),
            // A slow replica stays up: nothing was unavailable.
            unavailable_s: 0.0,
            client_timeout_s: sc.workers.timeout.as_secs_f64(),
            attach_after_s: None,
            attempt_header: sc.workers.attempt_header.as_str().to_string(),
        },
        recovered: failure.is_none(),
        failure,
        trigger_end_s: 0.0,
        detected_stuck_s: None,
        attached_s: None,
        plan_inputs: seen.runbook.as_ref().map(|_| declared_inputs(sc)),
        detection: None,
        time_to_recover_s: None,
        lower_bound_s: None,
        lower_bound: None,
        under_lower_bound: None,
        unsteady_at_bound: None,
        relapses,
        p99_over_timeout_s: over_s,
        ramp_step_backs: step_backs,
        k: None,
        k_true: None,
        not_stuck: None,
        shed_fraction: plan.as_ref().map(|p| p.shed_fraction),
        admit_rate_per_s: plan.as_ref().map(|p| p.admit_rate),
        dropped_requests: dropped_work.drained + dropped_work.rejected_at_gate,
        dropped: dropped_work,
        steps,
        phases,
        baselines: BTreeMap::new(),
        predicted_time_to_recover_s: None,
        predicted_unknown: None,
        k_unknown: None,
        wall_time_s: wall.as_secs_f64(),
        files: Files::default(),
        endpoints,
        slow_replica: Some(seen.facts),
        run: None,
    };
    (report, samples)
}

/// The same slowdown behind the baseline's gate (round robin, no ejection), no runbook,
/// watched for twice `measure` (the slow replica's queue grows from the first second):
/// p99 over the last `measure`.
async fn baseline(opts: &Options, spec: &SlowReplicaSpec) -> Result<Option<f64>, StageError> {
    let mut sc: Scenario = opts.scenario.clone();
    let mut base = spec.clone();
    base.gate_args = spec.baseline_gate_args.clone();
    sc.slow_replica = Some(base);
    let dir = opts.report_dir.join("baseline-round-robin");
    let stage = Stage::start(&opts.exe, &sc, &opts.runbook.runbook.signals, &dir).await?;
    let t_slow = stage.clock.now_s();
    stage
        .sys
        .slow_replica(spec.replica as usize, spec.factor)
        .await?;
    sleep_s(2.0 * spec.measure.as_secs_f64()).await;
    let now = stage.clock.now_s();
    let p99 = p99_between(&stage, (now - spec.measure.as_secs_f64()).max(t_slow), now);
    stage.finish().await;
    Ok(p99)
}

/// The plan figures a run states; this runbook sets no limit, so they come from the
/// scenario as declared.
fn declared_inputs(sc: &Scenario) -> SourcedInputs {
    let inputs = PlanInputs {
        arrival_rate: sc.demand_per_s(),
        capacity_cold: sc.capacity_cold_per_s(),
        k: 1.0,
        capacity: Some(sc.capacity_per_s()),
        demand: Some(sc.demand_per_s()),
    };
    SourcedInputs::all_from(&inputs, Source::Declared, "the rehearsal's scenario")
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |s| format!("{:.0} ms", s * 1000.0))
}
