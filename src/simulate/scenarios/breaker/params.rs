//! The parameters of `breaker`, flat so that `--set key=value` reaches every one.
//! Defaults are the drill: a dependency at 50% errors, 100 calls/s for 5 minutes.

use crate::simulate::error::SimError;
use crate::simulate::model::Params;
use crate::util::duration::serde_human;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The scenario's name.
pub const NAME: &str = "breaker";

/// Why the dependency's calls fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorMode {
    /// Each call fails with probability `error_rate`, whoever makes it.
    Random,
    /// The same callers always fail (bad data, a broken account): `error_rate` of them.
    DeterministicHalf,
    /// The dependency is overloaded: it fails what exceeds its capacity, and recovers when
    /// the load stays low for long enough.
    Overload,
}

impl ErrorMode {
    pub const ALL: [ErrorMode; 3] = [
        ErrorMode::Random,
        ErrorMode::DeterministicHalf,
        ErrorMode::Overload,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ErrorMode::Random => "random",
            ErrorMode::DeterministicHalf => "deterministic-half",
            ErrorMode::Overload => "overload",
        }
    }
}

/// Which breaker sits in front of the dependency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BreakerKind {
    /// No breaker: every call goes to the dependency.
    None,
    /// Open after `consecutive_failures` failures in a row.
    Consecutive,
    /// Open when more than `rate_threshold` of the calls in `window` failed, with at
    /// least `min_calls` calls in it.
    Rate,
}

impl BreakerKind {
    pub const ALL: [BreakerKind; 3] = [
        BreakerKind::None,
        BreakerKind::Consecutive,
        BreakerKind::Rate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BreakerKind::None => "none",
            BreakerKind::Consecutive => "consecutive",
            BreakerKind::Rate => "rate",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerParams {
    pub calls_per_s: f64,
    #[serde(with = "serde_human")]
    pub duration: Duration,
    pub errors: ErrorMode,
    /// Share of calls failing (random), or of callers failing (deterministic-half).
    pub error_rate: f64,
    /// Distinct callers; each calls once per `callers / calls_per_s` seconds, in a fixed
    /// order.
    pub callers: u32,
    pub breaker: BreakerKind,
    pub consecutive_failures: u32,
    /// Probe calls the consecutive breaker lets through after its open time.
    pub consecutive_probes: u32,
    pub rate_threshold: f64,
    #[serde(with = "serde_human")]
    pub window: Duration,
    pub min_calls: u32,
    /// Probe calls the rate breaker lets through; it closes only if all succeed.
    pub rate_probes: u32,
    /// How long either breaker stays open before probing.
    #[serde(with = "serde_human")]
    pub open_for: Duration,
    /// Overload: calls per second served while degraded (the rest fail), and while healthy.
    pub degraded_capacity: f64,
    pub healthy_capacity: f64,
    /// Overload: time with at most `degraded_capacity` calls per second offered that the
    /// dependency needs to recover.
    #[serde(with = "serde_human")]
    pub heal_after: Duration,
}

impl Default for BreakerParams {
    fn default() -> Self {
        BreakerParams {
            calls_per_s: 100.0,
            duration: Duration::from_secs(300),
            errors: ErrorMode::Random,
            error_rate: 0.5,
            callers: 100,
            breaker: BreakerKind::Rate,
            consecutive_failures: 5,
            consecutive_probes: 1,
            rate_threshold: 0.4,
            window: Duration::from_secs(10),
            min_calls: 100,
            rate_probes: 5,
            open_for: Duration::from_secs(10),
            degraded_capacity: 50.0,
            healthy_capacity: 120.0,
            heal_after: Duration::from_secs(5),
        }
    }
}

impl Params for BreakerParams {
    const NAME: &'static str = NAME;

    fn validate(&self) -> Result<(), SimError> {
        let bad = |k: &'static str, why: &str| Err(SimError::invalid(k, why));
        if !(self.calls_per_s > 0.0 && self.calls_per_s <= 10_000.0) {
            return bad("calls_per_s", "must be above 0 and at most 10000");
        }
        if self.duration.is_zero() || self.calls_per_s * self.duration.as_secs_f64() > 5e6 {
            return bad(
                "duration",
                "must be more than 0, and calls_per_s x duration at most 5,000,000",
            );
        }
        if !(0.0..=1.0).contains(&self.error_rate) {
            return bad("error_rate", "must be between 0 and 1");
        }
        if !(1..=100_000).contains(&self.callers) {
            return bad("callers", "must be between 1 and 100000");
        }
        if self.consecutive_failures == 0 {
            return bad("consecutive_failures", "must be at least 1");
        }
        if self.consecutive_probes == 0 {
            return bad("consecutive_probes", "must be at least 1");
        }
        if self.rate_probes == 0 {
            return bad("rate_probes", "must be at least 1");
        }
        if !(0.0..1.0).contains(&self.rate_threshold) {
            return bad("rate_threshold", "must be at least 0 and below 1");
        }
        if self.window.is_zero() {
            return bad("window", "must be more than 0");
        }
        if self.open_for.is_zero() {
            return bad("open_for", "must be more than 0");
        }
        let capacities_ok = self.degraded_capacity >= 0.0
            && self.healthy_capacity >= self.degraded_capacity
            && self.healthy_capacity.is_finite();
        if !capacities_ok {
            return bad(
                "healthy_capacity",
                "must be at least degraded_capacity, which must be 0 or more",
            );
        }
        Ok(())
    }
}
