//! The receiver's memory: runs it started (with the alerts that joined them), the log of
//! every decision it made, what each target is doing now, pending rechecks, and the
//! budget book. Plain data behind one lock in the receiver; no I/O here.

use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::time::SystemTime;

use super::budget::BudgetBook;
use super::launcher::RunOutcome;
use super::policy::Activity;
use crate::detect::{Verdict, VerdictKind};

/// How many decisions `GET /decisions` remembers.
pub const DECISION_LOG_LEN: usize = 1000;

/// How many alerts a run, or a detection in progress, keeps by name; the rest are only
/// counted. A flood of alerts for one target (hundreds of thousands, each its own
/// fingerprint) must not grow the receiver's memory: one alert or ten say the same.
pub const KEPT_ALERTS: usize = 10;

/// How many pending rechecks one target may have; alerts past it are not rechecked and
/// come back when Alertmanager repeats them.
pub const MAX_RECHECKS_PER_TARGET: usize = 100;

pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// An alert attached to a run: the one that started it or one that joined it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JoinedAlert {
    pub fingerprint: String,
    pub alertname: String,
    pub at: String,
    /// This fingerprint was already attached to the run (Alertmanager repeated it).
    pub repeat: bool,
}

/// A run's state in `GET /runs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Running,
    Finished(RunOutcome),
}

/// One run the receiver started.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRecord {
    pub id: String,
    pub route: String,
    pub runbook: String,
    pub target: String,
    pub dry_run: bool,
    pub state: RunState,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub verdict: Verdict,
    /// The first [`KEPT_ALERTS`] alerts attached (repeats included).
    pub alerts: Vec<JoinedAlert>,
    /// Every alert attached, kept or only counted.
    pub alerts_total: u64,
    pub message: Option<String>,
    pub journal: Option<PathBuf>,
    /// The engine's report once the run ended (for a dry run: the plan it would follow).
    pub report: Option<serde_json::Value>,
}

impl RunRecord {
    /// Attach an alert; returns true if its fingerprint is among those already kept.
    pub fn join(&mut self, fingerprint: &str, alertname: &str, now: SystemTime) -> bool {
        self.alerts_total += 1;
        let repeat = self.alerts.iter().any(|a| a.fingerprint == fingerprint);
        if self.alerts.len() < KEPT_ALERTS {
            self.alerts.push(JoinedAlert {
                fingerprint: fingerprint.to_string(),
                alertname: alertname.to_string(),
                at: rfc3339(now),
                repeat,
            });
        }
        repeat
    }
}

/// The alerts waiting on one detection: the first [`KEPT_ALERTS`] distinct fingerprints,
/// and how many joined in all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckAlerts {
    pub first: Vec<AlertRef>,
    pub total: u64,
}

impl CheckAlerts {
    pub fn of(alert: AlertRef) -> Self {
        let mut c = CheckAlerts::default();
        c.add(alert);
        c
    }

    pub fn add(&mut self, alert: AlertRef) {
        self.total += 1;
        if self.first.len() < KEPT_ALERTS
            && !self
                .first
                .iter()
                .any(|a| a.fingerprint == alert.fingerprint)
        {
            self.first.push(alert);
        }
    }

    /// Alerts counted but not kept.
    pub fn untracked(&self) -> u64 {
        self.total.saturating_sub(self.first.len() as u64)
    }
}

/// Where a decision came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Webhook,
    Recheck,
}

/// One line of the decision log (and of the POST /alerts reply).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecisionRecord {
    pub seq: u64,
    pub at: String,
    pub source: Source,
    pub fingerprint: String,
    pub alertname: String,
    pub status: String,
    pub route: Option<String>,
    pub target: Option<String>,
    /// `no_route`, `ignored_resolved`, `checking`, `joined_check`, `joined_run`,
    /// `refused_breaker`, `refused_budget`, `refused_cooldown`, `launched`, `dry_run`,
    /// `recheck_scheduled`, `rechecks_exhausted`, `healthy`.
    pub decision: String,
    pub message: String,
    pub run_id: Option<String>,
    pub check_id: Option<String>,
    pub verdict: Option<VerdictKind>,
}

/// The part of an alert the receiver keeps while it checks, runs or waits to recheck.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlertRef {
    pub fingerprint: String,
    pub alertname: String,
    pub labels: BTreeMap<String, String>,
}

/// An alert remembered for a delayed recheck.
#[derive(Debug, Clone)]
pub struct Recheck {
    pub done: u32,
    /// Bumped whenever the recheck is superseded, so a stale timer does nothing.
    pub generation: u64,
    pub alert: AlertRef,
    /// The timer task; stopped when the recheck is superseded or cancelled, so timers do
    /// not pile up while alerts keep coming.
    pub timer: Option<tokio::task::AbortHandle>,
}

/// Everything the receiver remembers.
#[derive(Debug, Default)]
pub struct Registry {
    pub runs: BTreeMap<String, RunRecord>,
    pub decisions: VecDeque<DecisionRecord>,
    next_seq: u64,
    pub activity: BTreeMap<String, Activity>,
    /// Alerts waiting on each detection in progress, by check id (the first started it).
    pub checks: BTreeMap<String, CheckAlerts>,
    /// Keyed by (target, fingerprint): dedup is per fingerprint and target.
    pub rechecks: BTreeMap<(String, String), Recheck>,
    pub budget: BudgetBook,
    generation: u64,
}

impl Registry {
    pub fn with_budget(budget: BudgetBook) -> Self {
        Registry {
            budget,
            ..Default::default()
        }
    }

    pub fn activity(&self, target: &str) -> Activity {
        self.activity.get(target).cloned().unwrap_or(Activity::Idle)
    }

    pub fn set_activity(&mut self, target: &str, a: Activity) {
        if a == Activity::Idle {
            self.activity.remove(target);
        } else {
            self.activity.insert(target.to_string(), a);
        }
    }

    /// Append to the decision log (bounded), assigning its sequence number.
    pub fn log(&mut self, mut d: DecisionRecord) -> DecisionRecord {
        self.next_seq += 1;
        d.seq = self.next_seq;
        self.decisions.push_back(d.clone());
        while self.decisions.len() > DECISION_LOG_LEN {
            self.decisions.pop_front();
        }
        d
    }

    pub fn next_generation(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }

    /// Forget a pending recheck (the alert resolved, or a run started), stopping its timer.
    pub fn cancel_recheck(&mut self, target: &str, fingerprint: &str) -> bool {
        let gone = self
            .rechecks
            .remove(&(target.to_string(), fingerprint.to_string()));
        stop_timer(gone.as_ref());
        gone.is_some()
    }

    /// Remember a recheck, replacing (and stopping) any earlier one for the same alert.
    pub fn set_recheck(&mut self, target: &str, recheck: Recheck) {
        let key = (target.to_string(), recheck.alert.fingerprint.clone());
        let replaced = self.rechecks.insert(key, recheck);
        stop_timer(replaced.as_ref());
    }

    /// Whether a recheck for this alert may be added: it has one already, or the target
    /// has fewer than [`MAX_RECHECKS_PER_TARGET`].
    pub fn recheck_room(&self, target: &str, fingerprint: &str) -> bool {
        let key = (target.to_string(), fingerprint.to_string());
        self.rechecks.contains_key(&key)
            || self
                .rechecks
                .range((target.to_string(), String::new())..)
                .take_while(|((t, _), _)| t == target)
                .count()
                < MAX_RECHECKS_PER_TARGET
    }

    /// Runs newest first.
    pub fn runs_newest_first(&self) -> Vec<&RunRecord> {
        let mut v: Vec<&RunRecord> = self.runs.values().collect();
        // Run ids are UUIDv7: time-ordered.
        v.sort_by(|a, b| b.id.cmp(&a.id));
        v
    }
}

fn stop_timer(r: Option<&Recheck>) {
    if let Some(t) = r.and_then(|r| r.timer.as_ref()) {
        t.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec() -> DecisionRecord {
        DecisionRecord {
            seq: 0,
            at: String::new(),
            source: Source::Webhook,
            fingerprint: "f".into(),
            alertname: "a".into(),
            status: "firing".into(),
            route: None,
            target: None,
            decision: "no_route".into(),
            message: String::new(),
            run_id: None,
            check_id: None,
            verdict: None,
        }
    }

    #[test]
    fn decision_log_is_bounded_and_numbered() {
        let mut r = Registry::default();
        for _ in 0..DECISION_LOG_LEN + 5 {
            r.log(rec());
        }
        assert_eq!(r.decisions.len(), DECISION_LOG_LEN);
        assert_eq!(r.decisions.front().map(|d| d.seq), Some(6));
        assert_eq!(
            r.decisions.back().map(|d| d.seq),
            Some(DECISION_LOG_LEN as u64 + 5)
        );
    }

    #[test]
    fn idle_is_the_default_activity() {
        let mut r = Registry::default();
        assert_eq!(r.activity("t"), Activity::Idle);
        r.set_activity("t", Activity::Running { run_id: "x".into() });
        assert_eq!(r.activity("t"), Activity::Running { run_id: "x".into() });
        r.set_activity("t", Activity::Idle);
        assert!(r.activity.is_empty());
    }

    fn alert(fp: &str) -> AlertRef {
        AlertRef {
            fingerprint: fp.into(),
            alertname: "a".into(),
            labels: BTreeMap::new(),
        }
    }

    #[test]
    fn a_detection_keeps_the_first_distinct_alerts_and_counts_the_rest() {
        let mut c = CheckAlerts::of(alert("f0"));
        for i in 0..100_000 {
            c.add(alert(&format!("f{}", i % 50_000)));
        }
        assert_eq!(c.first.len(), KEPT_ALERTS);
        assert_eq!(c.total, 100_001);
        assert_eq!(c.untracked(), 100_001 - KEPT_ALERTS as u64);
        let fps: Vec<&str> = c.first.iter().map(|a| a.fingerprint.as_str()).collect();
        assert_eq!(fps[..3], ["f0", "f1", "f2"]);
    }

    #[test]
    fn rechecks_per_target_are_capped() {
        let mut r = Registry::default();
        for i in 0..MAX_RECHECKS_PER_TARGET {
            let fp = format!("f{i}");
            assert!(r.recheck_room("t", &fp));
            r.set_recheck(
                "t",
                Recheck {
                    done: 1,
                    generation: i as u64,
                    alert: alert(&fp),
                    timer: None,
                },
            );
        }
        assert!(!r.recheck_room("t", "new"));
        assert!(
            r.recheck_room("t", "f3"),
            "an alert with a recheck may replace it"
        );
        assert!(
            r.recheck_room("u", "new"),
            "another target has its own room"
        );
        assert!(r.cancel_recheck("t", "f3"));
        assert!(r.recheck_room("t", "new"));
    }
}
