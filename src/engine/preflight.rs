//! Check before acting: every precondition a runbook's steps need, checked before the
//! first action, so that a run which cannot finish a step for a reason knowable in advance
//! refuses with nothing changed (exit 3) and says how to fix it, instead of limiting the
//! gate and draining the queue and then failing at the restart.
//!
//! [`check`] is pure: the runbook's steps against [`Facts`], what the platform reports
//! (replicas and whether it can restart them, the gate reachable with its token, what
//! would make a restart unsafe) and which signals read nothing that exists. [`gather`]
//! collects the facts.
//!
//! It refuses only on what would make an action unsafe or impossible, never on the stuck
//! state itself: a replica that is running but not ready (its readiness probe timing out
//! under the overload) is what the runbook is for, and its admin endpoint still answers.

use crate::metrics::signal::{Reading, Snapshot};
use crate::platform::Platform;
use crate::runbook::action::Action;
use crate::runbook::expr::Expr;
use crate::runbook::{Runbook, Step};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// One replica as the platform reports it before the run.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaFacts {
    pub id: String,
    pub ready: bool,
    /// Whether its process or pod is running at all (ready or not).
    pub running: bool,
    /// Whether the platform can restart it, else why not and how to let it.
    pub restartable: Result<(), String>,
}

/// What the platform and the observed window say, before any action.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    /// The replicas, or why they could not be listed.
    pub replicas: Result<Vec<ReplicaFacts>, String>,
    /// The gate's control answered (with its token), or why not.
    pub gate: Result<(), String>,
    /// Signals never read in the observed window because what they read does not exist
    /// (no such series, no target of that role, an empty query result), with the reason.
    /// A signal with no value only for now (no observations in the rate window, a
    /// division by zero while nothing flows) is not here: it may have one once the gate
    /// lets traffic through.
    pub signals_absent: BTreeMap<String, String>,
    /// What would make a restart unsafe now, with fixes, or why it could not be read.
    pub hazards: Result<Vec<crate::platform::Hazard>, String>,
}

/// A precondition a step needs that does not hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub step: String,
    pub what: String,
    pub fix: String,
}

/// Every unmet precondition, each with its fix; the run refuses with nothing changed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct Unmet {
    pub problems: Vec<Problem>,
}

impl fmt::Display for Unmet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} precondition(s) unmet, nothing was changed:",
            self.problems.len()
        )?;
        for p in &self.problems {
            write!(f, " [step {}] {}; fix: {}.", p.step, p.what, p.fix)?;
        }
        Ok(())
    }
}

fn signals_of<'a>(exprs: impl Iterator<Item = &'a Expr>) -> BTreeSet<String> {
    exprs
        .flat_map(|e| e.variables())
        .filter(|v| !v.starts_with("params.") && !v.starts_with("plan."))
        .collect()
}

/// The signals a step reads: its check's conditions and its abort conditions.
fn signals_read(rb: &Runbook, step: &Step) -> BTreeSet<String> {
    let check = match &step.action {
        Action::GateRamp(a) => Some(a.check.as_str()),
        Action::WaitUntil(a) => Some(a.check.as_str()),
        _ => None,
    };
    let mut exprs: Vec<&Expr> = step.abort_when.iter().chain(&rb.abort_when).collect();
    if let Some(c) = check.and_then(|c| rb.checks.get(c)) {
        exprs.push(&c.success);
        exprs.extend(c.failure.iter());
    }
    let mut out = signals_of(exprs.into_iter());
    if let Action::GateRamp(a) = &step.action {
        out.insert(a.rejected_signal.clone());
    }
    out
}

/// Check every step (main and on_failure) against the facts.
pub fn check(rb: &Runbook, facts: &Facts) -> Result<(), Unmet> {
    let mut problems = Vec::new();
    let mut push = |step: &Step, what: String, fix: String| {
        let p = Problem {
            step: step.name.clone(),
            what,
            fix,
        };
        if !problems.contains(&p) {
            problems.push(p);
        }
    };
    for step in rb.steps.iter().chain(&rb.on_failure) {
        match &step.action {
            Action::GateLimit(_) | Action::GateRamp(_) => {
                if let Err(e) = &facts.gate {
                    push(
                        step,
                        format!("the gate's control does not answer: {e}"),
                        "check the gate's admin_url and token_file in the inventory (or the gate's limit ConfigMap on Kubernetes), and that the gate runs".into(),
                    );
                }
            }
            Action::RestartBatched(_) | Action::BacklogDrain(_) | Action::CacheWarm(_) => {
                match &facts.replicas {
                    Err(e) => push(
                        step,
                        format!("cannot list the replicas: {e}"),
                        "check the target (inventory or namespace and workload)".into(),
                    ),
                    Ok(rs) if rs.is_empty() => push(
                        step,
                        "the target has no replicas".into(),
                        "check the target (inventory replicas, or the deployment or selector)"
                            .into(),
                    ),
                    Ok(rs) => {
                        for r in rs {
                            let restart = matches!(step.action, Action::RestartBatched(_));
                            if restart {
                                if let Err(e) = &r.restartable {
                                    push(
                                        step,
                                        e.clone(),
                                        "adopt the replica or let recover start it".into(),
                                    );
                                }
                            } else if !r.running {
                                push(
                                    step,
                                    format!("replica {} is not running: its admin endpoint would not answer", r.id),
                                    "start it (or remove it from the target) before running".into(),
                                );
                            }
                        }
                    }
                }
                if matches!(step.action, Action::RestartBatched(_)) {
                    match &facts.hazards {
                        Ok(hs) => {
                            for h in hs {
                                push(step, h.what.clone(), h.fix.clone());
                            }
                        }
                        Err(e) => push(
                            step,
                            format!("cannot tell whether a restart is safe now: {e}"),
                            "grant the reads it needs (see the Role in manifests/) or check the target".into(),
                        ),
                    }
                }
            }
            Action::WaitUntil(_) | Action::Notify(_) | Action::GateHandback(_) => {}
        }
        for s in signals_read(rb, step) {
            if let Some(why) = facts.signals_absent.get(&s) {
                push(
                    step,
                    format!("signal {s} reads nothing that exists ({why})"),
                    format!("make the metric behind spec.signals.{s} available (a scrape target or Prometheus series), or fix its expression"),
                );
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Unmet { problems })
    }
}

/// Ask the platform what [`check`] needs, and read the window for signals seen.
pub async fn gather(rb: &Runbook, platform: &dyn Platform, window: &[Snapshot]) -> Facts {
    let replicas = match platform.replicas().await {
        Ok(rs) => {
            let mut out = Vec::new();
            for r in rs {
                out.push(ReplicaFacts {
                    restartable: platform.restartable(&r.id).await.map_err(|e| e.to_string()),
                    running: r.ready || r.started_at.is_some(),
                    id: r.id,
                    ready: r.ready,
                });
            }
            Ok(out)
        }
        Err(e) => Err(e.to_string()),
    };
    let gate = platform
        .gate()
        .get_limit()
        .await
        .map(|_| ())
        .map_err(|e| e.to_string());
    let mut seen = BTreeSet::new();
    let mut absent = BTreeMap::new();
    for s in window {
        for (name, r) in &s.readings {
            match r {
                Reading::Value { value } if value.is_finite() => {
                    seen.insert(name.clone());
                }
                Reading::Missing { reason } if structurally_absent(reason) => {
                    absent.insert(name.clone(), reason.clone());
                }
                _ => {}
            }
        }
    }
    absent.retain(|k, _| !seen.contains(k));
    let hazards = if rb
        .steps
        .iter()
        .chain(&rb.on_failure)
        .any(|s| matches!(s.action, Action::RestartBatched(_)))
    {
        platform.hazards().await.map_err(|e| e.to_string())
    } else {
        Ok(Vec::new())
    };
    Facts {
        replicas,
        gate,
        signals_absent: absent,
        hazards,
    }
}

/// Whether a missing reading's reason says the thing read does not exist at all (as
/// opposed to having no value at this instant).
fn structurally_absent(reason: &str) -> bool {
    [
        "no such series",
        "no target has role",
        "no targets to scrape",
        "returned an empty result",
    ]
    .iter()
    .any(|m| reason.contains(m))
}

/// Gather and check: the one call the executor makes before its first action.
pub async fn run(rb: &Runbook, platform: &dyn Platform, window: &[Snapshot]) -> Result<(), Unmet> {
    check(rb, &gather(rb, platform, window).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runbook() -> Runbook {
        crate::runbook::find("stuck-overload", &[]).unwrap().runbook
    }

    fn good() -> Facts {
        Facts {
            replicas: Ok(vec![ReplicaFacts {
                id: "replica-0".into(),
                ready: true,
                running: true,
                restartable: Ok(()),
            }]),
            gate: Ok(()),
            signals_absent: BTreeMap::new(),
            hazards: Ok(Vec::new()),
        }
    }

    #[test]
    fn a_runbook_whose_preconditions_hold_passes() {
        assert_eq!(check(&runbook(), &good()), Ok(()));
    }

    #[test]
    fn a_replica_started_by_hand_refuses_before_the_gate_is_touched() {
        let mut f = good();
        f.replicas = Ok(vec![ReplicaFacts {
            id: "replica-0".into(),
            ready: true,
            running: true,
            restartable: Err("replica replica-0 answers but recover did not start it; adopt it by adding `adopt: {port: 8091}`".into()),
        }]);
        let e = check(&runbook(), &f).unwrap_err();
        assert_eq!(e.problems.len(), 1, "{e}");
        assert_eq!(e.problems[0].step, "batched-restart");
        assert!(e.to_string().contains("adopt: {port: 8091}"), "{e}");
    }

    #[test]
    fn an_unreachable_gate_and_a_missing_signal_are_named_with_their_fixes() {
        let mut f = good();
        f.gate = Err("gate token file /x/token: No such file".into());
        // The readmission check reads the short-window p99.
        f.signals_absent.insert(
            "latency_p99_recent".into(),
            "recover_gate_upstream_latency_seconds_bucket@gate: no such series".into(),
        );
        let e = check(&runbook(), &f).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("[step block-at-edge] the gate's control does not answer"),
            "{text}"
        );
        assert!(text.contains("token_file"), "{text}");
        assert!(
            text.contains("[step readmit] signal latency_p99_recent reads nothing that exists"),
            "{text}"
        );
        assert!(text.contains("spec.signals.latency_p99_recent"), "{text}");
    }

    #[test]
    fn a_replica_not_running_fails_the_drain_in_advance_but_not_ready_is_the_stuck_state() {
        let mut f = good();
        f.replicas = Ok(vec![ReplicaFacts {
            id: "replica-1".into(),
            ready: false,
            running: false,
            restartable: Ok(()),
        }]);
        let e = check(&runbook(), &f).unwrap_err();
        assert!(e.problems.iter().any(|p| p.step == "drain-backlog"), "{e}");
        assert!(e.problems.iter().any(|p| p.step == "warm-caches"), "{e}");
        // Running, its readiness probe timing out under the overload: go ahead.
        f.replicas = Ok(vec![ReplicaFacts {
            id: "replica-1".into(),
            ready: false,
            running: true,
            restartable: Ok(()),
        }]);
        assert_eq!(check(&runbook(), &f), Ok(()));
    }

    #[test]
    fn a_hazard_refuses_the_restart_with_its_fix() {
        let mut f = good();
        f.hazards = Ok(vec![crate::platform::Hazard {
            what: "HorizontalPodAutoscaler web scales deployment web".into(),
            fix: "pin it".into(),
        }]);
        let e = check(&runbook(), &f).unwrap_err();
        assert!(
            e.problems
                .iter()
                .any(|p| p.what.contains("HorizontalPodAutoscaler") && p.fix == "pin it"),
            "{e}"
        );
    }
}
