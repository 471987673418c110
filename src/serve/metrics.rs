//! What the receiver exposes on `/metrics`, so an alert can be raised on the remediation
//! itself: alerts received by status, decisions, runs by outcome, budget left and breaker
//! state per target.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::util::exposition::{encode_text, register, register_family};

/// Every label value each counter family can take, created at start so every series is
/// exported as 0 before its first event (a rate over a series that appears with its first
/// event misses that event, and an alert on it cannot tell "none yet" from "not scraped").
const ALERT_STATUSES: [&str; 2] = ["firing", "resolved"];
const WEBHOOK_RESULTS: [&str; 3] = ["accepted", "unauthorized", "bad_request"];
/// The receiver's decisions (`receiver.rs`, `receiver/act.rs`, `decide::Refusal::kind`).
pub const DECISIONS: [&str; 14] = [
    "no_route",
    "ignored_resolved",
    "joined_run",
    "joined_check",
    "checking",
    "launched",
    "dry_run",
    "healthy",
    "recheck_scheduled",
    "rechecks_exhausted",
    "refused_breaker",
    "refused_standing_limit",
    "refused_budget",
    "refused_cooldown",
];
/// Why an alert was refused (`policy::Refusal::reason`).
pub const REFUSAL_REASONS: [&str; 4] = ["breaker", "standing_limit", "budget", "cooldown"];
const RUN_OUTCOMES: [&str; 5] = ["succeeded", "failed", "aborted", "refused", "dry_run"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabel {
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabel {
    pub decision: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    pub route: String,
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TargetLabel {
    pub target: String,
}

/// The receiver's metrics: the handles the receiver updates and the registry that exports
/// them.
pub struct ServeMetrics {
    registry: Registry,
    /// Alerts (not notifications) received, by `firing` / `resolved`.
    pub alerts: Family<StatusLabel, Counter>,
    /// Webhook requests by result: accepted, unauthorized, bad_request.
    pub webhooks: Family<ResultLabel, Counter>,
    pub decisions: Family<DecisionLabel, Counter>,
    /// Alerts refused, by reason: breaker, standing_limit, budget, cooldown.
    pub alerts_refused: Family<ReasonLabel, Counter>,
    /// Finished runs by outcome (dry runs count as `dry_run`).
    pub runs: Family<OutcomeLabel, Counter>,
    pub runs_in_progress: Gauge,
    pub budget_remaining: Family<TargetLabel, Gauge>,
    pub breaker_open: Family<TargetLabel, Gauge>,
    /// 1 in act mode, 0 in observe mode.
    pub acting: Gauge,
    /// HTTP requests refused (4xx, 5xx), by route template and status.
    pub refusals: Family<RefusalLabels, Counter>,
}

impl Default for ServeMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl ServeMetrics {
    pub fn new() -> Self {
        let mut r = Registry::with_prefix("recover_serve");
        // Fields are evaluated in the order written, which is the order `/metrics` lists them.
        ServeMetrics {
            alerts: register_family(
                &mut r,
                "alerts_received",
                "Alerts received, by status",
                ALERT_STATUSES.map(|s| StatusLabel { status: s.into() }),
            ),
            webhooks: register_family(
                &mut r,
                "webhooks",
                "Webhook requests, by result",
                WEBHOOK_RESULTS.map(|s| ResultLabel { result: s.into() }),
            ),
            decisions: register_family(
                &mut r,
                "decisions",
                "Decisions taken on alerts",
                DECISIONS.map(|s| DecisionLabel { decision: s.into() }),
            ),
            alerts_refused: register_family(
                &mut r,
                "alerts_refused",
                "Firing alerts refused, by reason (a human resets the breaker or lifts a failed run's limit; the budget and the cooldown pass with time)",
                REFUSAL_REASONS.map(|s| ReasonLabel { reason: s.into() }),
            ),
            runs: register_family(
                &mut r,
                "runs",
                "Finished runs, by outcome",
                RUN_OUTCOMES.map(|s| OutcomeLabel { outcome: s.into() }),
            ),
            runs_in_progress: register(
                &mut r,
                "runs_in_progress",
                "Runs in progress",
                Gauge::default(),
            ),
            budget_remaining: register(
                &mut r,
                "budget_remaining",
                "Runs left in the budget window, per target",
                Family::default(),
            ),
            breaker_open: register(
                &mut r,
                "breaker_open",
                "1 while the breaker of a target is open (a human must reset it)",
                Family::default(),
            ),
            acting: register(
                &mut r,
                "acting",
                "1 in act mode, 0 in observe mode",
                Gauge::default(),
            ),
            refusals: register(
                &mut r,
                "http_refusals",
                "HTTP requests refused (4xx and 5xx answers), by route and status",
                Family::default(),
            ),
            registry: r,
        }
    }

    /// Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        encode_text(&self.registry)
    }

    pub fn alert(&self, status: &str) {
        self.alerts
            .get_or_create(&StatusLabel {
                status: status.into(),
            })
            .inc();
    }

    pub fn webhook(&self, result: &str) {
        self.webhooks
            .get_or_create(&ResultLabel {
                result: result.into(),
            })
            .inc();
    }

    pub fn decision(&self, decision: &str) {
        self.decisions
            .get_or_create(&DecisionLabel {
                decision: decision.into(),
            })
            .inc();
    }

    pub fn refused(&self, reason: &str) {
        self.alerts_refused
            .get_or_create(&ReasonLabel {
                reason: reason.into(),
            })
            .inc();
    }

    pub fn run_finished(&self, outcome: &str) {
        self.runs
            .get_or_create(&OutcomeLabel {
                outcome: outcome.into(),
            })
            .inc();
    }

    /// One HTTP refusal on `route` (a route template, or `unmatched`).
    pub fn refusal(&self, route: &str, status: u16) {
        self.refusals
            .get_or_create(&RefusalLabels {
                route: route.into(),
                status: status.to_string(),
            })
            .inc();
    }

    pub fn target(&self, target: &str, remaining: u32, breaker_open: bool) {
        let l = TargetLabel {
            target: target.into(),
        };
        self.budget_remaining
            .get_or_create(&l)
            .set(i64::from(remaining));
        self.breaker_open
            .get_or_create(&l)
            .set(i64::from(breaker_open));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_counter_family_is_exported_from_start() {
        let text = super::ServeMetrics::new().encode();
        for needle in [
            "recover_serve_alerts_received_total{status=\"firing\"} 0",
            "recover_serve_webhooks_total{result=\"unauthorized\"} 0",
            "recover_serve_decisions_total{decision=\"launched\"} 0",
            "recover_serve_decisions_total{decision=\"refused_breaker\"} 0",
            "recover_serve_decisions_total{decision=\"refused_standing_limit\"} 0",
            "recover_serve_alerts_refused_total{reason=\"standing_limit\"} 0",
            "recover_serve_alerts_refused_total{reason=\"breaker\"} 0",
            "recover_serve_runs_total{outcome=\"failed\"} 0",
            "recover_serve_runs_in_progress 0",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }
}
