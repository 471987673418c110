//! The fleet's `/metrics`, named as docs/reference/metrics.md says: polls (demand and
//! goodput as the clients see it), attempts, retries and how many workers are stuck
//! retrying, and where each of those stands ([`super::phases`]).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use super::phases::{Board, PhasesCollector};
use crate::util::exposition::{encode_text, register, register_family};
use std::sync::Arc;

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
    /// Of those, the ones with an attempt in flight (the rest wait out their retry delay):
    /// the split a lower bound on recovery needs, since a waiting client cannot be answered
    /// before it sends again.
    pub retrying_in_flight: Gauge,
    pub count: Gauge,
    pub latency_seconds: Histogram,
    /// The timeout per attempt, exported so the live view compares latency with the
    /// clients' real timeout rather than a runbook's guess of it.
    pub client_timeout_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// Each worker's phase in its poll, read into the `_next_attempt_within` and
    /// `_attempt_left_within` ladders at each scrape.
    pub phases: Arc<Board>,
    timeout_s: f64,
}

impl WorkerMetrics {
    /// The metrics of `workers` workers whose attempts time out after `timeout`.
    pub fn new(timeout: std::time::Duration, workers: usize) -> Self {
        let timeout_s = timeout.as_secs_f64();
        // A bucket ends at the timeout, so a quantile of attempts that timed out reads
        // the timeout, not a point inside a wider bucket above it.
        let mut buckets: Vec<f64> = exponential_buckets(0.005, 2.0, 12)
            .filter(|b| (b - timeout_s).abs() > 1e-9)
            .chain([timeout_s])
            .collect();
        buckets.sort_by(f64::total_cmp);
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
            retrying_in_flight: register(
                &mut r,
                "retrying_in_flight",
                "Workers in a retry loop with an attempt in flight (the rest wait out their retry delay)",
                Gauge::default(),
            ),
            count: register(&mut r, "running", "Workers running", Gauge::default()),
            latency_seconds: register(
                &mut r,
                "latency_seconds",
                "Latency per attempt",
                Histogram::new(buckets),
            ),
            client_timeout_seconds: {
                let g = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
                g.set(timeout_s);
                register(
                    &mut r,
                    "client_timeout_seconds",
                    "Timeout per attempt, seconds",
                    g,
                )
            },
            phases: {
                let board = Arc::new(Board::new(workers));
                r.register_collector(Box::new(PhasesCollector(board.clone())));
                board
            },
            timeout_s,
            registry: r,
        }
    }

    /// Record one attempt's latency; one that timed out waited the timeout (the timer's
    /// own lateness is not the service's).
    pub fn observe_latency(&self, seconds: f64) {
        self.latency_seconds.observe(seconds.min(self.timeout_s));
    }

    pub fn encode(&self) -> String {
        encode_text(&self.registry)
    }
}

impl Default for WorkerMetrics {
    /// The metrics of the demo's default fleet.
    fn default() -> Self {
        Self::new(
            crate::demo::defaults::CLIENT_TIMEOUT,
            crate::demo::defaults::WORKERS,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A timed-out attempt (its timer fires a little late) counts in the bucket that ends
    /// at the timeout, so no quantile reads above it; the timeout itself is exported.
    #[test]
    fn timed_out_attempts_end_at_the_timeout_which_is_exported() {
        let m = WorkerMetrics::new(Duration::from_millis(1500), 1);
        m.observe_latency(1.503);
        m.observe_latency(0.2);
        let text = m.encode();
        assert!(
            text.contains("recover_demo_workers_latency_seconds_bucket{le=\"1.5\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("recover_demo_workers_client_timeout_seconds 1.5"),
            "{text}"
        );
    }

    /// The ladders are on the page at each scrape, read from the board then: the gauge
    /// type, an `le_s` label per edge and `+Inf` counting every worker of the phase.
    #[test]
    fn the_phase_ladders_are_computed_at_the_scrape() {
        use super::super::phases::Phase;
        let m = WorkerMetrics::new(Duration::from_secs(1), 3);
        let soon = std::time::Instant::now() + Duration::from_secs(60);
        m.phases.set(0, Phase::Waiting { next_at: soon });
        m.phases.set(2, Phase::Out { gives_up_at: soon });
        let text = m.encode();
        for line in [
            "# TYPE recover_demo_workers_next_attempt_within gauge",
            "recover_demo_workers_next_attempt_within{le_s=\"0.025\"} 0",
            "recover_demo_workers_next_attempt_within{le_s=\"10\"} 0",
            "recover_demo_workers_next_attempt_within{le_s=\"+Inf\"} 1",
            "recover_demo_workers_attempt_left_within{le_s=\"+Inf\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
        m.phases.set(0, Phase::Idle);
        let text = m.encode();
        assert!(
            text.contains("recover_demo_workers_next_attempt_within{le_s=\"+Inf\"} 0\n"),
            "{text}"
        );
    }
}
