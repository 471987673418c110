//! What to do with one alert, as pure functions: no clock, no I/O, no locks. An alert is a
//! hint, not a verdict: this decides whether to look (run detection), join what is already
//! happening, refuse (breaker, a failed run's limit standing, budget, cooldown), and, once
//! detection has spoken, whether
//! to act. Everything that keeps the receiver from becoming a remediation storm is here,
//! where it is tested exhaustively.

use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime};

use super::alert::AlertStatus;
use super::budget::BudgetView;
use super::config::RecheckConfig;
use super::standing::StandingLimit;
use crate::detect::VerdictKind;

/// `act` runs runbooks; `observe` runs them as dry runs and records what it would do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Observe,
    Act,
}

/// What is happening on a target right now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Activity {
    Idle,
    /// Detection is running for this target.
    Checking {
        check_id: String,
    },
    /// A run (or dry run) is in progress.
    Running {
        run_id: String,
    },
}

/// Why an alert was not acted on although it was firing.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "refusal", rename_all = "snake_case")]
pub enum Refusal {
    BreakerOpen {
        failures: u32,
    },
    /// A failed or aborted run's safe hold is still on the gate: a human must look first.
    StandingLimit(StandingLimit),
    BudgetExhausted {
        used: u32,
        limit: u32,
        #[serde(with = "crate::util::time::rfc3339::option")]
        next_slot_at: Option<SystemTime>,
    },
    Cooldown {
        #[serde(with = "crate::util::time::rfc3339")]
        until: SystemTime,
    },
}

impl Refusal {
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::BreakerOpen { .. } => "refused_breaker",
            Refusal::StandingLimit(_) => "refused_standing_limit",
            Refusal::BudgetExhausted { .. } => "refused_budget",
            Refusal::Cooldown { .. } => "refused_cooldown",
        }
    }

    /// The reason label of `recover_serve_alerts_refused_total` (the kind without `refused_`).
    pub fn reason(&self) -> &'static str {
        let kind = self.kind();
        kind.strip_prefix("refused_").unwrap_or(kind)
    }

    pub fn message(&self, target: &str) -> String {
        match self {
            Refusal::StandingLimit(held) => held.message(target),
            Refusal::BreakerOpen { failures } => format!(
                "BREAKER OPEN on {target} after {failures} failed or aborted runs: not acting until a human resets it (`recover serve reset {target}`)"
            ),
            Refusal::BudgetExhausted {
                used,
                limit,
                next_slot_at,
            } => format!(
                "budget exhausted on {target}: {used} of {limit} runs used in the window{}",
                next_slot_at
                    .map(|t| format!("; next slot at {}", humantime::format_rfc3339_seconds(t)))
                    .unwrap_or_default()
            ),
            Refusal::Cooldown { until } => format!(
                "cooldown on {target}: a run ended recently; not before {}",
                humantime::format_rfc3339_seconds(*until)
            ),
        }
    }
}

/// The first decision, before detection.
#[derive(Debug, Clone, PartialEq)]
pub enum AlertAction {
    /// A resolved alert never starts anything.
    IgnoreResolved,
    /// A run is in progress on the target: this alert joins it (one run per target).
    JoinRun {
        run_id: String,
    },
    /// Detection is already running for the target: this alert joins it.
    JoinCheck {
        check_id: String,
    },
    Refuse(Refusal),
    /// Look for ourselves: run the runbook's detection.
    Check,
}

/// Decide on one alert for a target. Order matters: resolved first (never act), then
/// joining in-flight work (one run per target, dedup), then the storm guards.
pub fn on_alert(status: AlertStatus, activity: &Activity, budget: &BudgetView) -> AlertAction {
    if status == AlertStatus::Resolved {
        return AlertAction::IgnoreResolved;
    }
    match activity {
        Activity::Running { run_id } => {
            return AlertAction::JoinRun {
                run_id: run_id.clone(),
            }
        }
        Activity::Checking { check_id } => {
            return AlertAction::JoinCheck {
                check_id: check_id.clone(),
            }
        }
        Activity::Idle => {}
    }
    match guard(budget) {
        Some(r) => AlertAction::Refuse(r),
        None => AlertAction::Check,
    }
}

/// The storm guards, in order of how loudly they must be reported: the breaker (a human
/// must reset it), then a failed run's limit still on the gate (a human must lift it),
/// then the budget and the cooldown, which pass with time.
pub fn guard(budget: &BudgetView) -> Option<Refusal> {
    if budget.breaker_open {
        return Some(Refusal::BreakerOpen {
            failures: budget.failures,
        });
    }
    if let Some(held) = &budget.standing {
        return Some(Refusal::StandingLimit(held.clone()));
    }
    if budget.remaining == 0 {
        return Some(Refusal::BudgetExhausted {
            used: budget.used,
            limit: budget.limit,
            next_slot_at: budget.next_slot_at,
        });
    }
    budget
        .cooldown_until
        .map(|until| Refusal::Cooldown { until })
}

/// The decision once detection has given its verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum AfterCheck {
    /// Stuck: start the runbook (a dry run in observe mode).
    Launch { dry_run: bool },
    /// Triggered or Unknown: record it, look again after `after`.
    Recheck { after: Duration },
    /// Triggered or Unknown with the rechecks used up: wait for the alert to repeat.
    RechecksExhausted,
    /// Healthy: the alert is not borne out; nothing to do.
    Healthy,
    /// A guard closed while detection ran; checked again so no path skips them.
    Refuse(Refusal),
}

/// Decide on a verdict. Only Stuck ever acts.
pub fn on_verdict(
    verdict: VerdictKind,
    mode: Mode,
    budget: &BudgetView,
    rechecks_done: u32,
    recheck: &RecheckConfig,
) -> AfterCheck {
    match verdict {
        VerdictKind::Stuck => match guard(budget) {
            Some(r) => AfterCheck::Refuse(r),
            None => AfterCheck::Launch {
                dry_run: mode == Mode::Observe,
            },
        },
        VerdictKind::Triggered | VerdictKind::Unknown => {
            if rechecks_done < recheck.max {
                AfterCheck::Recheck {
                    after: recheck.after,
                }
            } else {
                AfterCheck::RechecksExhausted
            }
        }
        // Not a stuck overload: the alert's runbook does not apply (a slow replica has
        // a runbook of its own, which `serve` does not launch).
        VerdictKind::Healthy | VerdictKind::SlowReplica => AfterCheck::Healthy,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_budget() -> BudgetView {
        BudgetView {
            used: 0,
            limit: 2,
            remaining: 2,
            next_slot_at: None,
            breaker_open: false,
            failures: 0,
            breaker_after: 2,
            cooldown_until: None,
            standing: None,
        }
    }

    fn held() -> StandingLimit {
        StandingLimit {
            run_id: "r1".into(),
            outcome: "failed".into(),
            limit: "45.0 req/s (burst 23)".into(),
            review_by: Some("2030-01-01T00:00:00Z".into()),
            commands: vec![
                "recover gate limit lift --admin http://127.0.0.1:18081 --token-file /d/gate.token"
                    .into(),
            ],
            unconfirmed: None,
        }
    }

    #[test]
    fn a_failed_runs_standing_limit_refuses_with_the_command_that_lifts_it() {
        let mut b = open_budget();
        b.standing = Some(held());
        let d = on_alert(FIRING, &Activity::Idle, &b);
        let AlertAction::Refuse(r) = d else {
            panic!("not refused: {d:?}")
        };
        assert_eq!(r.kind(), "refused_standing_limit");
        assert_eq!(r.reason(), "standing_limit");
        let m = r.message("local:demo");
        assert!(
            m.contains("`recover gate limit lift --admin http://127.0.0.1:18081 --token-file /d/gate.token`"),
            "{m}"
        );
        assert!(m.contains("review by 2030-01-01T00:00:00Z"), "{m}");
        // Detection that finished meanwhile does not act either.
        assert_eq!(
            on_verdict(
                VerdictKind::Stuck,
                Mode::Act,
                &b,
                0,
                &RecheckConfig::default()
            ),
            AfterCheck::Refuse(r.clone())
        );
        // It outranks the budget and the cooldown (they pass with time; it does not),
        // and yields to the breaker (a reset comes first).
        b.remaining = 0;
        b.cooldown_until = Some(SystemTime::UNIX_EPOCH);
        assert_eq!(guard(&b), Some(r));
        b.breaker_open = true;
        assert!(matches!(guard(&b), Some(Refusal::BreakerOpen { .. })));
        // Lifted: nothing stands, the alert is checked.
        let mut lifted = open_budget();
        lifted.standing = None;
        assert_eq!(
            on_alert(FIRING, &Activity::Idle, &lifted),
            AlertAction::Check
        );
    }

    const FIRING: AlertStatus = AlertStatus::Firing;

    #[test]
    fn resolved_never_acts_whatever_the_state() {
        for activity in [
            Activity::Idle,
            Activity::Running { run_id: "r".into() },
            Activity::Checking {
                check_id: "c".into(),
            },
        ] {
            assert_eq!(
                on_alert(AlertStatus::Resolved, &activity, &open_budget()),
                AlertAction::IgnoreResolved
            );
        }
    }

    #[test]
    fn firing_on_idle_target_checks_first() {
        assert_eq!(
            on_alert(FIRING, &Activity::Idle, &open_budget()),
            AlertAction::Check
        );
    }

    #[test]
    fn in_flight_work_is_joined_even_when_budget_is_gone() {
        let mut b = open_budget();
        b.remaining = 0;
        b.breaker_open = true;
        let run = Activity::Running {
            run_id: "r1".into(),
        };
        assert_eq!(
            on_alert(FIRING, &run, &b),
            AlertAction::JoinRun {
                run_id: "r1".into()
            }
        );
        let check = Activity::Checking {
            check_id: "c1".into(),
        };
        assert_eq!(
            on_alert(FIRING, &check, &b),
            AlertAction::JoinCheck {
                check_id: "c1".into()
            }
        );
    }

    #[test]
    fn breaker_beats_budget_beats_cooldown() {
        let mut b = open_budget();
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(10);
        b.cooldown_until = Some(t);
        assert_eq!(
            on_alert(FIRING, &Activity::Idle, &b),
            AlertAction::Refuse(Refusal::Cooldown { until: t })
        );
        b.remaining = 0;
        b.used = 2;
        assert!(matches!(
            on_alert(FIRING, &Activity::Idle, &b),
            AlertAction::Refuse(Refusal::BudgetExhausted {
                used: 2,
                limit: 2,
                ..
            })
        ));
        b.breaker_open = true;
        b.failures = 3;
        let d = on_alert(FIRING, &Activity::Idle, &b);
        assert_eq!(d, AlertAction::Refuse(Refusal::BreakerOpen { failures: 3 }));
        if let AlertAction::Refuse(r) = d {
            assert!(r
                .message("local:demo")
                .contains("recover serve reset local:demo"));
        }
    }

    #[test]
    fn only_stuck_acts_and_observe_is_a_dry_run() {
        let rc = RecheckConfig::default();
        let b = open_budget();
        assert_eq!(
            on_verdict(VerdictKind::Stuck, Mode::Act, &b, 0, &rc),
            AfterCheck::Launch { dry_run: false }
        );
        assert_eq!(
            on_verdict(VerdictKind::Stuck, Mode::Observe, &b, 0, &rc),
            AfterCheck::Launch { dry_run: true }
        );
        for v in [VerdictKind::Triggered, VerdictKind::Unknown] {
            assert_eq!(
                on_verdict(v, Mode::Act, &b, 0, &rc),
                AfterCheck::Recheck { after: rc.after }
            );
            assert_eq!(
                on_verdict(v, Mode::Act, &b, rc.max, &rc),
                AfterCheck::RechecksExhausted
            );
        }
        assert_eq!(
            on_verdict(VerdictKind::Healthy, Mode::Act, &b, 0, &rc),
            AfterCheck::Healthy
        );
    }

    #[test]
    fn stuck_still_respects_the_guards() {
        let mut b = open_budget();
        b.breaker_open = true;
        assert!(matches!(
            on_verdict(
                VerdictKind::Stuck,
                Mode::Act,
                &b,
                0,
                &RecheckConfig::default()
            ),
            AfterCheck::Refuse(Refusal::BreakerOpen { .. })
        ));
    }
}
