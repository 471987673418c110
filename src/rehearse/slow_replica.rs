//! The slow-replica rehearsal (`recover rehearse --scenario` with a `slow_replica:`
//! section): real replicas behind the gate, one made N times slower at run time
//! (`POST /admin/slow`, which a restart undoes, like a noisy neighbour a reschedule
//! escapes), the detector until it says `slow_replica`, the runbook through the engine,
//! then the p99 after; and a baseline with the same slowdown behind plain round robin and
//! no runbook, to show what the gate's balancing saves.
//!
//! Every p99 is the median of the recorder's windowed p99 of the clients' attempts over a
//! phase, so one unlucky window does not decide a figure.

use super::detection::wait_for;
use super::recovery::run_runbook;
use super::scenario::{Scenario, SlowReplicaSpec};
use super::stage::{Stage, StageError};
use super::Options;
use crate::detect::VerdictKind;
use crate::plan::{PlanInputs, Source, SourcedInputs};
use serde::Serialize;
use std::time::Duration;

/// What the slow-replica rehearsal measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SlowReport {
    pub scenario: String,
    pub runbook: String,
    /// The replica made slow, and by how much.
    pub slowed: String,
    pub factor: f64,
    /// The replica the detector named (should be `slowed`).
    pub detected: Option<String>,
    /// Seconds from the slowdown to the detector's `slow_replica`.
    pub detected_after_s: Option<f64>,
    /// Seconds the runbook took.
    pub runbook_s: Option<f64>,
    pub runbook_error: Option<String>,
    /// p99 of the clients' attempts, seconds: healthy, slowed with the gate's balancing
    /// (before the runbook), after the runbook, and slowed behind round robin (baseline).
    pub healthy_p99_s: Option<f64>,
    pub slowed_p99_s: Option<f64>,
    pub after_p99_s: Option<f64>,
    pub baseline_p99_s: Option<f64>,
    /// The runbook succeeded and p99 after it is within 2x the healthy p99.
    pub recovered: bool,
}

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

/// Run the rehearsal. An `Err` means the system could not be set up.
pub async fn rehearse_slow(
    opts: &Options,
    spec: &SlowReplicaSpec,
) -> Result<SlowReport, StageError> {
    crate::util::http::ensure_tls_provider();
    let sc = &opts.scenario;
    let rb = &opts.runbook.runbook;
    let measure = spec.measure.as_secs_f64();
    let mut r = SlowReport {
        scenario: sc.name.clone(),
        runbook: rb.name.clone(),
        slowed: format!("replica-{}", spec.replica),
        factor: spec.factor,
        ..SlowReport::default()
    };

    let mut stage = Stage::start(&opts.exe, sc, &rb.signals, &opts.report_dir.join("main")).await?;
    sleep_s(measure).await;
    let t_slow = stage.clock.now_s();
    r.healthy_p99_s = p99_between(&stage, t_slow - measure, t_slow);
    stage
        .sys
        .slow_replica(spec.replica as usize, spec.factor)
        .await?;
    tracing::info!(
        "{} made {}x slower; waiting for the detector",
        r.slowed,
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
    let detection = match found {
        Ok(d) => d,
        Err(e) => {
            r.runbook_error = Some(e.to_string());
            stage.finish().await;
            return Ok(r);
        }
    };
    r.detected_after_s = Some(detection.at_s - t_slow);
    r.detected = detection
        .verdict
        .slow_replica
        .as_ref()
        .map(|s| s.replica.clone());
    r.slowed_p99_s = p99_between(
        &stage,
        t_slow + sc.rate_window.as_secs_f64(),
        detection.at_s,
    );
    let inputs = declared_inputs(sc);
    let (clock, source) = (stage.clock, stage.source.clone());
    let outcome = run_runbook(&mut stage.sys, clock, source, &opts.runbook, inputs, None).await;
    let end = clock.now_s();
    r.runbook_s = Some(end - outcome.started_s);
    r.runbook_error = outcome.error.clone();
    sleep_s(measure).await;
    r.after_p99_s = p99_between(&stage, end, clock.now_s());
    stage.finish().await;

    r.baseline_p99_s = baseline(opts, spec).await?;
    r.recovered = r.runbook_error.is_none()
        && matches!((r.after_p99_s, r.healthy_p99_s), (Some(a), Some(h)) if a <= 2.0 * h);
    Ok(r)
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

/// The report in words.
pub fn render(r: &SlowReport) -> String {
    let mut out = format!(
        "slow-replica rehearsal ({}, runbook {}): {} made {}x slower\n",
        r.scenario, r.runbook, r.slowed, r.factor
    );
    match (&r.detected, r.detected_after_s) {
        (Some(d), Some(t)) => {
            out += &format!("  detected: slow_replica {d}, {t:.1} s after the slowdown\n")
        }
        _ => out += "  detected: no slow_replica verdict\n",
    }
    if let Some(t) = r.runbook_s {
        out += &format!(
            "  runbook: {:.1} s, {}\n",
            t,
            r.runbook_error.as_deref().unwrap_or("succeeded")
        );
    } else if let Some(e) = &r.runbook_error {
        out += &format!("  runbook: not run: {e}\n");
    }
    out += &format!(
        "  p99: healthy {}, slowed with the gate's balancing {}, after the runbook {}; slowed behind round robin (baseline, no runbook) {}\n",
        ms(r.healthy_p99_s),
        ms(r.slowed_p99_s),
        ms(r.after_p99_s),
        ms(r.baseline_p99_s)
    );
    out += &format!(
        "  recovered: {} (runbook done and p99 after within 2x the healthy p99)\n",
        if r.recovered { "yes" } else { "no" }
    );
    out
}
