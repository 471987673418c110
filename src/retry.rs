//! What a client does after a failed attempt: the retry policy (how long to wait before
//! the next try) and the retry budget (whether to try again at all). One type each, used by
//! the demo workers and by every simulator scenario, so that "fixed", "exponential" and
//! "full jitter" mean the same thing in a model as in the real clients it predicts.
//!
//! Full jitter is the AWS architecture blog's: sleep(random() x backoff), a wait drawn
//! uniformly between 0 and the exponential delay. The caller supplies the random number,
//! so the workers can use their thread RNG and the simulator its own seeded one.

use crate::util::duration;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How the wait grows from one retry to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RetryKind {
    /// Always `base`.
    Fixed,
    /// `base x 2^(n-1)` before the n-th retry, capped at `max`: no jitter.
    Exponential,
    /// random() x the exponential delay.
    FullJitter,
}

impl RetryKind {
    pub const ALL: [RetryKind; 3] = [
        RetryKind::Fixed,
        RetryKind::Exponential,
        RetryKind::FullJitter,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RetryKind::Fixed => "fixed",
            RetryKind::Exponential => "exponential",
            RetryKind::FullJitter => "full-jitter",
        }
    }
}

impl fmt::Display for RetryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RetryKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        RetryKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                format!("retry policy `{s}` is not one of fixed, exponential, full-jitter")
            })
    }
}

/// How long a client waits before its next attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub kind: RetryKind,
    /// The fixed delay, or the first backoff delay.
    pub base: Duration,
    /// The longest backoff delay (at least `base`).
    pub max: Duration,
}

impl RetryPolicy {
    pub fn fixed(delay: Duration) -> Self {
        RetryPolicy {
            kind: RetryKind::Fixed,
            base: delay,
            max: delay,
        }
    }

    pub fn new(kind: RetryKind, base: Duration, max: Duration) -> Self {
        RetryPolicy {
            kind,
            base,
            max: max.max(base),
        }
    }

    /// The policy in whole nanoseconds, converted once.
    pub fn in_nanos(&self) -> RetryNanos {
        let base = nanos(self.base);
        RetryNanos {
            kind: self.kind,
            base,
            max: nanos(self.max).max(base),
        }
    }

    /// The longest wait before retry number `retry` (1 = the first retry).
    pub fn ceiling(&self, retry: u32) -> Duration {
        Duration::from_nanos(self.in_nanos().ceiling(retry))
    }

    /// The wait before retry number `retry` (1 = the first retry); `random` (uniform in
    /// [0, 1)) is drawn only by full jitter.
    pub fn delay(&self, retry: u32, random: impl FnOnce() -> f64) -> Duration {
        Duration::from_nanos(self.in_nanos().delay(retry, random))
    }

    /// [`RetryPolicy::delay`] in whole `unit`s, rounded up and at least one: a model that
    /// advances `unit` by `unit` never retries in the unit that failed.
    pub fn delay_units(&self, retry: u32, unit: Duration, random: impl FnOnce() -> f64) -> u64 {
        self.in_nanos().delay_units(retry, nanos(unit), random)
    }

    /// In words, for reports.
    pub fn describe(&self) -> String {
        let d = duration::format;
        match self.kind {
            RetryKind::Fixed => format!("fixed {} retries", d(self.base)),
            RetryKind::Exponential => format!(
                "exponential backoff without jitter (base {}, cap {})",
                d(self.base),
                d(self.max)
            ),
            RetryKind::FullJitter => format!(
                "exponential backoff with full jitter (random() x backoff; base {}, cap {})",
                d(self.base),
                d(self.max)
            ),
        }
    }
}

/// A [`RetryPolicy`] in whole nanoseconds: the one computation of its delays, for a model
/// that draws one per event without converting durations each time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryNanos {
    kind: RetryKind,
    base: u64,
    /// At least `base`.
    max: u64,
}

impl RetryNanos {
    /// The longest wait before retry number `retry` (1 = the first retry).
    #[inline]
    fn ceiling(&self, retry: u32) -> u64 {
        if self.kind == RetryKind::Fixed {
            return self.base;
        }
        let shift = retry.saturating_sub(1).min(63);
        let grown = self
            .base
            .checked_shl(shift)
            .filter(|g| g >> shift == self.base);
        grown.unwrap_or(u64::MAX).min(self.max)
    }

    #[inline]
    fn delay(&self, retry: u32, random: impl FnOnce() -> f64) -> u64 {
        let ceiling = self.ceiling(retry);
        match self.kind {
            RetryKind::FullJitter => (ceiling as f64 * random().clamp(0.0, 1.0)) as u64,
            RetryKind::Fixed | RetryKind::Exponential => ceiling,
        }
    }

    /// [`RetryPolicy::delay_units`] with the unit in nanoseconds.
    #[inline]
    pub fn delay_units(&self, retry: u32, unit_nanos: u64, random: impl FnOnce() -> f64) -> u64 {
        self.delay(retry, random).div_ceil(unit_nanos.max(1)).max(1)
    }

    /// The policy in whole units of `unit_nanos`, its undrawn waits worked out once.
    pub fn in_units(&self, unit_nanos: u64) -> RetryUnits {
        RetryUnits {
            nanos: *self,
            unit_nanos,
            undrawn: std::array::from_fn(|i| self.delay_units(i as u32 + 1, unit_nanos, || 1.0)),
        }
    }
}

/// A [`RetryNanos`] in whole units of a model's clock, for a model that draws a wait per
/// failed attempt: fixed and exponential waits depend only on the retry number and stop
/// changing at the 64th (the shift is capped there), so they are looked up, not divided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryUnits {
    nanos: RetryNanos,
    unit_nanos: u64,
    /// [`RetryNanos::delay_units`] of retry `i + 1`, for the kinds that draw nothing.
    undrawn: [u64; 64],
}

impl RetryUnits {
    /// [`RetryNanos::delay_units`] in this unit.
    #[inline]
    pub fn delay(&self, retry: u32, random: impl FnOnce() -> f64) -> u64 {
        if self.nanos.kind == RetryKind::FullJitter {
            return self.nanos.delay_units(retry, self.unit_nanos, random);
        }
        self.undrawn[retry.saturating_sub(1).min(63) as usize]
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl fmt::Display for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = duration::format;
        match self.kind {
            RetryKind::Fixed => write!(f, "fixed:{}", h(self.base)),
            RetryKind::Exponential => write!(f, "exp:base={},max={}", h(self.base), h(self.max)),
            RetryKind::FullJitter => {
                write!(f, "exp-jitter:base={},max={}", h(self.base), h(self.max))
            }
        }
    }
}

const POLICY_FORMS: &str = "fixed:1s, exp:base=100ms,max=10s or exp-jitter:base=100ms,max=10s";

impl FromStr for RetryPolicy {
    type Err = String;

    /// `fixed:1s`, `exp:base=100ms,max=10s` (exponential) or `exp-jitter:base=100ms,max=10s`
    /// (full jitter): the demo workers' `--retry` flag.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = |why: String| format!("invalid retry policy {s:?}: {why}");
        let (kind, rest) = s
            .trim()
            .split_once(':')
            .ok_or_else(|| format!("invalid retry policy {s:?}; write {POLICY_FORMS}"))?;
        let kind = match kind {
            "fixed" => return Ok(RetryPolicy::fixed(duration::parse(rest)?)),
            "exp" => RetryKind::Exponential,
            "exp-jitter" => RetryKind::FullJitter,
            other => return Err(bad(format!("unknown kind {other:?}; write {POLICY_FORMS}"))),
        };
        let (mut base, mut max) = (None, None);
        for part in rest.split(',') {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| bad(format!("{part:?} is not key=value; write {POLICY_FORMS}")))?;
            let d = duration::parse(value).map_err(|e| bad(format!("{key}: {e}")))?;
            match key.trim() {
                "base" => base = Some(d),
                "max" => max = Some(d),
                other => return Err(bad(format!("unknown key {other:?} (base, max)"))),
            }
        }
        let base = base.ok_or_else(|| bad("base= is missing".into()))?;
        let max = max.ok_or_else(|| bad("max= is missing".into()))?;
        if max < base {
            return Err(bad("max is below base".into()));
        }
        Ok(RetryPolicy { kind, base, max })
    }
}

/// A retry budget as a token bucket shared by a fleet (or a layer): each success adds
/// `ratio` tokens, each retry costs one, so retries stay near `ratio` of successes. It
/// starts full and holds at most `cap`, so a burst of failures spends at most `cap`
/// retries before the fleet stops retrying.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryBudget {
    ratio: f64,
    cap: f64,
    tokens: f64,
}

impl RetryBudget {
    /// A bucket holding at most `cap` (at least one) tokens, full at the start.
    pub fn new(ratio: f64, cap: f64) -> Self {
        let cap = cap.max(1.0);
        RetryBudget {
            ratio,
            cap,
            tokens: cap,
        }
    }

    pub fn on_success(&mut self) {
        self.tokens = (self.tokens + self.ratio).min(self.cap);
    }

    /// Take one token for a retry; false (and nothing taken) if the budget is spent.
    pub fn try_spend(&mut self) -> bool {
        // Tolerate float rounding: ten deposits of 0.1 make one token.
        if self.tokens + 1e-9 >= 1.0 {
            self.tokens = (self.tokens - 1.0).max(0.0);
            true
        } else {
            false
        }
    }

    pub fn tokens(&self) -> f64 {
        self.tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The looked-up waits are the computed ones, past the 64th retry and at retry 0 too.
    #[test]
    fn waits_in_units_are_the_computed_ones_for_every_retry() {
        let unit = 10_000_000; // a 10 ms tick
        for policy in [
            RetryPolicy::fixed(ms(3_001)),
            RetryPolicy::new(RetryKind::Exponential, ms(7), ms(9_000)),
            RetryPolicy::new(RetryKind::FullJitter, ms(7), ms(9_000)),
        ] {
            let (n, u) = (policy.in_nanos(), policy.in_nanos().in_units(unit));
            for retry in 0..100 {
                for r in [0.0, 0.37, 0.999] {
                    assert_eq!(
                        u.delay(retry, || r),
                        n.delay_units(retry, unit, || r),
                        "{policy} retry {retry}"
                    );
                }
            }
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn parses_the_three_forms_and_prints_them_back() {
        for s in [
            "fixed:1s",
            "exp:base=100ms,max=10s",
            "exp-jitter:base=100ms,max=10s",
        ] {
            let p: RetryPolicy = s.parse().unwrap();
            assert_eq!(p.to_string(), s);
        }
        assert_eq!(
            "exp:max=2s,base=50ms".parse::<RetryPolicy>().unwrap(),
            RetryPolicy::new(RetryKind::Exponential, ms(50), ms(2000))
        );
    }

    #[test]
    fn refuses_bad_policies_with_a_reason() {
        let err = |s: &str| s.parse::<RetryPolicy>().unwrap_err();
        assert!(err("fixed").contains("write fixed:1s"));
        assert!(err("fixed:1").contains("with a unit"));
        assert!(err("linear:1s").contains("unknown kind"));
        assert!(err("exp:base=1s").contains("max= is missing"));
        assert!(err("exp:base=1s,max=2s,cap=3s").contains("unknown key"));
        assert!(err("exp:base=2s,max=1s").contains("below base"));
        assert!(err("exp-jitter:base").contains("key=value"));
        assert!("sometimes"
            .parse::<RetryKind>()
            .unwrap_err()
            .contains("sometimes"));
    }

    #[test]
    fn exponential_doubles_up_to_max_and_fixed_stays() {
        let p = RetryPolicy::new(RetryKind::Exponential, ms(100), ms(1000));
        let got: Vec<_> = (1..=6).map(|r| p.delay(r, || unreachable!())).collect();
        assert_eq!(
            got,
            vec![ms(100), ms(200), ms(400), ms(800), ms(1000), ms(1000)]
        );
        assert_eq!(p.ceiling(1000), ms(1000));
        assert_eq!(RetryPolicy::fixed(ms(1000)).ceiling(7), ms(1000));
    }

    /// sleep(random() x backoff): the wait is the exponential delay scaled by the draw,
    /// anywhere from 0 up to (not including) the ceiling.
    #[test]
    fn full_jitter_is_random_times_the_backoff() {
        let p = RetryPolicy::new(RetryKind::FullJitter, ms(100), ms(10_000));
        assert_eq!(p.delay(4, || 0.0), Duration::ZERO);
        assert_eq!(p.delay(4, || 0.25), ms(200));
        assert_eq!(p.delay(4, || 0.5), ms(400));
        assert_eq!(p.delay(30, || 0.5), ms(5_000));
    }

    #[test]
    fn delay_in_units_rounds_up_and_is_at_least_one() {
        let tick = ms(100);
        let fixed = RetryPolicy::fixed(Duration::from_secs(1));
        assert_eq!(fixed.delay_units(1, tick, || unreachable!()), 10);
        let jitter = RetryPolicy::new(RetryKind::FullJitter, Duration::from_secs(1), ms(10_000));
        assert_eq!(jitter.delay_units(1, tick, || 0.0), 1);
        assert_eq!(jitter.delay_units(1, tick, || 0.31), 4);
        assert_eq!(jitter.delay_units(3, tick, || 0.5), 20);
    }

    #[test]
    fn budget_allows_retries_at_its_ratio_of_successes() {
        let mut b = RetryBudget::new(0.1, 2.0);
        assert!(b.try_spend() && b.try_spend());
        assert!(!b.try_spend(), "a spent budget refuses");
        for _ in 0..10 {
            b.on_success();
        }
        assert!(b.try_spend(), "ten successes earn one retry");
        assert!(!b.try_spend());
        for _ in 0..1000 {
            b.on_success();
        }
        assert_eq!(b.tokens(), 2.0, "capped");
    }
}
