//! Arrivals: the times at which a stream of calls reaches a model, evenly paced or as a
//! Poisson stream (independent clients, so calls bunch up), in microseconds.

use super::rng::SplitMix64;
use serde::{Deserialize, Serialize};

/// How requests arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arrivals {
    /// Independent clients: exponential gaps (a Poisson stream), so requests bunch up.
    Poisson,
    /// Evenly spaced: the n-th at n / rate.
    Paced,
}

/// One stream of arrivals at `rate_per_s` from time 0.
#[derive(Debug, Clone)]
pub struct Stream {
    kind: Arrivals,
    rate_per_s: f64,
    /// Arrivals so far, and the time of the last one.
    n: u64,
    last_us: u64,
}

impl Stream {
    pub fn new(kind: Arrivals, rate_per_s: f64) -> Self {
        Stream {
            kind,
            rate_per_s,
            n: 0,
            last_us: 0,
        }
    }

    /// The time of the next arrival; a Poisson gap is at least one microsecond, so two
    /// arrivals of a stream never share a time.
    pub fn next(&mut self, rng: &mut SplitMix64) -> u64 {
        let t = match self.kind {
            Arrivals::Paced => (self.n as f64 * 1e6 / self.rate_per_s) as u64,
            Arrivals::Poisson => {
                let gap = rng.exponential(1e6 / self.rate_per_s) as u64;
                self.last_us + gap.max(1)
            }
        };
        self.n += 1;
        self.last_us = t;
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paced_arrivals_sit_at_n_over_the_rate_without_drift() {
        let mut s = Stream::new(Arrivals::Paced, 60.0);
        let mut rng = SplitMix64::new(1);
        let t: Vec<u64> = (0..3601).map(|_| s.next(&mut rng)).collect();
        assert_eq!(&t[..3], &[0, 16_666, 33_333]);
        assert_eq!(t[3600], 60_000_000);
    }

    #[test]
    fn poisson_arrivals_average_the_rate() {
        let mut s = Stream::new(Arrivals::Poisson, 100.0);
        let mut rng = SplitMix64::new(3);
        let last = (0..10_000).map(|_| s.next(&mut rng)).last().unwrap();
        let rate = 10_000.0 / (last as f64 / 1e6);
        assert!((rate - 100.0).abs() < 3.0, "{rate}");
    }
}
