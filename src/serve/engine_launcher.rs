//! The real [`RunLauncher`]: runs a runbook's own detection and the runbook itself with
//! the runbook engine ([`crate::engine::run`]), in-process, against the platform a route
//! names. The engine re-observes and re-decides before it acts (and takes the target's
//! lock), so a verdict that went stale between the check and the run refuses the run
//! instead of acting on old data.

use std::path::PathBuf;
use std::sync::Arc;

use super::config::ServeConfig;
use super::launcher::{
    CheckRequest, LaunchError, LaunchRequest, RunLauncher, RunOutcome, RunSummary,
};
use crate::detect::windows::Fields;
use crate::detect::{watch, Verdict, VerdictKind, Watch};
use crate::engine::{self, Outcome, RunOptions, RunRequest};
use crate::metrics::promql::PromqlSource;
use crate::metrics::source::MetricSource;
use crate::plan::{Overrides, PlanInputs};
use crate::platform::target::PROMETHEUS_TIMEOUT;
use crate::platform::{connect, ConnectError, Platform, Target};
use crate::runbook::LoadedRunbook;

/// A runbook with the platform and metric source it runs against.
type Prepared = (LoadedRunbook, Arc<dyn Platform>, Arc<dyn MetricSource>);

/// Runs detection and runbooks with the engine.
pub struct EngineLauncher {
    pub runbook_dirs: Vec<PathBuf>,
    pub journal_dir: PathBuf,
    /// Cancelled when the receiver stops; each run gets a child token.
    pub cancel: tokio_util::sync::CancellationToken,
}

/// Build the launcher for `cfg`.
pub fn launcher(cfg: &ServeConfig) -> Result<Arc<dyn RunLauncher>, LaunchError> {
    Ok(Arc::new(EngineLauncher {
        runbook_dirs: cfg.runbook_dir.iter().cloned().collect(),
        journal_dir: cfg
            .journal_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from("recover-runs")),
        cancel: tokio_util::sync::CancellationToken::new(),
    }))
}

impl EngineLauncher {
    async fn prepare(&self, runbook: &str, target: &Target) -> Result<Prepared, LaunchError> {
        let rb = crate::runbook::find(runbook, &self.runbook_dirs)?;
        let (platform, metrics) = connect(target).await?;
        Ok((rb, platform, metrics))
    }
}

#[async_trait::async_trait]
impl RunLauncher for EngineLauncher {
    async fn check(&self, req: &CheckRequest) -> Result<Verdict, LaunchError> {
        let (loaded, metrics) = match &req.prometheus {
            // The history the alert was judged on: the window is there at once.
            Some(url) => {
                let source = PromqlSource::new(url, PROMETHEUS_TIMEOUT).map_err(|source| {
                    ConnectError::Prometheus {
                        url: url.clone(),
                        source,
                    }
                })?;
                let rb = crate::runbook::find(&req.runbook, &self.runbook_dirs)?;
                (rb, Arc::new(source) as Arc<dyn MetricSource>)
            }
            None => {
                let (rb, _platform, metrics) = self.prepare(&req.runbook, &req.target).await?;
                (rb, metrics)
            }
        };
        let rb = &loaded.runbook;
        // The same window the engine observes before it decides, judged the same way: a
        // service stuck for longer than the window shows no healthy moment in it, so the
        // judgement looks back over the metrics history for what the window lacks.
        let fields = Fields::runbook();
        let w = Watch {
            signals: &rb.signals,
            config: &rb.detect,
            fields: &fields,
            interval: rb.observe.interval,
            span: rb.observe.span,
            at: None,
            scrape: None,
            look_back: true,
        };
        Ok(watch(metrics.as_ref(), &w, |_| {}).await?.verdict)
    }

    fn cancel_all(&self) {
        self.cancel.cancel();
    }

    async fn gate_limit(&self, target: &Target) -> Result<crate::gate::limit::Limit, LaunchError> {
        let (platform, _metrics) = connect(target).await?;
        Ok(platform.gate().get_limit().await?)
    }

    async fn launch(&self, req: &LaunchRequest) -> RunSummary {
        let (mut runbook, platform, metrics) = match self.prepare(&req.runbook, &req.target).await {
            Ok(p) => p,
            Err(e) => return report(RunOutcome::Failed, e.to_string(), None),
        };
        if !runbook.runbook.when.contains(&VerdictKind::Stuck) {
            return report(
                RunOutcome::Refused,
                format!(
                    "runbook {} does not run on a stuck verdict (when: {:?})",
                    req.runbook, runbook.runbook.when
                ),
                None,
            );
        }
        // The check just observed a full window and said Stuck: plan from that verdict and
        // let the engine take only a short look before acting (as the rehearsal does),
        // instead of waiting out a second detection window while the service is down.
        let inputs =
            PlanInputs::from_verdict(&req.verdict, &runbook.runbook.detect, &Overrides::default())
                .ok();
        if inputs.is_some() {
            runbook.runbook.observe.span = Some(runbook.runbook.observe.interval);
        }
        let options = RunOptions {
            dry_run: req.dry_run,
            journal_dir: self.journal_dir.clone(),
            target: Some(req.target.clone()),
            started_by: Some(format!(
                "recover serve, route {}, serve run {}",
                req.route, req.run_id
            )),
            // The receiver is the confirmation: it has authenticated the alert and checked.
            confirm: None,
            inputs,
            ..RunOptions::default()
        };
        let request = RunRequest {
            runbook,
            platform,
            metrics,
            options,
        };
        match engine::run(request, self.cancel.child_token()).await {
            Ok(r) => {
                let outcome = match r.outcome {
                    Outcome::Succeeded => RunOutcome::Succeeded,
                    Outcome::Failed => RunOutcome::Failed,
                    Outcome::Aborted => RunOutcome::Aborted,
                    Outcome::Planned => RunOutcome::DryRun,
                };
                let message = r
                    .message
                    .clone()
                    .unwrap_or_else(|| format!("engine run {} {}", r.run_id, outcome.as_str()));
                let mut out = report(outcome, message, serde_json::to_value(&r).ok());
                out.journal = r.journal.as_ref().map(PathBuf::from);
                out
            }
            Err(e) => {
                // Refusals changed nothing and say nothing about the runbook; anything
                // else (bad runbook, unreadable metrics, a broken journal) needs a human.
                let outcome = if e.is_refusal() {
                    RunOutcome::Refused
                } else {
                    RunOutcome::Failed
                };
                report(outcome, e.to_string(), None)
            }
        }
    }
}

fn report(outcome: RunOutcome, message: String, details: Option<serde_json::Value>) -> RunSummary {
    RunSummary {
        outcome,
        message,
        journal: None,
        details,
    }
}
