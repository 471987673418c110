//! The service's `/metrics`, named as docs/reference/metrics.md says, because the detector,
//! the rehearsal and the tests read the victim's state from these and nothing else.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::busy::{BusyBoard, BusyCollector};

use crate::util::exposition::{encode_text, register, register_family};

/// Label of `recover_demo_service_completions_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: &'static str,
}

/// Every metric the service exports.
pub struct ServiceMetrics {
    pub registry: Registry,
    pub requests: Counter,
    pub queue_depth: Gauge,
    pub in_flight: Gauge,
    pub completions: Family<KindLabel, Counter>,
    pub skipped: Counter,
    pub drained: Counter,
    pub drain_kept: Counter,
    pub drain_kept_late: Counter,
    pub service_seconds: Histogram,
    pub warm_fraction: Gauge<f64, AtomicU64>,
    pub overloaded: Gauge,
    pub ready: Gauge,
    pub slow_factor: Gauge<f64, AtomicU64>,
    pub concurrency_limit: Gauge,
    pub overrun_mean: Gauge<f64, AtomicU64>,
    pub overrun_sd: Gauge<f64, AtomicU64>,
    pub overrun_jobs: Gauge,
    /// The pool's free times, copied at each scrape into `busy_for_within{le_s}`.
    pub busy: Arc<BusyBoard>,
}

impl ServiceMetrics {
    pub fn new() -> Self {
        let mut r = Registry::with_prefix("recover_demo_service");
        // Fields are evaluated in the order written, which is the order `/metrics` lists them.
        ServiceMetrics {
            requests: register(&mut r, "requests", "Requests arrived at /config", Counter::default()),
            queue_depth: register(&mut r, "queue_depth", "Requests waiting in the FIFO queue", Gauge::default()),
            in_flight: register(&mut r, "in_flight", "Requests being worked on", Gauge::default()),
            // Both kinds exist from the start so they are exported as 0 before the first
            // completion.
            completions: register_family(
                &mut r,
                "completions",
                "Requests worked to the end: useful (client still waiting) or abandoned (client gone)",
                ["useful", "abandoned"].map(|kind| KindLabel { kind }),
            ),
            skipped: register(&mut r, "skipped", "Requests skipped because their x-deadline-ms had passed", Counter::default()),
            drained: register(&mut r, "drained", "Queued requests dropped by POST /admin/drain", Counter::default()),
            drain_kept: register(&mut r, "drain_kept", "Queued requests POST /admin/drain?keep=answerable kept: the youngest the service answers before their deadlines", Counter::default()),
            drain_kept_late: register(&mut r, "drain_kept_late", "Requests a drain kept that were answered (or skipped) only after their client had left or their deadline had passed", Counter::default()),
            service_seconds: register(&mut r, "service_seconds", "Work time per request", Histogram::new(exponential_buckets(0.005, 2.0, 12))),
            warm_fraction: register(&mut r, "warm_fraction", "0 right after start, 1 when caches are warm", Gauge::default()),
            overloaded: register(&mut r, "overloaded", "1 while the queue holds more than fits in the client timeout", Gauge::default()),
            ready: register(&mut r, "ready", "1 once the startup delay has passed", Gauge::default()),
            slow_factor: register(&mut r, "slow_factor", "Cost multiplier of a slowed replica (1: normal speed)", Gauge::default()),
            concurrency_limit: register(&mut r, "concurrency_limit", "Requests worked on at once (the worker pool W); capacity = W / healthy service time", Gauge::default()),
            overrun_mean: register(&mut r, "overrun_mean_seconds", "Mean time a job held its server beyond its cost (the runtime's timer and scheduling), over the jobs served", Gauge::default()),
            overrun_sd: register(&mut r, "overrun_sd_seconds", "Standard deviation of a job's hold beyond its cost, over the jobs served", Gauge::default()),
            overrun_jobs: register(&mut r, "overrun_jobs", "Jobs the overrun's mean and standard deviation are over", Gauge::default()),
            busy: {
                let board = Arc::new(BusyBoard::default());
                r.register_collector(Box::new(BusyCollector(board.clone())));
                board
            },
            registry: r,
        }
    }

    /// Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        encode_text(&self.registry)
    }
}

impl Default for ServiceMetrics {
    fn default() -> Self {
        Self::new()
    }
}
