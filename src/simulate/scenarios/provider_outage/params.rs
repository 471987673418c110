//! The parameters of `provider-outage`, flat so that `--set key=value` reaches every
//! one. Defaults are the drill.

use crate::retry::{RetryKind, RetryPolicy};
use crate::simulate::error::SimError;
use crate::simulate::model::Params;
use crate::util::duration::serde_human;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The scenario's name.
pub const NAME: &str = "provider-outage";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderOutageParams {
    pub clients: u32,
    /// Every client makes its first call at this moment, all together.
    #[serde(with = "serde_human")]
    pub first_call: Duration,
    /// After a call succeeds, its client makes the next one this much later; a client
    /// whose call failed sends nothing new until a retry of it succeeds.
    #[serde(with = "serde_human")]
    pub period: Duration,
    #[serde(with = "serde_human")]
    pub tick: Duration,
    /// Calls' worth of work the provider does in one tick, shared among every call it holds.
    pub capacity_per_tick: u32,
    /// How long a caller waits for its answer (whole ticks): a call not answered by then
    /// has failed, and the provider drops it.
    #[serde(with = "serde_human")]
    pub timeout: Duration,
    /// The provider refuses at once the calls that do not fit its capacity (a seeded draw
    /// picks which) instead of taking every call in.
    pub shed: bool,
    #[serde(with = "serde_human")]
    pub down_from: Duration,
    #[serde(with = "serde_human")]
    pub down_to: Duration,
    #[serde(with = "serde_human")]
    pub duration: Duration,
    pub policy: RetryKind,
    /// The fixed delay, and the first backoff delay.
    #[serde(with = "serde_human")]
    pub base: Duration,
    /// Longest backoff delay.
    #[serde(with = "serde_human")]
    pub cap: Duration,
    /// Tries per call, the first included; 0 tries until it succeeds.
    pub max_attempts: u32,
}

impl Default for ProviderOutageParams {
    fn default() -> Self {
        ProviderOutageParams {
            clients: 40,
            first_call: Duration::from_secs(2),
            period: Duration::from_secs(1),
            tick: Duration::from_millis(100),
            capacity_per_tick: 8,
            timeout: Duration::from_millis(100),
            shed: false,
            down_from: Duration::from_secs(2),
            down_to: Duration::from_secs(6),
            duration: Duration::from_secs(24),
            policy: RetryKind::Exponential,
            base: Duration::from_secs(1),
            cap: Duration::from_secs(10),
            max_attempts: 0,
        }
    }
}

impl ProviderOutageParams {
    /// `d` in whole ticks (rounded down).
    pub fn ticks(&self, d: Duration) -> u64 {
        (d.as_nanos() / self.tick.as_nanos().max(1)) as u64
    }

    /// The clients' retry policy.
    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy::new(self.policy, self.base, self.cap)
    }
}

impl Params for ProviderOutageParams {
    const NAME: &'static str = NAME;

    fn validate(&self) -> Result<(), SimError> {
        let bad = |k: &'static str, why: &str| Err(SimError::invalid(k, why));
        if self.tick < Duration::from_millis(1) || self.tick > Duration::from_secs(10) {
            return bad("tick", "must be between 1ms and 10s");
        }
        if !(1..=1_000_000).contains(&self.clients) {
            return bad("clients", "must be between 1 and 1000000");
        }
        if self.period < self.tick || self.ticks(self.period) > 100_000 {
            return bad(
                "period",
                "must be at least one tick and at most 100000 ticks",
            );
        }
        if self.ticks(self.duration) == 0 || self.ticks(self.duration) > 1_000_000 {
            return bad("duration", "must be between one tick and 1000000 ticks");
        }
        if self.timeout < self.tick || self.ticks(self.timeout) > 100_000 {
            return bad(
                "timeout",
                "must be at least one tick and at most 100000 ticks",
            );
        }
        if self.down_to < self.down_from {
            return bad("down_to", "must not be before down_from");
        }
        if self.base.is_zero() || self.ticks(self.base) > 1_000_000 {
            return bad("base", "must be more than 0 and at most 1000000 ticks");
        }
        if self.cap < self.base || self.ticks(self.cap) > 1_000_000 {
            return bad("cap", "must be at least base and at most 1000000 ticks");
        }
        let calls = f64::from(self.clients) * self.duration.as_secs_f64() / self.tick.as_secs_f64();
        if calls > 5e7 {
            return bad(
                "clients",
                "clients x duration / tick must be at most 50,000,000",
            );
        }
        Ok(())
    }
}
