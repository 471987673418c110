//! The parameters of `provider-outage`, flat so that `--set key=value` reaches every
//! one, and the three retry policies. Defaults are the drill.

use crate::simulate::error::SimError;
use crate::simulate::kernel::rng::SplitMix64;
use crate::util::duration::serde_human;
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RetryPolicy {
    /// Wait base x 2^(n-1) after the n-th failure, capped: no jitter.
    Exponential,
    /// Wait `fixed_delay` after every failure.
    Fixed,
    /// Wait random() x the exponential delay: sleep(random() x backoff).
    FullJitter,
}

impl RetryPolicy {
    pub const ALL: [RetryPolicy; 3] = [
        RetryPolicy::Exponential,
        RetryPolicy::Fixed,
        RetryPolicy::FullJitter,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RetryPolicy::Exponential => "exponential",
            RetryPolicy::Fixed => "fixed",
            RetryPolicy::FullJitter => "full-jitter",
        }
    }

    pub(super) fn describe(self, p: &ProviderOutageParams) -> String {
        let d = crate::util::duration::format;
        match self {
            RetryPolicy::Exponential => format!(
                "exponential backoff without jitter (base {}, cap {})",
                d(p.base),
                d(p.cap)
            ),
            RetryPolicy::Fixed => format!("fixed {} retries", d(p.fixed_delay)),
            RetryPolicy::FullJitter => format!(
                "exponential backoff with full jitter (random() x backoff; base {}, cap {})",
                d(p.base),
                d(p.cap)
            ),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderOutageParams {
    pub clients: u32,
    /// Each client sends a new call this often, whatever happened to its earlier calls.
    #[serde(with = "serde_human")]
    pub period: Duration,
    #[serde(with = "serde_human")]
    pub tick: Duration,
    /// Requests the provider serves in one tick; the rest fail at once.
    pub capacity_per_tick: u32,
    /// Requests served in a tick when more than the capacity arrive: the capacity for a
    /// provider that sheds the excess, less for one that collapses under overload.
    pub overload_served: u32,
    #[serde(with = "serde_human")]
    pub down_from: Duration,
    #[serde(with = "serde_human")]
    pub down_to: Duration,
    #[serde(with = "serde_human")]
    pub duration: Duration,
    pub policy: RetryPolicy,
    /// First backoff delay (exponential and full jitter).
    #[serde(with = "serde_human")]
    pub base: Duration,
    /// Longest backoff delay.
    #[serde(with = "serde_human")]
    pub cap: Duration,
    #[serde(with = "serde_human")]
    pub fixed_delay: Duration,
    /// Tries per call, the first included; 0 tries until it succeeds.
    pub max_attempts: u32,
}

impl Default for ProviderOutageParams {
    fn default() -> Self {
        ProviderOutageParams {
            clients: 40,
            period: Duration::from_secs(1),
            tick: Duration::from_millis(100),
            capacity_per_tick: 8,
            overload_served: 8,
            down_from: Duration::from_secs(2),
            down_to: Duration::from_secs(6),
            duration: Duration::from_secs(24),
            policy: RetryPolicy::Exponential,
            base: Duration::from_secs(1),
            cap: Duration::from_secs(10),
            fixed_delay: Duration::from_secs(1),
            max_attempts: 0,
        }
    }
}

impl ProviderOutageParams {
    pub(super) fn ticks(&self, d: Duration) -> u64 {
        (d.as_nanos() / self.tick.as_nanos().max(1)) as u64
    }

    pub fn validate(&self) -> Result<(), SimError> {
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
        if self.overload_served > self.capacity_per_tick {
            return bad("overload_served", "must be at most capacity_per_tick");
        }
        if self.down_to < self.down_from {
            return bad("down_to", "must not be before down_from");
        }
        for (k, d) in [("base", self.base), ("fixed_delay", self.fixed_delay)] {
            if d.is_zero() || self.ticks(d) > 1_000_000 {
                return bad(k, "must be more than 0 and at most 1000000 ticks");
            }
        }
        if self.cap < self.base || self.ticks(self.cap) > 1_000_000 {
            return bad("cap", "must be at least base and at most 1000000 ticks");
        }
        if f64::from(self.clients) * self.duration.as_secs_f64() / self.period.as_secs_f64() > 5e6 {
            return bad(
                "clients",
                "clients x duration / period must be at most 5,000,000 calls",
            );
        }
        Ok(())
    }

    /// Ticks to wait after the `n`-th failed try of a call (n >= 1).
    pub(super) fn delay_ticks(&self, n: u32, rng: &mut SplitMix64) -> u64 {
        let backoff = || {
            let shift = n.saturating_sub(1).min(40);
            self.base.saturating_mul(1 << shift.min(31)).min(self.cap)
        };
        let d = match self.policy {
            RetryPolicy::Fixed => self.fixed_delay,
            RetryPolicy::Exponential => backoff(),
            RetryPolicy::FullJitter => backoff().mul_f64(rng.unit()),
        };
        let tick = self.tick.as_nanos().max(1);
        (d.as_nanos().div_ceil(tick) as u64).max(1)
    }
}
