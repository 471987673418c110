//! One staged incident: the system started, recorded, steady, then triggered. The main
//! rehearsal and every baseline begin the same way, so they share this.
//!
//! Why it exists: a baseline is only a fair comparison if it starts from the same system
//! in the same state with the same trigger; one code path guarantees that.

use super::detection::SignalFeed;
use super::orchestrate::{OrchestrateError, System};
use super::recorder::{Clock, Recorder, Recording};
use super::scenario::Scenario;
use super::trigger::{restart_with_outage, TriggerTimes};
use super::verify::{check, SteadyCriteria};
use crate::metrics::scrape::ScrapeSource;
use crate::metrics::signal::SignalSpec;
use crate::platform::ScrapeEndpoint;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A running system with its recorder.
pub struct Stage {
    pub clock: Clock,
    pub recorder: Recorder,
    /// The runbook's signals, read through the shared scrape source, for the detector.
    pub feed: SignalFeed,
    /// The scrape source behind the feed; the engine reads through it too, so its rate
    /// windows always have history (the feed scrapes it every interval).
    pub source: Arc<ScrapeSource>,
    pub sys: System,
    pub scenario: Scenario,
    /// When steady state began before the trigger (rehearsal clock).
    pub steady_from_s: f64,
}

/// Why a stage could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error(transparent)]
    System(#[from] OrchestrateError),
    #[error("metric source: {0}")]
    Metrics(#[from] crate::metrics::source::MetricError),
    #[error("the system never reached steady state before the trigger ({0})")]
    NeverSteady(String),
}

/// How long the system may take to reach steady state, before the steady phase itself.
const STEADY_TIMEOUT: Duration = Duration::from_secs(40);

impl Stage {
    /// Start the system and recorder and wait for `scenario.steady` of steady state.
    pub async fn start(
        exe: &Path,
        scenario: &Scenario,
        signals: &BTreeMap<String, SignalSpec>,
        run_dir: &Path,
    ) -> Result<Stage, StageError> {
        let clock = Clock::start();
        let sys = System::start(exe, scenario, run_dir).await?;
        let recorder = Recorder::start(
            sys.targets(),
            clock,
            scenario.record_interval,
            scenario.rate_window,
        );
        let source = Arc::new(ScrapeSource::from_urls(
            scrape_endpoints(&sys),
            scenario.scrape_interval,
        )?);
        let feed = SignalFeed::start(source.clone(), signals.clone(), scenario.scrape_interval);
        let mut stage = Stage {
            clock,
            recorder,
            feed,
            source,
            sys,
            scenario: scenario.clone(),
            steady_from_s: 0.0,
        };
        stage.steady_from_s = stage
            .wait_steady(scenario.steady, STEADY_TIMEOUT + scenario.steady)
            .await?;
        Ok(stage)
    }

    /// Wait until every sample has been steady for `hold`; returns when that run began.
    async fn wait_steady(&self, hold: Duration, timeout: Duration) -> Result<f64, StageError> {
        let c = SteadyCriteria::default();
        let demand = self.scenario.demand_per_s();
        let workers = self.scenario.workers.count;
        let start = self.clock.now_s();
        // The first rate window is partial; judge only full windows.
        let first_full = start + self.scenario.rate_window.as_secs_f64();
        let mut since: Option<f64> = None;
        let mut seen = 0;
        let mut why = String::from("no samples");
        while self.clock.now_s() - start < timeout.as_secs_f64() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let samples = self.recorder.samples_since(first_full);
            if samples.len() == seen {
                continue;
            }
            for s in &samples[seen..] {
                match check(s, demand, workers, &c) {
                    Ok(()) => {
                        since.get_or_insert(s.t_s);
                    }
                    Err(e) => {
                        since = None;
                        why = e;
                    }
                }
            }
            seen = samples.len();
            if let (Some(t), Some(last)) = (since, samples.last()) {
                if last.t_s - t >= hold.as_secs_f64() {
                    return Ok(t);
                }
            }
        }
        Err(StageError::NeverSteady(why))
    }

    /// Start watching afresh, as someone arriving now would: a new scrape source and
    /// signal feed whose detection window starts at this moment, with the scrapes from
    /// before it as the metrics history a Prometheus would have retained (the detector
    /// looks back over them for the healthy reference). The recorder, the rehearsal's
    /// outside view, keeps recording.
    pub fn attach(&mut self, signals: &BTreeMap<String, SignalSpec>) -> Result<(), StageError> {
        self.source = Arc::new(ScrapeSource::from_urls(
            scrape_endpoints(&self.sys),
            self.scenario.scrape_interval,
        )?);
        self.feed = SignalFeed::attach(
            &self.feed,
            self.source.clone(),
            signals.clone(),
            self.scenario.scrape_interval,
        );
        Ok(())
    }

    /// Fire the trigger (restart with the scenario's outage).
    pub async fn trigger(&mut self) -> Result<TriggerTimes, StageError> {
        Ok(restart_with_outage(&mut self.sys, self.clock, self.scenario.outage).await?)
    }

    /// Sleep until `t_s` on the rehearsal clock.
    pub async fn until(&self, t_s: f64) {
        let wait = t_s - self.clock.now_s();
        if wait > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
        }
    }

    /// Stop recording and tear the system down.
    pub async fn finish(self) -> Recording {
        let Stage {
            recorder, mut sys, ..
        } = self;
        let rec = recorder.stop().await;
        sys.stop();
        rec
    }
}

/// The system's `/metrics` pages as the shared scrape source names them.
pub fn scrape_endpoints(sys: &System) -> Vec<ScrapeEndpoint> {
    sys.targets()
        .into_iter()
        .map(|t| ScrapeEndpoint {
            role: match t.role {
                super::series::Role::Gate => "gate",
                super::series::Role::Service => "service",
                super::series::Role::Clients => "clients",
            }
            .to_string(),
            instance: t.instance,
            locator: t.url,
        })
        .collect()
}
