//! The three retry policies the issue names, shared by both models so `--policy` means the
//! same thing everywhere: retry at once, back off exponentially, or back off with full jitter.

use super::error::SimError;
use super::kernel::rng::SplitMix64;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Retry after the base delay every time (the tick model: the next tick).
    Immediate,
    /// Double the delay after every failed try, up to the cap.
    Backoff,
    /// Backoff with full jitter: a uniform delay in 1..=2x the backoff value.
    BackoffJitter,
}

impl Policy {
    pub const ALL: [Policy; 3] = [Policy::Immediate, Policy::Backoff, Policy::BackoffJitter];

    pub fn name(self) -> &'static str {
        match self {
            Policy::Immediate => "immediate",
            Policy::Backoff => "backoff",
            Policy::BackoffJitter => "backoff-jitter",
        }
    }

    /// (backoff, jitter): the two independent switches this policy turns on.
    pub fn switches(self) -> (bool, bool) {
        match self {
            Policy::Immediate => (false, false),
            Policy::Backoff => (true, false),
            Policy::BackoffJitter => (true, true),
        }
    }
}

/// Delay in ticks before the next try, after `failed_tries` (>= 1) tries failed. `base` and
/// `cap` are in ticks; the result is at least one tick so a retry never lands in the tick
/// that failed it. Backoff doubles per failed try up to `cap`. Jitter changes one thing only,
/// the spread: uniform in 1..=2*delay has about the same mean wait, so a compare row with
/// jitter alone isolates de-synchronising the clients.
pub fn retry_delay_ticks(
    failed_tries: u32,
    base: u64,
    cap: u64,
    backoff: bool,
    jitter: bool,
    rng: &mut SplitMix64,
) -> u64 {
    let base = base.max(1);
    let delay = if backoff {
        let shift = failed_tries.saturating_sub(1).min(40);
        base.saturating_mul(1u64 << shift).min(cap.max(base))
    } else {
        base
    };
    if jitter {
        rng.between(1, delay.saturating_mul(2))
    } else {
        delay
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = SimError;
    fn from_str(s: &str) -> Result<Self, SimError> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| SimError::UnknownPolicy(s.to_string()))
    }
}
