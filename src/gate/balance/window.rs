//! One replica's latencies since the last outlier evaluation, without a lock: every proxy
//! worker records into it once per request (three relaxed atomic adds), and the evaluation
//! takes the figures and starts a new window. The p99 comes from buckets 25% apart, close
//! enough to tell a replica five times slower from its peers.

use super::outlier::{LatencyStat, WindowStat};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bucket `k` holds latencies up to `FIRST_US * GROWTH^k`; the last one everything above.
const FIRST_US: f64 = 500.0;
const GROWTH: f64 = 1.25;
const BUCKETS: usize = 64; // 0.5 ms .. about 800 s

#[derive(Debug)]
pub struct LatencyWindow {
    count: AtomicU64,
    sum_us: AtomicU64,
    buckets: [AtomicU64; BUCKETS],
}

impl Default for LatencyWindow {
    fn default() -> Self {
        LatencyWindow {
            count: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

fn bucket_of(us: u64) -> usize {
    if (us as f64) <= FIRST_US {
        return 0;
    }
    let k = ((us as f64 / FIRST_US).ln() / GROWTH.ln()).ceil() as usize;
    k.min(BUCKETS - 1)
}

fn upper_bound_us(k: usize) -> f64 {
    FIRST_US * GROWTH.powi(k as i32)
}

impl LatencyWindow {
    pub fn record(&self, micros: u64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(micros, Ordering::Relaxed);
        self.buckets[bucket_of(micros)].fetch_add(1, Ordering::Relaxed);
    }

    /// The window's figures, and a fresh window. A request recorded while this runs may
    /// land in either window; one request more or less does not change a verdict.
    pub fn take(&self, stat: LatencyStat) -> WindowStat {
        let count = self.count.swap(0, Ordering::Relaxed);
        let sum = self.sum_us.swap(0, Ordering::Relaxed);
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.swap(0, Ordering::Relaxed))
            .collect();
        if count == 0 {
            return WindowStat::default();
        }
        let latency_us = match stat {
            LatencyStat::Mean => sum as f64 / count as f64,
            LatencyStat::P99 => {
                let total: u64 = counts.iter().sum();
                let rank = (total as f64 * 0.99).ceil() as u64;
                let mut seen = 0;
                let k = counts
                    .iter()
                    .position(|&c| {
                        seen += c;
                        seen >= rank
                    })
                    .unwrap_or(BUCKETS - 1);
                upper_bound_us(k)
            }
        };
        WindowStat {
            requests: count,
            latency_ms: latency_us / 1000.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_p99_then_a_fresh_window() {
        let w = LatencyWindow::default();
        for _ in 0..99 {
            w.record(90_000);
        }
        w.record(450_000);
        let mean = w.take(LatencyStat::Mean);
        assert_eq!(mean.requests, 100);
        assert!((mean.latency_ms - 93.6).abs() < 1e-9, "{mean:?}");
        assert_eq!(w.take(LatencyStat::Mean), WindowStat::default());
        for _ in 0..200 {
            w.record(90_000);
        }
        for _ in 0..10 {
            w.record(450_000);
        }
        let p99 = w.take(LatencyStat::P99);
        // The 99th percentile is one of the slow ones; its bucket bound is within 25%.
        assert!(
            p99.latency_ms >= 450.0 && p99.latency_ms < 450.0 * GROWTH,
            "{p99:?}"
        );
    }

    #[test]
    fn buckets_cover_the_range() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(500), 0);
        assert_eq!(bucket_of(501), 1);
        assert!(upper_bound_us(bucket_of(90_000)) >= 90_000.0);
        assert!(upper_bound_us(bucket_of(90_000)) < 90_000.0 * GROWTH);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }
}
