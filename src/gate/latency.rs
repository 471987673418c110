//! The upstream latency histogram, without a lock. prometheus-client's `Histogram` takes a
//! write lock for every observation, and every proxy worker observes once per request, so
//! the workers queued on one lock on the hottest path there is (measured with
//! scripts/bench-gate.sh: about 0.4 µs of gate CPU per request). Here an observation is
//! two relaxed atomic adds; the count and the cumulative buckets are worked out when
//! `/metrics` is scraped. The exposition is the same `histogram` a Prometheus server reads.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Sums are kept in whole nanoseconds so that they can be added atomically.
const NANOS: f64 = 1e9;

#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Upper bounds in seconds, ascending; an implicit +Inf bucket follows.
    bounds: Vec<f64>,
    /// Observations per bucket (not cumulative), one more than `bounds`.
    counts: Vec<AtomicU64>,
    sum_nanos: AtomicU64,
}

impl LatencyHistogram {
    pub fn new(bounds: impl IntoIterator<Item = f64>) -> Self {
        let bounds: Vec<f64> = bounds.into_iter().collect();
        let counts = (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect();
        LatencyHistogram {
            inner: Arc::new(Inner {
                bounds,
                counts,
                sum_nanos: AtomicU64::new(0),
            }),
        }
    }

    pub fn observe(&self, seconds: f64) {
        let i = &self.inner;
        // Prometheus buckets are `le`: a value equal to a bound belongs to that bucket.
        let bucket = i.bounds.partition_point(|b| *b < seconds);
        i.counts[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = (seconds.max(0.0) * NANOS) as u64;
        i.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Sum in seconds, count, and per-bucket counts with their upper bounds (the last one
    /// `f64::MAX`, which the encoder prints as `+Inf`).
    fn snapshot(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let i = &self.inner;
        let buckets: Vec<(f64, u64)> = i
            .bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::MAX))
            .zip(i.counts.iter().map(|c| c.load(Ordering::Relaxed)))
            .collect();
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = i.sum_nanos.load(Ordering::Relaxed) as f64 / NANOS;
        (sum, count, buckets)
    }
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let (sum, count, buckets) = self.snapshot();
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;

    #[test]
    fn exposes_cumulative_le_buckets_sum_and_count() {
        let h = LatencyHistogram::new([0.01, 0.1]);
        for v in [0.005, 0.01, 0.05, 3.0] {
            h.observe(v);
        }
        let mut r = Registry::default();
        r.register("lat_seconds", "Latency", h.clone());
        let text = crate::util::exposition::encode_text(&r);
        for line in [
            "lat_seconds_bucket{le=\"0.01\"} 2",
            "lat_seconds_bucket{le=\"0.1\"} 3",
            "lat_seconds_bucket{le=\"+Inf\"} 4",
            "lat_seconds_count 4",
            "lat_seconds_sum 3.065",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }
}
