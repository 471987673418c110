//! The receiver's moving parts: take parsed alerts, apply the pure decisions in
//! [`super::decide`], and carry them out: start detection, launch runs, schedule rechecks,
//! keep the registry, the budget file and the metrics in step. The one lock is never held
//! across an await, so a slow detection or run never blocks the webhook.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use super::alert::{AlertStatus, WebhookPayload};
use super::auth::Credentials;
use super::budget::BudgetBook;
use super::config::{read_secret, Route, ServeConfig};
use super::decide::{self, Activity, AfterCheck, Decision, Mode};
use super::launcher::{CheckRequest, LaunchRequest, RunLauncher, RunOutcome, RunReport};
use super::metrics::ServeMetrics;
use super::runs::{
    rfc3339, AlertRef, DecisionRecord, Recheck, Registry, RunRecord, RunState, Source,
};
use crate::detect::{Evidence, Verdict, VerdictKind};

/// A detection that takes longer than this is treated as Unknown: a hung check must not
/// leave the target marked as "checking" forever.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(300);

/// Why the receiver could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Secret(String),
    #[error("state file {file}: {message}")]
    State { file: String, message: String },
}

/// Budget and breaker of one target, for `GET /targets` and the admin reset.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TargetStatus {
    pub target: String,
    pub activity: Activity,
    pub budget: super::budget::BudgetView,
    pub last_failures: Vec<String>,
}

/// The receiver: configuration, the launcher, and everything it remembers.
pub struct Receiver {
    pub cfg: ServeConfig,
    pub mode: Mode,
    pub creds: Credentials,
    pub admin_token: Option<String>,
    launcher: Arc<dyn RunLauncher>,
    state: Mutex<Registry>,
    pub metrics: ServeMetrics,
}

impl Receiver {
    /// Read the secrets and the state file; refuse to start if either is wrong.
    pub fn new(
        cfg: ServeConfig,
        mode: Mode,
        launcher: Arc<dyn RunLauncher>,
    ) -> Result<Arc<Self>, StartError> {
        let secret = |what: &str, s: &Option<super::config::SecretRef>| {
            s.as_ref()
                .map(|s| read_secret(what, s))
                .transpose()
                .map_err(StartError::Secret)
        };
        let creds = Credentials {
            bearer_token: secret("auth.bearer_token", &cfg.auth.bearer_token)?,
            hmac_secret: secret("auth.hmac_secret", &cfg.auth.hmac_secret)?,
        };
        let admin_token = secret("auth.admin_token", &cfg.auth.admin_token)?;
        let book = match &cfg.state_file {
            Some(f) => load_state(f)?,
            None => BudgetBook::default(),
        };
        for (target, t) in &book.targets {
            if t.breaker_opened_at.is_some() {
                tracing::error!(target = %target, failures = t.failures,
                    "BREAKER OPEN (from the state file): not acting on {target} until `recover serve reset {target}`");
            }
        }
        let metrics = ServeMetrics::default();
        metrics.acting.set(i64::from(mode == Mode::Act));
        Ok(Arc::new(Receiver {
            cfg,
            mode,
            creds,
            admin_token,
            launcher,
            state: Mutex::new(Registry::with_budget(book)),
            metrics,
        }))
    }

    /// The registry; a poisoned lock still holds consistent data (updates are small and
    /// done in one place), so carry on rather than stop receiving alerts.
    pub fn state(&self) -> MutexGuard<'_, Registry> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Decide on every alert of a notification; returns the decisions, in order.
    pub fn handle(self: &Arc<Self>, payload: &WebhookPayload) -> Vec<DecisionRecord> {
        payload
            .alerts
            .iter()
            .map(|a| {
                self.metrics.alert(a.status.as_str());
                let alert = AlertRef {
                    fingerprint: a.fingerprint.clone(),
                    alertname: a.alertname().to_string(),
                    labels: a.labels.clone(),
                };
                self.handle_alert(alert, a.status, Source::Webhook)
            })
            .collect()
    }

    fn handle_alert(
        self: &Arc<Self>,
        alert: AlertRef,
        status: AlertStatus,
        source: Source,
    ) -> DecisionRecord {
        let now = SystemTime::now();
        let mut rec = DecisionRecord {
            seq: 0,
            at: rfc3339(now),
            source,
            fingerprint: alert.fingerprint.clone(),
            alertname: alert.alertname.clone(),
            status: status.as_str().to_string(),
            route: None,
            target: None,
            decision: String::new(),
            message: String::new(),
            run_id: None,
            check_id: None,
            verdict: None,
        };
        let Some(route) = self.cfg.route_for(&alert.labels).cloned() else {
            rec.decision = "no_route".into();
            rec.message = "no route matches the alert's labels".into();
            return self.log(&mut self.state(), rec);
        };
        let target = route.target.id();
        rec.route = Some(route.name.clone());
        rec.target = Some(target.clone());
        let mut st = self.state();
        if source == Source::Webhook {
            // A fresh alert (or its resolution) supersedes any recheck timer for it.
            st.cancel_recheck(&target, &alert.fingerprint);
        }
        let view = st.budget.view(&self.cfg.budget, &target, now);
        match decide::on_alert(status, &st.activity(&target), &view) {
            Decision::IgnoreResolved => {
                rec.decision = "ignored_resolved".into();
                rec.message = "resolved alerts never start anything".into();
            }
            Decision::JoinRun { run_id } => {
                let repeat = st
                    .runs
                    .get_mut(&run_id)
                    .is_some_and(|r| r.join(&alert.fingerprint, &alert.alertname, now));
                rec.decision = "joined_run".into();
                rec.message = if repeat {
                    format!("repeat of an alert already attached to run {run_id}")
                } else {
                    format!("run {run_id} is already in progress on {target}")
                };
                rec.run_id = Some(run_id);
            }
            Decision::JoinCheck { check_id } => {
                st.checks.entry(check_id.clone()).or_default().push(alert);
                rec.decision = "joined_check".into();
                rec.message = format!("detection {check_id} is already running on {target}");
                rec.check_id = Some(check_id);
            }
            Decision::Refuse(r) => {
                rec.decision = r.kind().into();
                rec.message = r.message(&target);
                if matches!(r, decide::Refusal::BreakerOpen { .. }) {
                    tracing::error!(target = %target, "{}", rec.message);
                } else {
                    tracing::warn!(target = %target, "{}", rec.message);
                }
            }
            Decision::Check => {
                let check_id = uuid::Uuid::now_v7().to_string();
                st.set_activity(
                    &target,
                    Activity::Checking {
                        check_id: check_id.clone(),
                    },
                );
                st.checks.insert(check_id.clone(), vec![alert]);
                rec.decision = "checking".into();
                rec.message = format!("running the detection of {} on {target}", route.runbook);
                rec.check_id = Some(check_id.clone());
                let me = self.clone();
                tokio::spawn(async move { me.check_then_act(check_id, route, source).await });
            }
        }
        self.log(&mut st, rec)
    }

    fn log(&self, st: &mut Registry, mut rec: DecisionRecord) -> DecisionRecord {
        self.metrics.decision(&rec.decision);
        if rec.message.is_empty() {
            rec.message = rec.decision.clone();
        }
        tracing::info!(decision = %rec.decision, fingerprint = %rec.fingerprint,
            target = rec.target.as_deref().unwrap_or("-"), "{}", rec.message);
        st.log(rec)
    }

    async fn check_then_act(self: Arc<Self>, check_id: String, route: Route, source: Source) {
        let target = route.target.id();
        let req = CheckRequest {
            route: route.name.clone(),
            runbook: route.runbook.clone(),
            target: route.target.clone(),
        };
        let launcher = self.launcher.clone();
        let verdict = match tokio::time::timeout(
            CHECK_TIMEOUT,
            tokio::spawn(async move { launcher.check(&req).await }),
        )
        .await
        {
            Ok(Ok(Ok(v))) => v,
            Ok(Ok(Err(e))) => unknown(&format!("detection failed: {e}")),
            Ok(Err(e)) => unknown(&format!("detection crashed: {e}")),
            Err(_) => unknown(&format!("detection took longer than {CHECK_TIMEOUT:?}")),
        };
        let now = SystemTime::now();
        let mut st = self.state();
        let alerts = st.checks.remove(&check_id).unwrap_or_default();
        st.set_activity(&target, Activity::Idle);
        let rechecks_done = alerts
            .iter()
            .filter_map(|a| st.rechecks.get(&(target.clone(), a.fingerprint.clone())))
            .map(|r| r.done)
            .max()
            .unwrap_or(0);
        let view = st.budget.view(&self.cfg.budget, &target, now);
        let after = decide::on_verdict(
            verdict.verdict,
            self.mode,
            &view,
            rechecks_done,
            &self.cfg.recheck,
        );
        let first = alerts.first().cloned().unwrap_or_else(|| AlertRef {
            fingerprint: String::new(),
            alertname: String::new(),
            labels: Default::default(),
        });
        let mut rec = DecisionRecord {
            seq: 0,
            at: rfc3339(now),
            source,
            fingerprint: first.fingerprint.clone(),
            alertname: first.alertname.clone(),
            status: "firing".into(),
            route: Some(route.name.clone()),
            target: Some(target.clone()),
            decision: String::new(),
            message: String::new(),
            run_id: None,
            check_id: Some(check_id),
            verdict: Some(verdict.verdict),
        };
        let evidence = summarize(&verdict);
        match after {
            AfterCheck::Launch { dry_run } => {
                for a in &alerts {
                    st.cancel_recheck(&target, &a.fingerprint);
                }
                let run_id = uuid::Uuid::now_v7().to_string();
                let req = LaunchRequest {
                    run_id: run_id.clone(),
                    route: route.name.clone(),
                    runbook: route.runbook.clone(),
                    target: route.target.clone(),
                    dry_run,
                    verdict: verdict.clone(),
                };
                let mut record = RunRecord {
                    id: run_id.clone(),
                    route: route.name.clone(),
                    runbook: route.runbook.clone(),
                    target: target.clone(),
                    dry_run,
                    state: RunState::Running,
                    started_at: rfc3339(now),
                    finished_at: None,
                    verdict,
                    alerts: vec![],
                    message: None,
                    journal: self.launcher.journal_path(&req),
                    report: None,
                };
                for a in &alerts {
                    record.join(&a.fingerprint, &a.alertname, now);
                }
                st.runs.insert(run_id.clone(), record);
                st.budget.record_start(&self.cfg.budget, &target, now);
                self.save_state(&st);
                st.set_activity(
                    &target,
                    Activity::Running {
                        run_id: run_id.clone(),
                    },
                );
                self.metrics.runs_in_progress.inc();
                rec.decision = if dry_run { "dry_run" } else { "launched" }.into();
                rec.message = format!(
                    "{}: {} {} on {target} ({evidence})",
                    "stuck",
                    if dry_run {
                        "would run (observe mode)"
                    } else {
                        "running"
                    },
                    route.runbook
                );
                rec.run_id = Some(run_id);
                let me = self.clone();
                tokio::spawn(async move { me.run(req).await });
            }
            AfterCheck::Recheck { after } => {
                for a in alerts {
                    let generation = st.next_generation();
                    let key = (target.clone(), a.fingerprint.clone());
                    let done = st.rechecks.get(&key).map_or(0, |r| r.done) + 1;
                    st.rechecks.insert(
                        key,
                        Recheck {
                            done,
                            generation,
                            alert: a.clone(),
                        },
                    );
                    let me = self.clone();
                    let t = target.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(after).await;
                        me.recheck(&t, &a.fingerprint, generation);
                    });
                }
                rec.decision = "recheck_scheduled".into();
                rec.message = format!(
                    "verdict {:?}: not acting; looking again in {} ({evidence})",
                    verdict.verdict,
                    crate::util::duration::format(after)
                );
            }
            AfterCheck::RechecksExhausted => {
                for a in &alerts {
                    st.cancel_recheck(&target, &a.fingerprint);
                }
                rec.decision = "rechecks_exhausted".into();
                rec.message = format!(
                    "verdict {:?} after {rechecks_done} rechecks: not acting; waiting for the alert to repeat ({evidence})",
                    verdict.verdict
                );
            }
            AfterCheck::Healthy => {
                for a in &alerts {
                    st.cancel_recheck(&target, &a.fingerprint);
                }
                rec.decision = "healthy".into();
                rec.message = format!("detection says healthy: not acting ({evidence})");
            }
            AfterCheck::Refuse(r) => {
                rec.decision = r.kind().into();
                rec.message = r.message(&target);
            }
        }
        self.log(&mut st, rec);
    }

    fn recheck(self: &Arc<Self>, target: &str, fingerprint: &str, generation: u64) {
        let alert = {
            let st = self.state();
            match st
                .rechecks
                .get(&(target.to_string(), fingerprint.to_string()))
            {
                Some(r) if r.generation == generation => r.alert.clone(),
                _ => return, // superseded: resolved, acted on, or a newer alert
            }
        };
        self.handle_alert(alert, AlertStatus::Firing, Source::Recheck);
    }

    async fn run(self: Arc<Self>, req: LaunchRequest) {
        let launcher = self.launcher.clone();
        let r = req.clone();
        let report = match tokio::spawn(async move { launcher.launch(&r).await }).await {
            Ok(report) => report,
            Err(e) => RunReport {
                outcome: RunOutcome::Failed,
                message: format!("the run crashed: {e}"),
                journal: None,
                details: None,
            },
        };
        let target = req.target.id();
        let now = SystemTime::now();
        let mut st = self.state();
        if let Some(rec) = st.runs.get_mut(&req.run_id) {
            rec.state = RunState::Finished(report.outcome);
            rec.finished_at = Some(rfc3339(now));
            rec.message = Some(report.message.clone());
            if report.journal.is_some() {
                rec.journal = report.journal.clone();
            }
            rec.report = report.details.clone();
        }
        st.set_activity(&target, Activity::Idle);
        let opened = st.budget.record_outcome(
            &self.cfg.budget,
            &target,
            report.outcome.is_failure(),
            &format!(
                "run {}: {}: {}",
                req.run_id,
                report.outcome.as_str(),
                report.message
            ),
            now,
        );
        self.save_state(&st);
        drop(st);
        self.metrics.runs_in_progress.dec();
        self.metrics.run_finished(report.outcome.as_str());
        tracing::info!(run_id = %req.run_id, target = %target, outcome = report.outcome.as_str(),
            "run finished: {}", report.message);
        if opened {
            tracing::error!(target = %target,
                "BREAKER OPEN on {target}: too many failed or aborted runs; not acting until `recover serve reset {target}`");
        }
    }

    fn save_state(&self, st: &Registry) {
        let Some(f) = &self.cfg.state_file else {
            return;
        };
        let result = serde_json::to_vec_pretty(&st.budget)
            .map_err(|e| e.to_string())
            .and_then(|b| crate::util::atomic_file::write_atomic(f, &b).map_err(|e| e.to_string()));
        if let Err(e) = result {
            tracing::error!("cannot write state file {}: {e}", f.display());
        }
    }

    /// Every target the receiver knows: from the routes and from the budget book.
    pub fn targets(&self) -> Vec<TargetStatus> {
        let now = SystemTime::now();
        let st = self.state();
        let mut ids: Vec<String> = self.cfg.routes.iter().map(|r| r.target.id()).collect();
        ids.extend(st.budget.targets.keys().cloned());
        ids.sort();
        ids.dedup();
        ids.into_iter()
            .map(|t| TargetStatus {
                activity: st.activity(&t),
                budget: st.budget.view(&self.cfg.budget, &t, now),
                last_failures: st
                    .budget
                    .targets
                    .get(&t)
                    .map(|b| b.last_failures.clone())
                    .unwrap_or_default(),
                target: t,
            })
            .collect()
    }

    /// A human reset of a target's breaker (and budget, if asked). `None`: unknown target.
    pub fn reset(&self, target: &str, budget: bool) -> Option<TargetStatus> {
        if !self.targets().iter().any(|t| t.target == target) {
            return None;
        }
        {
            let mut st = self.state();
            let before = st.budget.reset(target, budget);
            self.save_state(&st);
            tracing::warn!(target = %target, failures_before = before.failures, budget,
                "breaker reset by a human");
        }
        self.targets().into_iter().find(|t| t.target == target)
    }

    /// The metrics text, with per-target gauges brought up to date.
    pub fn encode_metrics(&self) -> String {
        for t in self.targets() {
            self.metrics
                .target(&t.target, t.budget.remaining, t.budget.breaker_open);
        }
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.metrics.registry()).is_err() {
            out.clear();
        }
        out
    }
}

fn unknown(note: &str) -> Verdict {
    Verdict {
        verdict: VerdictKind::Unknown,
        k: None,
        arrival_rate: None,
        capacity: None,
        capacity_cold: None,
        evidence: vec![Evidence {
            signal: "detection".into(),
            value: None,
            note: note.to_string(),
            ..Default::default()
        }],
        summary: note.to_string(),
        ..Default::default()
    }
}

/// One line of the verdict's evidence for the decision log.
fn summarize(v: &Verdict) -> String {
    let mut parts: Vec<String> = vec![];
    if !v.summary.is_empty() {
        parts.push(v.summary.clone());
    }
    if let Some(k) = v.k {
        parts.push(format!("k={k:.2}"));
    }
    if let Some(a) = v.arrival_rate {
        parts.push(format!("arrival={a:.1}/s"));
    }
    if v.summary.is_empty() {
        parts.extend(v.evidence.iter().take(3).map(|e| e.note.clone()));
    }
    if parts.is_empty() {
        "no evidence".into()
    } else {
        parts.join("; ")
    }
}

fn load_state(f: &PathBuf) -> Result<BudgetBook, StartError> {
    let err = |message: String| StartError::State {
        file: f.display().to_string(),
        message,
    };
    match std::fs::read(f) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| err(e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BudgetBook::default()),
        Err(e) => Err(err(e.to_string())),
    }
}
