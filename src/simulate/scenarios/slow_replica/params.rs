//! The parameters of `slow-replica`, flat so that `--set key=value` reaches every one.
//! Defaults are the drill: 4 replicas, 60 req/s, each able to finish about 25 req/s,
//! healthy p50 about 90 ms and p99 about 100 ms, replica B five times slower from 1 s.

use crate::gate::balance::outlier::{LatencyStat, OutlierConfig};
use crate::gate::balance::policy::BalancePolicy;
use crate::simulate::error::SimError;
use crate::simulate::kernel::arrivals::Arrivals;
use crate::simulate::model::Params;
use crate::util::duration::{serde_human, serde_human_opt};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The scenario's name.
pub const NAME: &str = "slow-replica";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SlowReplicaParams {
    pub replicas: u32,
    /// Requests per second offered to the balancer, all replicas together.
    pub rate_per_s: f64,
    pub arrivals: Arrivals,
    /// Requests one replica works on at once (its worker pool); the rest wait in FIFO.
    pub concurrency: u32,
    /// A request's work on a healthy replica is uniform between these.
    #[serde(with = "serde_human")]
    pub service_min: Duration,
    #[serde(with = "serde_human")]
    pub service_max: Duration,
    /// Added to every call's latency (the round trip), not spent on the replica.
    #[serde(with = "serde_human")]
    pub network: Duration,
    /// Which replica slows down (0 = A, 1 = B, ...).
    pub slow_replica: u32,
    #[serde(with = "serde_human")]
    pub slow_at: Duration,
    /// Its work per request is multiplied by this from `slow_at` on.
    pub slow_factor: f64,
    /// Requests arrive for this long; the run then continues until every call has ended.
    #[serde(with = "serde_human")]
    pub duration: Duration,
    pub balancer: BalancePolicy,
    /// The gate's latency outlier ejection (the `outlier_*` settings below).
    pub outlier_ejection: bool,
    pub outlier_stat: LatencyStat,
    #[serde(with = "serde_human")]
    pub outlier_interval: Duration,
    pub outlier_factor: f64,
    pub outlier_min_requests: u64,
    #[serde(with = "serde_human")]
    pub outlier_base_ejection: Duration,
    #[serde(with = "serde_human")]
    pub outlier_max_ejection: Duration,
    pub outlier_max_ejected_percent: u32,
    #[serde(with = "serde_human")]
    pub outlier_ramp: Duration,
    /// The caller gives up on an attempt after this (none: waits as long as it takes).
    /// The replica still works on it: nothing tells it the caller left.
    #[serde(with = "serde_human_opt")]
    pub timeout: Option<Duration>,
    /// Attempts after a timeout, each on another replica; the call fails once all time out.
    pub timeout_retries: u32,
    /// Send a second copy to another replica if no answer came within this; the first
    /// answer wins.
    #[serde(with = "serde_human_opt")]
    pub hedge_after: Option<Duration>,
    /// Hedged calls at most this share of the calls so far.
    pub hedge_max_fraction: f64,
}

impl Default for SlowReplicaParams {
    fn default() -> Self {
        let o = OutlierConfig::default();
        SlowReplicaParams {
            replicas: 4,
            rate_per_s: 60.0,
            arrivals: Arrivals::Paced,
            concurrency: 2,
            service_min: Duration::from_millis(72),
            service_max: Duration::from_millis(88),
            network: Duration::from_millis(10),
            slow_replica: 1,
            slow_at: Duration::from_secs(1),
            slow_factor: 5.0,
            duration: Duration::from_secs(60),
            balancer: BalancePolicy::RoundRobin,
            outlier_ejection: false,
            outlier_stat: o.stat,
            outlier_interval: o.interval,
            outlier_factor: o.factor,
            outlier_min_requests: o.min_requests,
            outlier_base_ejection: o.base_ejection,
            outlier_max_ejection: o.max_ejection,
            outlier_max_ejected_percent: o.max_ejected_percent,
            outlier_ramp: o.ramp,
            timeout: None,
            timeout_retries: 0,
            hedge_after: None,
            hedge_max_fraction: 0.1,
        }
    }
}

impl SlowReplicaParams {
    /// The gate's outlier settings, when ejection is on.
    pub fn outlier(&self) -> Option<OutlierConfig> {
        self.outlier_ejection.then_some(OutlierConfig {
            stat: self.outlier_stat,
            interval: self.outlier_interval,
            factor: self.outlier_factor,
            min_requests: self.outlier_min_requests,
            base_ejection: self.outlier_base_ejection,
            max_ejection: self.outlier_max_ejection,
            max_ejected_percent: self.outlier_max_ejected_percent,
            ramp: self.outlier_ramp,
        })
    }

    /// Requests per second one replica finishes when healthy: workers / mean work.
    pub fn capacity_per_replica(&self) -> f64 {
        let mean = (self.service_min + self.service_max).as_secs_f64() / 2.0;
        f64::from(self.concurrency) / mean
    }
}

impl Params for SlowReplicaParams {
    const NAME: &'static str = NAME;

    fn validate(&self) -> Result<(), SimError> {
        let bad = |k: &'static str, why: &str| Err(SimError::invalid(k, why));
        if !(2..=26).contains(&self.replicas) {
            return bad("replicas", "must be between 2 and 26");
        }
        if !(self.rate_per_s > 0.0 && self.rate_per_s <= 100_000.0) {
            return bad("rate_per_s", "must be above 0 and at most 100000");
        }
        if self.rate_per_s * self.duration.as_secs_f64() > 2e6 {
            return bad(
                "duration",
                "rate_per_s x duration must be at most 2,000,000 calls",
            );
        }
        if self.duration < Duration::from_secs(1) || self.duration > Duration::from_secs(3600) {
            return bad("duration", "must be between 1s and 1h");
        }
        if !(1..=10_000).contains(&self.concurrency) {
            return bad("concurrency", "must be between 1 and 10000");
        }
        if self.service_min.is_zero() || self.service_max < self.service_min {
            return bad(
                "service_max",
                "must be at least service_min, which must be above 0",
            );
        }
        if self.slow_replica >= self.replicas {
            return bad("slow_replica", "must name one of the replicas (0 = A)");
        }
        if !(self.slow_factor.is_finite() && (1.0..=1000.0).contains(&self.slow_factor)) {
            return bad("slow_factor", "must be between 1 and 1000");
        }
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return bad("timeout", "must be more than 0 (or null for none)");
        }
        if self.timeout_retries > 3 {
            return bad("timeout_retries", "must be at most 3");
        }
        if self.timeout_retries > 0 && self.timeout.is_none() {
            return bad("timeout_retries", "needs a timeout");
        }
        if self.hedge_after.is_some_and(|t| t.is_zero()) {
            return bad("hedge_after", "must be more than 0 (or null for none)");
        }
        if !(0.0..=1.0).contains(&self.hedge_max_fraction) {
            return bad("hedge_max_fraction", "must be between 0 and 1");
        }
        if let Some(o) = self.outlier() {
            if let Err((field, why)) = o.check() {
                let key = match field {
                    "interval" => "outlier_interval",
                    "factor" => "outlier_factor",
                    "min_requests" => "outlier_min_requests",
                    "base_ejection" => "outlier_base_ejection",
                    "max_ejection" => "outlier_max_ejection",
                    _ => "outlier_max_ejected_percent",
                };
                return Err(SimError::invalid(key, why));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_drill() {
        let p = SlowReplicaParams::default();
        assert!(p.validate().is_ok());
        // Two workers, 80 ms of work on average: 25 req/s per replica.
        assert!((p.capacity_per_replica() - 25.0).abs() < 1e-9);
    }

    #[test]
    fn bad_values_name_the_key() {
        let refusal = |p: SlowReplicaParams| p.validate().unwrap_err().to_string();
        let e = refusal(SlowReplicaParams {
            slow_replica: 4,
            ..SlowReplicaParams::default()
        });
        assert!(e.contains("slow_replica"), "{e}");
        let e = refusal(SlowReplicaParams {
            outlier_ejection: true,
            outlier_factor: 0.5,
            ..SlowReplicaParams::default()
        });
        assert!(e.contains("outlier_factor"), "{e}");
    }
}
