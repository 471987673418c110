//! The fleet's `/metrics`, named as docs/reference/metrics.md says: polls (demand and
//! goodput as the clients see it), attempts, retries and how many workers are stuck
//! retrying.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::util::exposition::{encode_text, register, register_family};

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
        let mut r = Registry::with_prefix("recover_demo_workers");
        // Fields are evaluated in the order written, which is the order `/metrics` lists them.
        WorkerMetrics {
            polls: register_family(
                &mut r,
                "polls",
                "Demanded polls by final outcome",
                ["ok", "given_up"].map(|outcome| OutcomeLabel { outcome }),
            ),
            attempts: register_family(
                &mut r,
                "attempts",
                "HTTP attempts by outcome",
                ["ok", "error", "timeout"].map(|outcome| OutcomeLabel { outcome }),
            ),
            retries: register(
                &mut r,
                "retries",
                "Attempts after the first of a poll",
                Counter::default(),
            ),
            in_retry_loop: register(
                &mut r,
                "in_retry_loop",
                "Workers whose current poll has failed at least once",
                Gauge::default(),
            ),
            count: register(&mut r, "running", "Workers running", Gauge::default()),
            latency_seconds: register(
                &mut r,
                "latency_seconds",
                "Latency per attempt",
                Histogram::new(exponential_buckets(0.005, 2.0, 12)),
            ),
            registry: r,
        }
    }

    pub fn encode(&self) -> String {
        encode_text(&self.registry)
    }
}

impl Default for WorkerMetrics {
    fn default() -> Self {
        Self::new()
    }
}
