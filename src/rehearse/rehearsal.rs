//! The rehearsal from start to report: stage the incident, detect, plan, run the runbook,
//! verify a held steady state, tear down, then the baselines.
//!
//! Why it exists: this is the sequence the README promises; keeping it in one short
//! function makes the order of events (and so the report's clock) easy to audit.

use super::assemble::{assemble, Facts};
use super::baselines::{self, Baseline};
use super::detection::{wait_stuck, Detection};
use super::recovery::{run_runbook, RunbookOutcome};
use super::report::Report;
use super::scenario::Scenario;
use super::series::Sample;
use super::stage::{Stage, StageError};
use super::verify::{steady_from, SteadyCriteria};
use crate::detect::DetectorConfig;
use crate::plan::{make_plan, Plan, PlanConfig, PlanInputs};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What to rehearse and where to put the results.
#[derive(Debug, Clone)]
pub struct Options {
    pub scenario: Scenario,
    pub runbook: String,
    pub runbook_dir: Option<PathBuf>,
    pub baselines: bool,
    /// Run directory: logs, gate state, and the report files.
    pub report_dir: PathBuf,
    /// The `recover` binary to start the components with.
    pub exe: PathBuf,
}

/// The report and the series it was computed from (on the report's clock).
pub struct Outcome {
    pub report: Report,
    pub samples: Vec<Sample>,
}

/// Run the whole rehearsal. An `Err` means no incident could even be staged; a failed
/// recovery is an `Ok` report with `recovered: false`.
pub async fn rehearse(opts: &Options) -> Result<Outcome, StageError> {
    let wall = Instant::now();
    let sc = &opts.scenario;
    let detector = detector_config(sc);
    let mut stage = Stage::start(&opts.exe, sc, &opts.report_dir.join("main")).await?;
    let trig = stage.trigger().await?;
    tracing::info!(
        "trigger over after {:.1} s; waiting for the detector",
        trig.ended_s - trig.fired_s
    );
    let detection = wait_stuck(
        &stage.recorder,
        stage.clock,
        &detector,
        trig.ended_s,
        sc.replicas,
        30.0,
        sc.detect_timeout,
    )
    .await;
    let mut failure = None;
    let mut plan = None;
    let mut runbook = RunbookOutcome::default();
    let mut steady_at = None;
    match &detection {
        Ok(d) => {
            tracing::info!(
                "stuck detected {:.1} s after the trigger ended",
                d.at_s - trig.ended_s
            );
            let p = plan_for(d, &stage, sc);
            runbook = run_runbook(
                &mut stage,
                &opts.runbook,
                opts.runbook_dir.as_deref(),
                &d.verdict,
                &p,
            )
            .await;
            plan = Some(p);
            match &runbook.error {
                Some(e) => failure = Some(format!("runbook failed: {e}")),
                None => {
                    steady_at = wait_recovered(&stage, runbook.started_s).await;
                    if steady_at.is_none() {
                        failure = Some(format!(
                            "no steady state held for {} within {} of the runbook's start",
                            crate::util::duration::format(sc.hold),
                            crate::util::duration::format(sc.recovery_timeout)
                        ));
                    }
                }
            }
        }
        Err(e) => failure = Some(e.to_string()),
    }
    let end_s = stage.clock.now_s();
    let steady_before_s = stage.steady_from_s;
    let markers = stage.sys.markers();
    let rec = stage.finish().await;
    let leftovers = super::orchestrate::find_processes(&markers);
    if !leftovers.is_empty() {
        tracing::warn!("processes still running after teardown: {leftovers:?}");
    }
    let mut base = std::collections::BTreeMap::new();
    if opts.baselines {
        for b in Baseline::ALL {
            tracing::info!("baseline {}", b.name());
            let dir = opts.report_dir.join("baselines").join(b.name());
            let outcome = baselines::run(b, &opts.exe, sc, &detector, &dir).await?;
            base.insert(b.name().to_string(), outcome);
        }
    }
    let facts = Facts {
        scenario: sc,
        runbook_name: &opts.runbook,
        steady_from_s: steady_before_s,
        trigger: trig,
        detection: detection.as_ref().ok(),
        plan: plan.as_ref(),
        runbook: &runbook,
        steady_at_s: steady_at,
        end_s,
        failure,
        baselines: base,
        wall_time_s: wall.elapsed().as_secs_f64(),
    };
    let (report, samples) = assemble(facts, &rec);
    Ok(Outcome { report, samples })
}

/// The detector's settings: the runbook's defaults, with the capacity the rehearsal
/// configured (it built the system, so capacity is known, not guessed).
fn detector_config(sc: &Scenario) -> DetectorConfig {
    DetectorConfig {
        capacity_per_s: Some(sc.capacity_per_s()),
        cold_factor: Some(sc.service.cold_factor),
        ..DetectorConfig::default()
    }
}

/// The plan from the verdict's estimates, falling back to what the rehearsal measured or
/// configured when the detector left one out.
fn plan_for(d: &Detection, stage: &Stage, sc: &Scenario) -> Plan {
    let v = &d.verdict;
    let recent = stage.recorder.samples_since(d.at_s - 3.0);
    let offered: Vec<f64> = recent.iter().filter_map(|s| s.offered_per_s).collect();
    let measured_arrival = if offered.is_empty() {
        sc.demand_per_s()
    } else {
        offered.iter().sum::<f64>() / offered.len() as f64
    };
    let inputs = PlanInputs {
        arrival_rate: v.arrival_rate.unwrap_or(measured_arrival),
        capacity_cold: v.capacity_cold.unwrap_or(sc.capacity_cold_per_s()),
        k: v.k.unwrap_or(sc.service.overload_factor),
        capacity: v.capacity.or(Some(sc.capacity_per_s())),
        demand: Some(sc.demand_per_s()),
    };
    make_plan(&inputs, &PlanConfig::default())
}

/// Wait until steady state has held for the hold period after `from_s`, or the recovery
/// timeout passes. Returns when that steady state began.
async fn wait_recovered(stage: &Stage, from_s: f64) -> Option<f64> {
    let sc = &stage.scenario;
    let deadline = from_s + sc.recovery_timeout.as_secs_f64();
    let c = SteadyCriteria::default();
    while stage.clock.now_s() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let samples = stage.recorder.samples_since(from_s);
        if let Some(t) = steady_from(
            &samples,
            sc.demand_per_s(),
            sc.workers.count,
            &c,
            sc.hold.as_secs_f64(),
        ) {
            return Some(t);
        }
    }
    None
}
