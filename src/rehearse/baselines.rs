//! Baselines: the same trigger on a fresh system, handled the ways people usually try:
//! do nothing, restart the service, shed 20% at the edge.
//!
//! Why it exists: "the runbook recovered" convinces only next to "and these did not". Each
//! baseline acts at the moment the runbook would (when the detector says Stuck) and is
//! then watched for `scenario.baseline_observe`.

use super::detection::wait_stuck;
use super::recorder::Clock;
use super::report::BaselineOutcome;
use super::scenario::Scenario;
use super::series::Sample;
use super::stage::{Stage, StageError};
use super::verify::{goodput_ratio_end, steady_from, SteadyCriteria};
use crate::detect::DetectorConfig;
use crate::gate::limit::Limit;
use crate::metrics::signal::SignalSpec;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The baselines, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    NoIntervention,
    PlainRestart,
    Shed20,
}

impl Baseline {
    pub const ALL: [Baseline; 3] = [
        Baseline::NoIntervention,
        Baseline::PlainRestart,
        Baseline::Shed20,
    ];

    /// The key in `report.json`'s `baselines`.
    pub fn name(self) -> &'static str {
        match self {
            Baseline::NoIntervention => "no-intervention",
            Baseline::PlainRestart => "plain-restart",
            Baseline::Shed20 => "shed-20pct",
        }
    }
}

/// Run one baseline on a fresh system under `dir`.
pub async fn run(
    which: Baseline,
    exe: &Path,
    scenario: &Scenario,
    signals: &BTreeMap<String, SignalSpec>,
    detector: &DetectorConfig,
    dir: &Path,
) -> Result<BaselineOutcome, StageError> {
    let mut stage = Stage::start(exe, scenario, signals, dir).await?;
    let trig = stage.trigger().await?;
    let clock: Clock = stage.clock;
    // Act when the runbook would; if the detector stays silent, act anyway at its timeout
    // (the baseline's point is what the action does, not whether detection works).
    let detected = wait_stuck(&stage.feed, clock, detector, scenario.detect_timeout).await;
    let act_s = clock.now_s();
    let intervention = match which {
        Baseline::NoIntervention => "nothing".to_string(),
        Baseline::PlainRestart => {
            for i in 0..scenario.replicas as usize {
                stage.sys.restart_replica(i, Duration::ZERO)?;
            }
            for i in 0..scenario.replicas as usize {
                stage
                    .sys
                    .wait_replica_ready(i, Duration::from_secs(20))
                    .await?;
            }
            "restart every replica at once (no startup delay)".to_string()
        }
        Baseline::Shed20 => {
            let arrival = arrival_now(&stage.recorder.samples_since(act_s - 3.0));
            let rate = 0.8 * arrival;
            stage
                .sys
                .set_gate_limit(&Limit {
                    rate_per_s: Some(rate),
                    burst: (rate / 10.0).ceil().max(1.0) as u32,
                    max_in_flight: None,
                    note: Some("rehearsal baseline: shed 20% of arrivals".into()),
                    shadow: false,
                })
                .await?;
            format!("gate at 80% of arrival ({rate:.1} of {arrival:.1} req/s)")
        }
    };
    let intervention = match detected {
        Ok(_) => intervention,
        Err(e) => format!("{intervention} (acted without a Stuck verdict: {e})"),
    };
    stage
        .until(trig.ended_s + scenario.baseline_observe.as_secs_f64())
        .await;
    let observed_s = clock.now_s() - trig.ended_s;
    let rec = stage.finish().await;
    Ok(judge(
        &rec.samples,
        act_s,
        scenario,
        intervention,
        observed_s,
    ))
}

/// Mean offered rate over `samples`, the arrival the shed is a fraction of.
fn arrival_now(samples: &[Sample]) -> f64 {
    let v: Vec<f64> = samples.iter().filter_map(|s| s.offered_per_s).collect();
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Pure: did the samples after the action reach and hold steady state?
pub fn judge(
    samples: &[Sample],
    act_s: f64,
    scenario: &Scenario,
    intervention: String,
    observed_s: f64,
) -> BaselineOutcome {
    let after: Vec<Sample> = samples.iter().filter(|s| s.t_s >= act_s).cloned().collect();
    let demand = scenario.demand_per_s();
    let recovered = steady_from(
        &after,
        demand,
        scenario.workers.count,
        &SteadyCriteria::default(),
        scenario.hold.as_secs_f64(),
    )
    .is_some();
    BaselineOutcome {
        recovered,
        goodput_ratio_end: goodput_ratio_end(&after, demand, 5.0),
        intervention,
        observed_s,
    }
}
