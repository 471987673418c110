//! The gate's `/metrics`, with the names and labels fixed in TEAM.md: the engine, the
//! detector and the rehearsal scrape these, so a rename breaks them.
//!
//! Every labelled child is resolved once at start and kept as a handle, so the hot path
//! touches one atomic per counter instead of a labelled family's lock and hash map.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::exponential_buckets;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

use super::latency::LatencyHistogram;
use super::limit::Limit;
use crate::util::exposition::{encode_text, register, register_family};

type Labels = [(&'static str, &'static str); 1];
type InfoLabels = [(&'static str, String); 1];

/// What happened to one request; exactly one per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Admitted,
    RejectedRate,
    RejectedInFlight,
    UpstreamError,
    UpstreamTimeout,
    /// Admitted, but the client hung up before the upstream answered: in a stuck
    /// overload this is most requests, so it must be counted or arrivals read near zero.
    ClientGone,
}

pub struct GateMetrics {
    registry: Registry,
    outcomes: [Counter; 6],
    classes: [Counter; 4],
    /// First attempts and retries, by the method that told them apart.
    pub attempts: super::attempts::AttemptCounters,
    pub in_flight: Gauge,
    limit_rate: Gauge<f64, AtomicU64>,
    limit_burst: Gauge<f64, AtomicU64>,
    limit_max_in_flight: Gauge<f64, AtomicU64>,
    limit_info: Family<InfoLabels, Gauge>,
    upstream_latency: LatencyHistogram,
}

const OUTCOMES: [&str; 6] = [
    "admitted",
    "rejected_rate",
    "rejected_in_flight",
    "upstream_error",
    "upstream_timeout",
    "client_gone",
];
const CLASSES: [&str; 4] = ["2xx", "3xx", "4xx", "5xx"];

impl Default for GateMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl GateMetrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let r = &mut registry;
        let requests: Family<Labels, Counter> = register_family(
            r,
            "recover_gate_requests",
            "Requests by outcome, exactly one per request",
            OUTCOMES.map(|o| [("outcome", o)]),
        );
        let responses: Family<Labels, Counter> = register_family(
            r,
            "recover_gate_upstream_responses",
            "Upstream responses by status class",
            CLASSES.map(|c| [("class", c)]),
        );
        let attempts = super::attempts::AttemptCounters::register(r);
        let outcomes = OUTCOMES.map(|o| requests.get_or_create(&[("outcome", o)]).clone());
        let classes = CLASSES.map(|c| responses.get_or_create(&[("class", c)]).clone());
        let gauge = Gauge::<f64, AtomicU64>::default;
        GateMetrics {
            outcomes,
            classes,
            attempts,
            in_flight: register(
                r,
                "recover_gate_in_flight",
                "Requests admitted and not yet answered by the upstream",
                Gauge::default(),
            ),
            limit_rate: register(
                r,
                "recover_gate_limit_rate_per_s",
                "Admitted rate limit (+Inf: unlimited)",
                gauge(),
            ),
            limit_burst: register(
                r,
                "recover_gate_limit_burst",
                "Burst above the rate (+Inf: no rate limit)",
                gauge(),
            ),
            limit_max_in_flight: register(
                r,
                "recover_gate_limit_max_in_flight",
                "In-flight cap (+Inf: unlimited)",
                gauge(),
            ),
            limit_info: register(
                r,
                "recover_gate_limit_applied_info",
                "Version of the limit in force",
                Family::default(),
            ),
            upstream_latency: register(
                r,
                "recover_gate_upstream_latency_seconds",
                "Time from forwarding to the upstream's response head",
                LatencyHistogram::new(exponential_buckets(0.0005, 2.0, 16)),
            ),
            registry,
        }
    }

    pub fn outcome(&self, o: Outcome) {
        self.outcomes[o as usize].inc();
    }

    pub fn upstream_response(&self, status: u16, seconds: f64) {
        self.upstream_latency.observe(seconds);
        if let Some(c) = (status / 100)
            .checked_sub(2)
            .and_then(|i| self.classes.get(i as usize))
        {
            c.inc();
        }
    }

    /// Show the limit in force and its version (the only child of the info family).
    pub fn limit_applied(&self, limit: &Limit, version: &str) {
        let inf = f64::INFINITY;
        let rate = limit.rate_per_s.unwrap_or(inf);
        self.limit_rate.set(rate);
        self.limit_burst.set(if limit.rate_per_s.is_some() {
            f64::from(limit.burst)
        } else {
            inf
        });
        self.limit_max_in_flight
            .set(limit.max_in_flight.map_or(inf, f64::from));
        self.limit_info.clear();
        self.limit_info
            .get_or_create(&[("version", version.to_string())])
            .set(1);
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = encode_text(&self.registry);
        // prometheus-client prints Rust's "inf"; the exposition format spells it "+Inf".
        if out.contains(" inf\n") {
            out = out.replace(" inf\n", " +Inf\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_contract_names() {
        let m = GateMetrics::new();
        m.outcome(Outcome::RejectedRate);
        use super::super::attempts::{Kind, Method};
        m.attempts.count(Method::XAttempt, Kind::Retry);
        m.attempts.count(Method::ClientAddress, Kind::First);
        m.upstream_response(503, 0.01);
        m.limit_applied(&Limit::unlimited(), "7");
        let text = m.render();
        for needle in [
            "recover_gate_requests_total{outcome=\"rejected_rate\"} 1",
            "recover_gate_requests_total{outcome=\"admitted\"} 0",
            "recover_gate_attempts_total{kind=\"retry\",method=\"x-attempt\"} 1",
            "recover_gate_attempts_total{kind=\"first\",method=\"client-address\"} 1",
            "recover_gate_upstream_responses_total{class=\"5xx\"} 1",
            "recover_gate_in_flight 0",
            "recover_gate_limit_rate_per_s +Inf",
            "recover_gate_limit_applied_info{version=\"7\"} 1",
            "recover_gate_upstream_latency_seconds_count 1",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }
}
