//! The receiver's moving parts: take parsed alerts, apply the pure decisions in
//! [`super::policy`], and carry them out: start detection, launch runs, schedule rechecks,
//! keep the registry, the budget file and the metrics in step. The one lock is never held
//! across an await, so a slow detection or run never blocks the webhook. What happens
//! after detection lives in [`act`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use super::alert::{Alert, AlertStatus};
use super::auth::{Credentials, SIGNATURE_WINDOW};
use super::budget::BudgetBook;
use super::config::{read_secret, ServeConfig};
use super::launcher::RunLauncher;
use super::log_lines::{self, clean, Emit, Level, Repeats};
use super::metrics::ServeMetrics;
use super::policy::{self, Activity, AlertAction, Mode};
use super::replay::{ReplayGuard, MAX_REMEMBERED};
use super::runs::{rfc3339, AlertRef, CheckAlerts, DecisionRecord, Registry, Source};
use super::state::{FileStore, StateStore};

mod act;
mod standing;
pub use act::CHECK_TIMEOUT;

/// Why the receiver could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Secret(#[from] super::config::SecretError),
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
    /// Signatures already used within their window.
    pub replays: ReplayGuard,
    pub admin_token: Option<String>,
    launcher: Arc<dyn RunLauncher>,
    state: Mutex<Registry>,
    /// Where budgets and breakers are kept (none: forgotten at exit).
    store: Option<Arc<dyn StateStore>>,
    pub metrics: ServeMetrics,
    /// Set by [`Receiver::shutdown`]: runs it aborts are not the runbook's failures.
    stopping: std::sync::atomic::AtomicBool,
    /// Which repeated decisions were written to the log lately.
    repeats: Mutex<Repeats>,
}

impl Receiver {
    /// Read the secrets and the state file; refuse to start if either is wrong.
    pub fn new(
        cfg: ServeConfig,
        mode: Mode,
        launcher: Arc<dyn RunLauncher>,
    ) -> Result<Arc<Self>, StartError> {
        let (store, book): (Option<Arc<dyn StateStore>>, _) = match &cfg.state_file {
            Some(f) => (
                Some(Arc::new(FileStore { path: f.clone() })),
                load_state(f)?,
            ),
            None => (None, BudgetBook::default()),
        };
        Self::with_store(cfg, mode, launcher, store, book)
    }

    /// Like [`Receiver::new`] with the state already loaded from `store` (a ConfigMap).
    pub fn with_store(
        cfg: ServeConfig,
        mode: Mode,
        launcher: Arc<dyn RunLauncher>,
        store: Option<Arc<dyn StateStore>>,
        book: BudgetBook,
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
        for (target, t) in &book.targets {
            if t.breaker_opened_at.is_some() {
                tracing::error!(target = %target, failures = t.failures,
                    "BREAKER OPEN (from the saved state): not acting on {target} until `recover serve reset {target}`");
            }
        }
        let metrics = ServeMetrics::default();
        metrics.acting.set(i64::from(mode == Mode::Act));
        Ok(Arc::new(Receiver {
            cfg,
            mode,
            creds,
            replays: ReplayGuard::new(SIGNATURE_WINDOW, MAX_REMEMBERED),
            admin_token,
            launcher,
            state: Mutex::new(Registry::with_budget(book)),
            store,
            metrics,
            stopping: Default::default(),
            repeats: Mutex::new(Repeats::default()),
        }))
    }

    /// The registry; a poisoned lock still holds consistent data (updates are small and
    /// done in one place), so carry on rather than stop receiving alerts.
    pub fn state(&self) -> MutexGuard<'_, Registry> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Decide on one alert of a notification (taken whole: its labels are kept, not
    /// copied, when a detection or run remembers it).
    pub fn handle(self: &Arc<Self>, a: Alert) -> DecisionRecord {
        self.metrics.alert(a.status.as_str());
        let alert = AlertRef {
            alertname: a.alertname().to_string(),
            fingerprint: a.fingerprint,
            labels: a.labels,
        };
        self.handle_alert(alert, a.status, Source::Webhook)
    }

    pub(crate) fn handle_alert(
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
        match policy::on_alert(status, &st.activity(&target), &view) {
            AlertAction::IgnoreResolved => {
                rec.decision = "ignored_resolved".into();
                rec.message = "resolved alerts never start anything".into();
            }
            AlertAction::JoinRun { run_id } => {
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
            AlertAction::JoinCheck { check_id } => {
                st.checks.entry(check_id.clone()).or_default().add(alert);
                rec.decision = "joined_check".into();
                rec.message = format!("detection {check_id} is already running on {target}");
                rec.check_id = Some(check_id);
            }
            AlertAction::Refuse(r) => {
                rec.decision = r.kind().into();
                rec.message = r.message(&target);
            }
            AlertAction::Check => {
                let check_id = uuid::Uuid::now_v7().to_string();
                st.set_activity(
                    &target,
                    Activity::Checking {
                        check_id: check_id.clone(),
                    },
                );
                st.checks.insert(check_id.clone(), CheckAlerts::of(alert));
                rec.decision = "checking".into();
                rec.message = format!("running the detection of {} on {target}", route.runbook);
                rec.check_id = Some(check_id.clone());
                let me = self.clone();
                tokio::spawn(async move { me.check_then_act(check_id, route, source).await });
            }
        }
        self.log(&mut st, rec)
    }

    /// Count the decision, keep it in the decision log, and write its line (see
    /// [`log_lines`]: alert text escaped, a flood's repeats once a period with a count).
    pub(crate) fn log(&self, st: &mut Registry, mut rec: DecisionRecord) -> DecisionRecord {
        self.metrics.decision(&rec.decision);
        if rec.message.is_empty() {
            rec.message = rec.decision.clone();
        }
        let refused = rec
            .decision
            .strip_prefix("refused_")
            .map(|reason| super::notify::Event {
                event: "refused",
                reason,
                target: rec.target.as_deref().unwrap_or("-"),
                message: &rec.message,
                alertname: &rec.alertname,
                fingerprint: &rec.fingerprint,
                at: &rec.at,
            });
        if let Some(e) = &refused {
            self.metrics.refused(e.reason);
        }
        let target = rec.target.as_deref().unwrap_or("-");
        let now = std::time::Instant::now();
        let emit = {
            let mut repeats = self.repeats.lock().unwrap_or_else(|p| p.into_inner());
            for s in repeats.overdue(now) {
                tracing::info!(decision = %s.decision, target = %clean(&s.target),
                    "{} more {} decision(s) on {} in the last {}s were logged at debug level",
                    s.quiet, s.decision, clean(&s.target), log_lines::REPEAT_PERIOD.as_secs());
            }
            if log_lines::per_alert(&rec.decision) {
                repeats.admit(&rec.decision, target, now)
            } else {
                Emit::Line { quiet_before: 0 }
            }
        };
        let (fingerprint, message, target) =
            (clean(&rec.fingerprint), clean(&rec.message), clean(target));
        let more = match emit {
            Emit::Quiet => {
                tracing::debug!(decision = %rec.decision, fingerprint = %fingerprint,
                    target = %target, "{message}");
                return st.log(rec);
            }
            Emit::Line { quiet_before: 0 } => String::new(),
            Emit::Line { quiet_before } => format!(
                " ({quiet_before} more like this since the last such line, logged at debug level)"
            ),
        };
        // A person hears of a refusal as often as the log writes it: once a period in a flood.
        if let (Some(cfg), Some(e)) = (&self.cfg.notify_hook, &refused) {
            super::notify::spawn(cfg, e);
        }
        match log_lines::level(&rec.decision) {
            Level::Error => tracing::error!(decision = %rec.decision,
                fingerprint = %fingerprint, target = %target, "{message}{more}"),
            Level::Warn => tracing::warn!(decision = %rec.decision,
                fingerprint = %fingerprint, target = %target, "{message}{more}"),
            Level::Info => tracing::info!(decision = %rec.decision,
                fingerprint = %fingerprint, target = %target, "{message}{more}"),
        }
        st.log(rec)
    }

    pub(crate) fn save_state(&self, st: &Registry) {
        if let Some(store) = &self.store {
            store.save_soon(st.budget.clone());
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

    /// Stop: abort runs in progress cleanly and wait up to `grace` for them to report.
    /// Returns how many were still running when the grace ran out.
    pub async fn shutdown(&self, grace: std::time::Duration) -> usize {
        self.stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.launcher.cancel_all();
        let start = std::time::Instant::now();
        loop {
            let running = self
                .state()
                .activity
                .values()
                .filter(|a| matches!(a, Activity::Running { .. }))
                .count();
            if running == 0 || start.elapsed() >= grace {
                return running;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The metrics text, with per-target gauges brought up to date.
    pub fn encode_metrics(&self) -> String {
        for t in self.targets() {
            self.metrics
                .target(&t.target, t.budget.remaining, t.budget.breaker_open);
        }
        self.metrics.encode()
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
