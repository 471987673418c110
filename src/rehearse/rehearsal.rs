//! The rehearsal from start to report: stage the incident, detect, run the runbook through
//! the engine, verify a held steady state, tear down, then the baselines.
//!
//! Why it exists: this is the sequence docs/guide/rehearsing.md promises; keeping it in one
//! short function makes the order of events (and so the report's clock) easy to audit.

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
use crate::engine::{Observer, ProgressEvent};
use crate::plan::{MissingInputs, Overrides, PlanInputs, Source, SourcedInputs};
use crate::runbook::LoadedRunbook;
use crate::simulate::Readmission;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to rehearse and where to put the results.
#[derive(Clone)]
pub struct Options {
    pub scenario: Scenario,
    /// The runbook, found and validated by the caller (`runbook::find`).
    pub runbook: LoadedRunbook,
    pub baselines: bool,
    /// Run directory: logs, gate state, journal, and the report files.
    pub report_dir: PathBuf,
    /// The `recover` binary to start the components with.
    pub exe: PathBuf,
    /// Who shows the runbook's progress (None: the log).
    pub observer: Option<Arc<dyn Observer>>,
}

/// The report and the series it was computed from (on the report's clock).
pub struct Rehearsed {
    pub report: Report,
    pub samples: Vec<Sample>,
    /// The engine's summary table, if it ran.
    pub engine_summary: String,
}

/// Run the whole rehearsal. An `Err` means no incident could even be staged; a failed
/// recovery is an `Ok` report with `recovered: false`.
pub async fn rehearse(opts: &Options) -> Result<Rehearsed, StageError> {
    if let Some(spec) = &opts.scenario.slow_replica {
        return super::slow_replica::rehearse_slow(opts, spec).await;
    }
    let wall = Instant::now();
    // reqwest clients below (ours, the scrape source's, the local platform's) need it.
    crate::util::http::ensure_tls_provider();
    let sc = &opts.scenario;
    let rb = &opts.runbook.runbook;
    // Attached late, the detector knows only what the runbook declares, what it sees and
    // the metrics history from before it attached.
    let detector = match sc.attach_after {
        Some(_) => rb.detect.clone(),
        None => detector_config(&rb.detect, sc),
    };
    let mut stage = Stage::start(&opts.exe, sc, &rb.signals, &opts.report_dir.join("main")).await?;
    let trig = stage.trigger().await?;
    tracing::info!(
        "trigger over after {:.1} s; waiting for the detector",
        trig.ended_s - trig.fired_s
    );
    let attached_s = match sc.attach_after {
        Some(after) => {
            stage.until(trig.ended_s + after.as_secs_f64()).await;
            stage.attach(&rb.signals)?;
            tracing::info!(
                "attached {} after the trigger ended; earlier scrapes are metrics history only",
                crate::util::duration::format(after)
            );
            Some(stage.clock.now_s())
        }
        None => None,
    };
    let detection = wait_stuck(&stage.feed, stage.clock, &detector, sc.detect_timeout).await;
    let mut failure = None;
    let mut not_stuck = None;
    let mut inputs = None;
    let mut runbook = RunbookOutcome::default();
    let mut steady_at = None;
    match &detection {
        Ok(d) => {
            tracing::info!(
                "stuck detected {:.1} s after the trigger ended; running runbook {}",
                d.at_s - trig.ended_s,
                rb.name
            );
            let (clock, source) = (stage.clock, stage.source.clone());
            let planned = plan_inputs(d, &stage, sc, &detector, attached_s.is_some());
            inputs = planned.as_ref().ok().cloned();
            runbook = match planned {
                Ok(inputs) => {
                    let observer = probing_at_decision(&stage, opts.observer.clone());
                    run_runbook(
                        &mut stage.sys,
                        clock,
                        source,
                        &opts.runbook,
                        inputs,
                        observer,
                    )
                    .await
                }
                Err(e) => RunbookOutcome {
                    started_s: clock.now_s(),
                    error: Some(e.to_string()),
                    ..RunbookOutcome::default()
                },
            };
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
        // Healthy at the end of the wait: the trigger did not leave it stuck. That is
        // not a failed recovery; say what to make harsher.
        Err(e) if e.last == Some(crate::detect::VerdictKind::Healthy) => {
            let n = super::harsher::not_stuck(sc);
            tracing::warn!("{}", n.message);
            failure = Some(n.message.clone());
            not_stuck = Some(n);
        }
        Err(e) => failure = Some(e.to_string()),
    }
    let end_s = stage.clock.now_s();
    let steady_before_s = stage.steady_from_s;
    let start_to_ready = stage.sys.start_to_ready;
    let markers = stage.sys.markers();
    let endpoints = stage.sys.endpoints();
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
            let outcome = baselines::run(b, &opts.exe, sc, &rb.signals, &detector, &dir).await?;
            base.insert(b.name().to_string(), outcome);
        }
    }
    let predicted = match (&runbook.plan, &detection) {
        (Some(plan), Ok(_)) => {
            let first_action_s = runbook
                .steps
                .first()
                .map_or(runbook.started_s, |s| s.start_s);
            let after = Duration::from_secs_f64((first_action_s - trig.ended_s).max(0.0));
            // Read on the run's own scrape ticks (those the steady check reads; none
            // after the first action: no measured time either), the gate standing at the
            // admit rate as long as the run's did.
            let timing = super::predict::RunTiming {
                scrape_phase: super::predict::scrape_phase(
                    rec.raws
                        .iter()
                        .map(|r| r.t_s)
                        .filter(|&t| t >= runbook.started_s),
                    first_action_s,
                    sc.record_interval,
                )
                .unwrap_or_default(),
                readmit_after: super::predict::readmit_after(rb, &runbook.steps),
            };
            // The model follows what the run did: a restart or a drain alone, a warm
            // call or none.
            super::predict::predicted_time_to_recover(
                sc,
                plan,
                after,
                runbook.restarted,
                runbook.warmed,
                inputs
                    .as_ref()
                    .and_then(|i| Readmission::of(rb, &i.values())),
                timing,
            )
        }
        _ => Err("unknown: the runbook made no plan".into()),
    };
    let facts = Facts {
        scenario: sc,
        runbook_name: &rb.name,
        steady_from_s: steady_before_s,
        trigger: trig,
        detection: detection.as_ref().ok(),
        detector: &detector,
        plan: runbook.plan.as_ref(),
        runbook: &runbook,
        steady_at_s: steady_at,
        end_s,
        failure,
        baselines: base,
        wall_time_s: wall.elapsed().as_secs_f64(),
        endpoints,
        predicted: predicted.as_ref().ok().copied(),
        predicted_unknown: predicted.err(),
        attached_s,
        inputs,
        not_stuck,
        start_to_ready_s: start_to_ready.map(|d| d.as_secs_f64()),
    };
    let (report, samples) = assemble(facts, &rec);
    Ok(Rehearsed {
        report,
        samples,
        engine_summary: runbook.summary.clone(),
    })
}

/// The runbook's detector settings, completed with what the rehearsal configured (it
/// built the system, so healthy capacity and the cold factor are known, not guessed) where
/// the runbook leaves them open.
pub fn detector_config(from_runbook: &DetectorConfig, sc: &Scenario) -> DetectorConfig {
    let mut cfg = from_runbook.clone();
    cfg.capacity_per_s = cfg.capacity_per_s.or(Some(sc.capacity_per_s()));
    cfg.cold_factor = cfg.cold_factor.or(Some(sc.service.cold_factor));
    cfg
}

/// Plan inputs from the verdict's estimates, falling back to what the rehearsal measured
/// (the offered rate) or configured (it built the system, so what it set counts as
/// declared) where the detector left one out. Attached late (`attached`), only the
/// verdict (its window and the metrics history it looked back over) and what the runbook
/// declares count: the engineer arriving at 3 am knows no more.
fn plan_inputs(
    d: &Detection,
    stage: &Stage,
    sc: &Scenario,
    detector: &DetectorConfig,
    attached: bool,
) -> Result<SourcedInputs, MissingInputs> {
    let recent = stage.recorder.samples_since(d.at_s - 3.0);
    let offered: Vec<f64> = recent.iter().filter_map(|s| s.offered_per_s).collect();
    let offered = (!offered.is_empty()).then(|| offered.iter().sum::<f64>() / offered.len() as f64);
    inputs_from_verdict(&d.verdict, offered, sc, detector, attached)
}

/// [`plan_inputs`] without the stage: `offered` is the mean offered rate of the last
/// 3 s the rehearsal measured, if any. Pure (the simulator's grid report plans with it).
pub fn inputs_from_verdict(
    verdict: &crate::detect::Verdict,
    offered: Option<f64>,
    sc: &Scenario,
    detector: &DetectorConfig,
    attached: bool,
) -> Result<SourcedInputs, MissingInputs> {
    let mut verdict = verdict.clone();
    if verdict.arrival_rate.is_none() {
        let (arrival, source) = match offered {
            None => (sc.demand_per_s(), Source::Declared),
            Some(mean) => (mean, Source::Measured),
        };
        verdict.arrival_rate = Some(arrival);
        verdict.sources.arrival_rate = Some(source);
    }
    if attached {
        crate::plan::assume_k_max_where_unknown(&mut verdict, detector);
        return PlanInputs::from_verdict(&verdict, detector, &Overrides::default());
    }
    let configured = DetectorConfig {
        capacity_per_s: Some(sc.capacity_per_s()),
        cold_factor: Some(sc.service.cold_factor),
        k: Some(sc.service.overload_factor),
        demand_per_s: Some(sc.demand_per_s()),
        ..detector.clone()
    };
    PlanInputs::from_verdict(&verdict, &configured, &Overrides::default())
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

/// The runbook's observer, scraping the system once more when the engine has decided and
/// is about to act: the lower bound counts from that state, milliseconds before the first
/// step, not from the grid's last scrape up to an interval earlier (during which no
/// procedure has acted yet, but the bound would credit one that had).
fn probing_at_decision(
    stage: &Stage,
    inner: Option<Arc<dyn Observer>>,
) -> Option<Arc<dyn Observer>> {
    let Some(prober) = stage.recorder.prober() else {
        return inner;
    };
    struct ProbeAtDecision {
        prober: super::recorder::Prober,
        inner: Option<Arc<dyn Observer>>,
    }
    impl Observer for ProbeAtDecision {
        fn event(&self, run_id: &str, e: &ProgressEvent) {
            if matches!(e, ProgressEvent::Decided { .. }) {
                self.prober.probe_now();
            }
            if let Some(o) = &self.inner {
                o.event(run_id, e);
            }
        }
    }
    Some(Arc::new(ProbeAtDecision { prober, inner }))
}
