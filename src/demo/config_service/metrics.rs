//! The service's `/metrics`, named as TEAM.md's contract says, because the detector, the
//! rehearsal and the tests read the victim's state from these and nothing else.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

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
    pub service_seconds: Histogram,
    pub warm_fraction: Gauge<f64, AtomicU64>,
    pub overloaded: Gauge,
    pub ready: Gauge,
}

impl ServiceMetrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("recover_demo_service");
        let m = ServiceMetrics {
            requests: Counter::default(),
            queue_depth: Gauge::default(),
            in_flight: Gauge::default(),
            completions: Family::default(),
            skipped: Counter::default(),
            drained: Counter::default(),
            service_seconds: Histogram::new(exponential_buckets(0.005, 2.0, 12)),
            warm_fraction: Gauge::default(),
            overloaded: Gauge::default(),
            ready: Gauge::default(),
            registry: Registry::default(),
        };
        registry.register(
            "requests",
            "Requests arrived at /config",
            m.requests.clone(),
        );
        registry.register(
            "queue_depth",
            "Requests waiting in the FIFO queue",
            m.queue_depth.clone(),
        );
        registry.register("in_flight", "Requests being worked on", m.in_flight.clone());
        registry.register(
            "completions",
            "Requests worked to the end: useful (client still waiting) or abandoned (client gone)",
            m.completions.clone(),
        );
        registry.register(
            "skipped",
            "Requests skipped because their x-deadline-ms had passed",
            m.skipped.clone(),
        );
        registry.register(
            "drained",
            "Queued requests dropped by POST /admin/drain",
            m.drained.clone(),
        );
        registry.register(
            "service_seconds",
            "Work time per request",
            m.service_seconds.clone(),
        );
        registry.register(
            "warm_fraction",
            "0 right after start, 1 when caches are warm",
            m.warm_fraction.clone(),
        );
        registry.register(
            "overloaded",
            "1 while the queue holds more than fits in the client timeout",
            m.overloaded.clone(),
        );
        registry.register(
            "ready",
            "1 once the startup delay has passed",
            m.ready.clone(),
        );
        // Touch both kinds so they are exported as 0 before the first completion.
        let _ = m.completions.get_or_create(&KindLabel { kind: "useful" });
        let _ = m
            .completions
            .get_or_create(&KindLabel { kind: "abandoned" });
        ServiceMetrics { registry, ..m }
    }

    /// Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

impl Default for ServiceMetrics {
    fn default() -> Self {
        Self::new()
    }
}
