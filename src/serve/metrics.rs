//! What the receiver exposes on `/metrics`, so an alert can be raised on the remediation
//! itself: alerts received by status, decisions, runs by outcome, budget left and breaker
//! state per target.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabel {
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabel {
    pub decision: String,
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
pub struct TargetLabel {
    pub target: String,
}

/// The receiver's metrics (cheap to clone; all handles share state).
#[derive(Clone, Default)]
pub struct ServeMetrics {
    /// Alerts (not notifications) received, by `firing` / `resolved`.
    pub alerts: Family<StatusLabel, Counter>,
    /// Webhook requests by result: accepted, unauthorized, bad_request.
    pub webhooks: Family<ResultLabel, Counter>,
    pub decisions: Family<DecisionLabel, Counter>,
    /// Finished runs by outcome (dry runs count as `dry_run`).
    pub runs: Family<OutcomeLabel, Counter>,
    pub runs_in_progress: Gauge,
    pub budget_remaining: Family<TargetLabel, Gauge>,
    pub breaker_open: Family<TargetLabel, Gauge>,
    /// 1 in act mode, 0 in observe mode.
    pub acting: Gauge,
}

impl ServeMetrics {
    pub fn registry(&self) -> Registry {
        let mut r = Registry::with_prefix("recover_serve");
        r.register(
            "alerts_received",
            "Alerts received, by status",
            self.alerts.clone(),
        );
        r.register(
            "webhooks",
            "Webhook requests, by result",
            self.webhooks.clone(),
        );
        r.register(
            "decisions",
            "Decisions taken on alerts",
            self.decisions.clone(),
        );
        r.register("runs", "Finished runs, by outcome", self.runs.clone());
        r.register(
            "runs_in_progress",
            "Runs in progress",
            self.runs_in_progress.clone(),
        );
        r.register(
            "budget_remaining",
            "Runs left in the budget window, per target",
            self.budget_remaining.clone(),
        );
        r.register(
            "breaker_open",
            "1 while the breaker of a target is open (a human must reset it)",
            self.breaker_open.clone(),
        );
        r.register(
            "acting",
            "1 in act mode, 0 in observe mode",
            self.acting.clone(),
        );
        r
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

    pub fn run_finished(&self, outcome: &str) {
        self.runs
            .get_or_create(&OutcomeLabel {
                outcome: outcome.into(),
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
