//! The second half of handling an alert, after the decision to look: run detection,
//! act on the verdict (launch, schedule a recheck, or record), and record how a run
//! ended. Split from the receiver so each file reads in one sitting.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::Receiver;
use crate::detect::{Evidence, Verdict, VerdictKind};
use crate::serve::alert::AlertStatus;
use crate::serve::config::Route;
use crate::serve::launcher::{CheckRequest, LaunchRequest, RunOutcome, RunSummary};
use crate::serve::policy::{self, Activity, AfterCheck};
use crate::serve::runs::{rfc3339, AlertRef, DecisionRecord, Recheck, RunRecord, RunState, Source};

/// A detection that takes longer than this is treated as Unknown: a hung check must not
/// leave the target marked as "checking" forever.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(300);

impl Receiver {
    pub(super) async fn check_then_act(
        self: Arc<Self>,
        check_id: String,
        route: Route,
        source: Source,
    ) {
        let target = route.target.id();
        let req = CheckRequest {
            route: route.name.clone(),
            runbook: route.runbook.clone(),
            target: route.target.clone(),
            prometheus: route.prometheus.clone(),
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
            .first
            .iter()
            .filter_map(|a| st.rechecks.get(&(target.clone(), a.fingerprint.clone())))
            .map(|r| r.done)
            .max()
            .unwrap_or(0);
        let view = st.budget.view(&self.cfg.budget, &target, now);
        let after = policy::on_verdict(
            verdict.verdict,
            self.mode,
            &view,
            rechecks_done,
            &self.cfg.recheck,
        );
        let first = alerts.first.first().cloned().unwrap_or_else(|| AlertRef {
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
                for a in &alerts.first {
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
                    alerts_total: 0,
                    message: None,
                    journal: self.launcher.journal_path(&req),
                    report: None,
                };
                for a in &alerts.first {
                    record.join(&a.fingerprint, &a.alertname, now);
                }
                record.alerts_total = alerts.total;
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
                let mut no_room = 0;
                for a in alerts.first.iter().cloned() {
                    if !st.recheck_room(&target, &a.fingerprint) {
                        no_room += 1;
                        continue;
                    }
                    let generation = st.next_generation();
                    let key = (target.clone(), a.fingerprint.clone());
                    let done = st.rechecks.get(&key).map_or(0, |r| r.done) + 1;
                    let me = self.clone();
                    let (t, fp) = (target.clone(), a.fingerprint.clone());
                    let timer = tokio::spawn(async move {
                        tokio::time::sleep(after).await;
                        me.recheck(&t, &fp, generation);
                    });
                    let timer = Some(timer.abort_handle());
                    st.set_recheck(
                        &target,
                        Recheck {
                            done,
                            generation,
                            alert: a,
                            timer,
                        },
                    );
                }
                rec.decision = "recheck_scheduled".into();
                rec.message = format!(
                    "verdict {:?}: not acting; looking again in {} ({evidence})",
                    verdict.verdict,
                    crate::util::duration::format(after)
                );
                let unscheduled = alerts.untracked() + no_room;
                if unscheduled > 0 {
                    rec.message.push_str(&format!(
                        "; {unscheduled} more alerts joined and are not rechecked (they come back when Alertmanager repeats them)"
                    ));
                }
            }
            AfterCheck::RechecksExhausted => {
                for a in &alerts.first {
                    st.cancel_recheck(&target, &a.fingerprint);
                }
                rec.decision = "rechecks_exhausted".into();
                rec.message = format!(
                    "verdict {:?} after {rechecks_done} rechecks: not acting; waiting for the alert to repeat ({evidence})",
                    verdict.verdict
                );
            }
            AfterCheck::Healthy => {
                for a in &alerts.first {
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
            Err(e) => RunSummary {
                outcome: RunOutcome::Failed,
                message: format!("the run crashed: {e}"),
                journal: None,
                details: None,
            },
        };
        let target = req.target.id();
        // Refused before its first action: nothing changed on the target, so the run
        // spends nothing, neither budget nor cooldown, and the next alert may act.
        let refused = report.outcome == RunOutcome::Refused;
        // Even a run aborted because the receiver stops leaves its safe hold on the gate.
        let held = (!refused)
            .then(|| Self::left_standing(report.details.as_ref()))
            .flatten();
        let now = SystemTime::now();
        let mut st = self.state();
        if held.is_some() {
            st.budget
                .targets
                .entry(target.clone())
                .or_default()
                .standing = held.clone();
        }
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
        let opened = if refused {
            st.budget.cancel_last_start(&target);
            if let Some(rec) = st.runs.get_mut(&req.run_id) {
                rec.message = Some(format!(
                    "refused before its first action; nothing changed, no budget spent, no cooldown started: {}",
                    report.message
                ));
            }
            false
        } else {
            st.budget.record_outcome(
                &self.cfg.budget,
                &target,
                // A run aborted because the receiver is stopping says nothing about the runbook.
                report.outcome.is_failure() && !self.is_stopping(),
                &format!(
                    "run {}: {}: {}",
                    req.run_id,
                    report.outcome.as_str(),
                    report.message
                ),
                now,
            )
        };
        self.save_state(&st);
        drop(st);
        if let Some(held) = &held {
            tracing::error!(target = %target, run_id = %held.run_id,
                "{}", crate::serve::log_lines::clean(&held.message(&target)));
        }
        self.metrics.runs_in_progress.dec();
        self.metrics.run_finished(report.outcome.as_str());
        let message = crate::serve::log_lines::clean(&report.message);
        if refused {
            tracing::warn!(run_id = %req.run_id, target = %target,
                "run refused before its first action (no budget spent, no cooldown): {message}");
        } else {
            tracing::info!(run_id = %req.run_id, target = %target, outcome = report.outcome.as_str(),
                "run finished: {message}");
        }
        if opened {
            tracing::error!(target = %target,
                "BREAKER OPEN on {target}: too many failed or aborted runs; not acting until `recover serve reset {target}`");
        }
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
