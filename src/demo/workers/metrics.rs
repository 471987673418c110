//! The fleet's `/metrics`, named as TEAM.md's contract says: polls (demand and goodput as
//! the clients see it), attempts, retries and how many workers are stuck retrying.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Label of the polls and attempts counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: &'static str,
}

/// Every metric the workers export.
pub struct WorkerMetrics {
    pub registry: Registry,
    pub polls: Family<OutcomeLabel, Counter>,
    pub attempts: Family<OutcomeLabel, Counter>,
    pub retries: Counter,
    pub in_retry_loop: Gauge,
    pub count: Gauge,
    pub latency_seconds: Histogram,
}

impl WorkerMetrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("recover_demo_workers");
        let polls = Family::<OutcomeLabel, Counter>::default();
        let attempts = Family::<OutcomeLabel, Counter>::default();
        for outcome in ["ok", "given_up"] {
            let _ = polls.get_or_create(&OutcomeLabel { outcome });
        }
        for outcome in ["ok", "error", "timeout"] {
            let _ = attempts.get_or_create(&OutcomeLabel { outcome });
        }
        let m = WorkerMetrics {
            registry: Registry::default(),
            polls,
            attempts,
            retries: Counter::default(),
            in_retry_loop: Gauge::default(),
            count: Gauge::default(),
            latency_seconds: Histogram::new(exponential_buckets(0.005, 2.0, 12)),
        };
        registry.register("polls", "Demanded polls by final outcome", m.polls.clone());
        registry.register("attempts", "HTTP attempts by outcome", m.attempts.clone());
        registry.register(
            "retries",
            "Attempts after the first of a poll",
            m.retries.clone(),
        );
        registry.register(
            "in_retry_loop",
            "Workers whose current poll has failed at least once",
            m.in_retry_loop.clone(),
        );
        registry.register("count", "Workers running", m.count.clone());
        registry.register(
            "latency_seconds",
            "Latency per attempt",
            m.latency_seconds.clone(),
        );
        WorkerMetrics { registry, ..m }
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

impl Default for WorkerMetrics {
    fn default() -> Self {
        Self::new()
    }
}
