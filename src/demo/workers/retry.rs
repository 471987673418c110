//! Retry policies and the retry budget: the client behaviour that turns a short outage into
//! a sustained overload (fixed delay, no jitter: retries arrive in waves) or damps it
//! (exponential backoff with full jitter; a budget that caps retries at a fraction of
//! successful requests). Pure logic; the poller does the waiting.

use rand::Rng;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How long a worker waits before its next attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryPolicy {
    /// `fixed:1s`: always the same delay, no jitter.
    Fixed(Duration),
    /// `exp:base=100ms,max=10s`: base * 2^(retry-1), capped at max.
    Exp { base: Duration, max: Duration },
    /// `exp-jitter:base=100ms,max=10s`: uniform in [0, the `exp` delay] (full jitter).
    ExpJitter { base: Duration, max: Duration },
}

impl RetryPolicy {
    /// The upper bound of the delay before retry number `retry` (1 = first retry).
    pub fn ceiling(&self, retry: u32) -> Duration {
        match *self {
            RetryPolicy::Fixed(d) => d,
            RetryPolicy::Exp { base, max } | RetryPolicy::ExpJitter { base, max } => {
                let shift = retry.saturating_sub(1).min(30);
                base.saturating_mul(1u32 << shift).min(max)
            }
        }
    }

    /// The delay before retry number `retry` (1 = first retry).
    pub fn delay(&self, retry: u32, rng: &mut impl Rng) -> Duration {
        let ceiling = self.ceiling(retry);
        match self {
            RetryPolicy::ExpJitter { .. } => ceiling.mul_f64(rng.random_range(0.0..=1.0)),
            _ => ceiling,
        }
    }
}

impl fmt::Display for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = crate::util::duration::format;
        match *self {
            RetryPolicy::Fixed(d) => write!(f, "fixed:{}", h(d)),
            RetryPolicy::Exp { base, max } => write!(f, "exp:base={},max={}", h(base), h(max)),
            RetryPolicy::ExpJitter { base, max } => {
                write!(f, "exp-jitter:base={},max={}", h(base), h(max))
            }
        }
    }
}

const POLICY_FORMS: &str = "fixed:1s, exp:base=100ms,max=10s or exp-jitter:base=100ms,max=10s";

impl FromStr for RetryPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, rest) = s
            .trim()
            .split_once(':')
            .ok_or_else(|| format!("invalid retry policy {s:?}; write {POLICY_FORMS}"))?;
        match kind {
            "fixed" => Ok(RetryPolicy::Fixed(crate::util::duration::parse(rest)?)),
            "exp" | "exp-jitter" => {
                let (mut base, mut max) = (None, None);
                for part in rest.split(',') {
                    let (key, value) = part.split_once('=').ok_or_else(|| {
                        format!("invalid retry policy {s:?}: {part:?} is not key=value; write {POLICY_FORMS}")
                    })?;
                    let d = crate::util::duration::parse(value)
                        .map_err(|e| format!("invalid retry policy {s:?}: {key}: {e}"))?;
                    match key.trim() {
                        "base" => base = Some(d),
                        "max" => max = Some(d),
                        other => {
                            return Err(format!(
                                "invalid retry policy {s:?}: unknown key {other:?} (base, max)"
                            ))
                        }
                    }
                }
                let base =
                    base.ok_or_else(|| format!("invalid retry policy {s:?}: base= is missing"))?;
                let max =
                    max.ok_or_else(|| format!("invalid retry policy {s:?}: max= is missing"))?;
                if max < base {
                    return Err(format!("invalid retry policy {s:?}: max is below base"));
                }
                Ok(if kind == "exp" {
                    RetryPolicy::Exp { base, max }
                } else {
                    RetryPolicy::ExpJitter { base, max }
                })
            }
            other => Err(format!(
                "invalid retry policy {s:?}: unknown kind {other:?}; write {POLICY_FORMS}"
            )),
        }
    }
}

/// A retry budget as a token bucket shared by the fleet: each successful attempt adds
/// `ratio` tokens, each retry costs one, so retries stay near `ratio` of successes.
/// The bucket starts full and holds at most `cap`, so a burst of failures spends at most
/// `cap` retries before the fleet stops retrying.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryBudget {
    ratio: f64,
    cap: f64,
    tokens: f64,
}

impl RetryBudget {
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
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

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
            RetryPolicy::Exp {
                base: ms(50),
                max: ms(2000)
            }
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
    }

    #[test]
    fn exponential_doubles_up_to_max() {
        let p = RetryPolicy::Exp {
            base: ms(100),
            max: ms(1000),
        };
        let got: Vec<_> = (1..=6).map(|r| p.ceiling(r)).collect();
        assert_eq!(
            got,
            vec![ms(100), ms(200), ms(400), ms(800), ms(1000), ms(1000)]
        );
        assert_eq!(p.ceiling(1000), ms(1000));
        assert_eq!(RetryPolicy::Fixed(ms(1000)).ceiling(7), ms(1000));
    }

    #[test]
    fn full_jitter_spreads_between_zero_and_the_ceiling() {
        let p = RetryPolicy::ExpJitter {
            base: ms(100),
            max: ms(10_000),
        };
        let mut rng = SmallRng::seed_from_u64(7);
        let delays: Vec<_> = (0..1000).map(|_| p.delay(4, &mut rng)).collect();
        assert!(delays.iter().all(|d| *d <= ms(800)));
        let low = delays.iter().filter(|d| **d < ms(400)).count();
        assert!(
            (350..650).contains(&low),
            "not uniform: {low} of 1000 below half"
        );
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
