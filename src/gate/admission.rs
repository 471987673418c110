//! Admission: the decision, per request, to forward or to answer 429 at once. A request
//! must pass both the in-flight cap and the GCRA rate (governor). The in-flight slot is
//! taken first so that a request refused for concurrency does not spend rate budget.
//!
//! A new limit must never open a burst above itself. A freshly built governor limiter
//! starts with a full bucket, so [`Admission::apply`] measures how many cells the old
//! limiter still had (by draining it: it is being discarded anyway) and drains the new
//! limiter down to that number. Raising the rate under load therefore admits the new rate
//! from the next request on, not the new burst all at once. It starts the bucket with more
//! only when asked ([`Admission::apply_filled`], the admin API's `fill`): by a readmission
//! that knows what is queued and sized the burst to what the queue may hold; even then
//! never above the new burst.
//!
//! A limit in shadow goes through the same decision ([`decide`]) against its own count of
//! requests held, the ones it would have admitted, and then admits the request anyway,
//! saying why it would have refused it. Its path costs the decision plus one atomic
//! increment over pass-through: no allocation and no lock.
//!
//! The policy changes seldom and is read on every request by every worker: it is a
//! [`Snapshot`], read without a lock. A request deciding at the moment of a change may
//! use the old policy, as if it had come a moment earlier (at most one per thread).

use super::limit::Limit;
use super::snapshot::Snapshot;
use governor::clock::Clock;
use governor::{DefaultDirectRateLimiter, Quota};
use prometheus_client::metrics::gauge::Gauge;
use std::num::NonZeroU32;
use std::time::Duration;

/// How the rate axis of a limit is enforced.
enum Rate {
    Unlimited,
    BlockAll,
    /// The limiter and its burst: asking it for more cells than that overflows governor's
    /// arithmetic before it can say no.
    Limited(DefaultDirectRateLimiter, u32),
}

struct Policy {
    rate: Rate,
    max_in_flight: Option<i64>,
    shadow: bool,
}

/// Why a limit refuses a request (or, in shadow, would have).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Rate = 0,
    InFlight = 1,
}

impl Refused {
    pub const ALL: [Refused; 2] = [Refused::Rate, Refused::InFlight];

    /// The `reason` label of `recover_gate_shadow_refusals_total`.
    pub fn label(self) -> &'static str {
        match self {
            Refused::Rate => "rate",
            Refused::InFlight => "in_flight",
        }
    }
}

/// One limit's decision on one request.
enum Decision {
    Admit,
    Rate { retry_after_s: u64 },
    InFlight,
}

/// The outcome of [`Admission::try_admit`].
pub enum Admit<'a> {
    /// Forward the request; the slot is released when the guard drops.
    Admitted(InFlight<'a>),
    /// Over the rate (or the rate is 0): answer 429 with this Retry-After.
    RejectedRate { retry_after_s: u64 },
    /// Over the in-flight cap: answer 429 with Retry-After 1.
    RejectedInFlight,
}

/// One admitted request's in-flight slot.
pub struct InFlight<'a> {
    gauge: &'a Gauge,
    /// In shadow, when the shadow limit admitted this request too: its count of held
    /// requests, released with the slot.
    shadow_held: Option<&'a Gauge>,
    /// In shadow, why the limit would have refused this request.
    shadow_refused: Option<Refused>,
}

impl InFlight<'_> {
    /// Why the limit in shadow would have refused this request (None: it would have
    /// admitted it, or the limit is enforced).
    pub fn shadow_refused(&self) -> Option<Refused> {
        self.shadow_refused
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.gauge.dec();
        if let Some(held) = self.shadow_held {
            held.dec();
        }
    }
}

/// The enforcement state of the current limit, shared by every connection.
pub struct Admission {
    /// The policy in force, read without a lock ([`Snapshot`]).
    policy: Snapshot<Policy>,
    /// Requests admitted and not yet answered; also the `recover_gate_in_flight` gauge.
    in_flight: Gauge,
    /// Requests a limit in shadow would have admitted and not yet answered; also the
    /// `recover_gate_shadow_in_flight` gauge (0 while the limit is enforced).
    shadow_in_flight: Gauge,
}

impl Admission {
    /// Start enforcing `limit` with a full burst, the usual token-bucket start.
    pub fn new(limit: &Limit, in_flight: Gauge) -> Self {
        Admission {
            policy: Snapshot::new(build_policy(limit, limit.burst)),
            in_flight,
            shadow_in_flight: Gauge::default(),
        }
    }

    /// Count what a limit in shadow holds in `gauge` (the `/metrics` one).
    pub fn with_shadow_gauge(mut self, gauge: Gauge) -> Self {
        self.shadow_in_flight = gauge;
        self
    }

    pub fn in_flight(&self) -> i64 {
        self.in_flight.get()
    }

    /// Requests the limit in shadow would have held in flight now.
    pub fn shadow_in_flight(&self) -> i64 {
        self.shadow_in_flight.get()
    }

    /// Admit one request or say why not. Never blocks. In shadow, admit it and say why
    /// the limit would not have.
    pub fn try_admit(&self) -> Admit<'_> {
        self.policy.read(|policy| self.admit_by(policy))
    }

    fn admit_by(&self, policy: &Policy) -> Admit<'_> {
        if !policy.shadow {
            return match decide(policy, &self.in_flight) {
                Decision::Admit => Admit::Admitted(InFlight {
                    gauge: &self.in_flight,
                    shadow_held: None,
                    shadow_refused: None,
                }),
                Decision::Rate { retry_after_s } => Admit::RejectedRate { retry_after_s },
                Decision::InFlight => Admit::RejectedInFlight,
            };
        }
        let (shadow_held, shadow_refused) = match decide(policy, &self.shadow_in_flight) {
            Decision::Admit => (Some(&self.shadow_in_flight), None),
            Decision::Rate { .. } => (None, Some(Refused::Rate)),
            Decision::InFlight => (None, Some(Refused::InFlight)),
        };
        self.in_flight.inc();
        Admit::Admitted(InFlight {
            gauge: &self.in_flight,
            shadow_held,
            shadow_refused,
        })
    }

    /// Put `limit` in force for the very next request, carrying over no more burst than
    /// the old limiter had left (and none from an unlimited or blocked state).
    pub fn apply(&self, limit: &Limit) {
        self.policy.replace(|old| {
            let available = match &old.rate {
                Rate::Limited(old, old_burst) => take_available(limit.burst.min(*old_burst), |n| {
                    matches!(old.check_n(n), Ok(Ok(())))
                }),
                // Unlimited: we cannot know how much just went through; start empty.
                Rate::Unlimited | Rate::BlockAll => 0,
            };
            build_policy(limit, available)
        });
    }

    /// Put `limit` in force for the very next request with `tokens` in its bucket (at
    /// most its burst), whatever the old limiter had left.
    pub fn apply_filled(&self, limit: &Limit, tokens: u32) {
        self.policy
            .replace(|_| build_policy(limit, tokens.min(limit.burst)));
    }
}

/// The limit's decision on one request, enforced or in shadow alike. `held` counts the
/// requests it admitted that are not yet answered, and counts this one if it admits it.
fn decide(policy: &Policy, held: &Gauge) -> Decision {
    // With an in-flight cap the slot is taken first (a request refused for concurrency
    // spends no rate); without one a rate refusal touches no shared gauge: two atomic
    // writes fewer on the path an overload takes most.
    let capped = policy.max_in_flight.is_some();
    if let Some(max) = policy.max_in_flight {
        if held.inc() >= max {
            held.dec();
            return Decision::InFlight;
        }
    }
    let rejected = match &policy.rate {
        Rate::Unlimited => None,
        Rate::BlockAll => Some(1),
        Rate::Limited(limiter, _) => match limiter.check() {
            Ok(()) => None,
            Err(not_until) => Some(retry_after_secs(
                not_until.wait_time_from(limiter.clock().now()),
            )),
        },
    };
    match rejected {
        None => {
            if !capped {
                held.inc();
            }
            Decision::Admit
        }
        Some(retry_after_s) => {
            if capped {
                held.dec();
            }
            Decision::Rate { retry_after_s }
        }
    }
}

fn build_policy(limit: &Limit, available: u32) -> Policy {
    Policy {
        rate: build_rate(limit, available),
        max_in_flight: limit.max_in_flight.map(i64::from),
        shadow: limit.shadow,
    }
}

/// A limiter for `limit` whose bucket holds `available` cells (at most the burst).
fn build_rate(limit: &Limit, available: u32) -> Rate {
    let Some(rate) = limit.rate_per_s else {
        return Rate::Unlimited;
    };
    if rate <= 0.0 || !rate.is_finite() {
        return Rate::BlockAll;
    }
    let burst = NonZeroU32::new(limit.burst).unwrap_or(NonZeroU32::MIN);
    let Some(quota) = Quota::with_period(period(rate, burst)) else {
        return Rate::Unlimited;
    };
    let limiter = DefaultDirectRateLimiter::direct(quota.allow_burst(burst));
    if let Some(drain) = NonZeroU32::new(burst.get().saturating_sub(available)) {
        let _ = limiter.check_n(drain);
    }
    Rate::Limited(limiter, burst.get())
}

/// The longest a full bucket may take to refill, in nanoseconds. governor adds that span
/// (and up to twice it while draining) to its clock in unchecked u64 nanoseconds (584
/// years); a quarter of the range leaves the rest for the process's uptime.
const MAX_SPAN_NS: f64 = (u64::MAX / 4) as f64;

/// One cell's period for `rate` (> 0): at least a nanosecond, and never so long that the
/// whole burst's refill leaves [`MAX_SPAN_NS`]. Validation refuses rates anywhere near
/// that ([`super::validate`]); a replica's share of a valid limit over very many peers can
/// come closer, and is then enforced at the slowest representable rate, a block in effect.
fn period(rate: f64, burst: NonZeroU32) -> Duration {
    let ns = (1e9 / rate).clamp(1.0, MAX_SPAN_NS / f64::from(burst.get()));
    Duration::from_nanos(ns as u64)
}

/// How many cells (up to `cap`) `try_take` hands out right now, taking them all. Takes
/// in halving chunks so that a large burst costs a few dozen calls, not `cap`.
pub fn take_available(cap: u32, mut try_take: impl FnMut(NonZeroU32) -> bool) -> u32 {
    let mut total = 0u32;
    let mut chunk = cap;
    while let Some(n) = NonZeroU32::new(chunk) {
        if matches!(total.checked_add(chunk), Some(t) if t <= cap) && try_take(n) {
            total += chunk;
        } else {
            chunk /= 2;
        }
    }
    total
}

/// Retry-After is whole seconds; round up and never say 0 (clients would hammer).
pub fn retry_after_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(rate: Option<f64>, burst: u32, max_in_flight: Option<u32>) -> Limit {
        Limit {
            rate_per_s: rate,
            burst,
            max_in_flight,
            note: None,
            shadow: false,
        }
    }

    fn admitted_now(a: &Admission, tries: usize) -> usize {
        (0..tries)
            .filter(|_| matches!(a.try_admit(), Admit::Admitted(_)))
            .count()
    }

    #[test]
    fn take_available_counts_what_is_left_up_to_the_cap() {
        let mut left = 37u32;
        let got = take_available(100, |n| {
            if n.get() <= left {
                left -= n.get();
                true
            } else {
                false
            }
        });
        assert_eq!(got, 37);
        let mut left = 1000u32;
        assert_eq!(
            take_available(10, |n| {
                left -= n.get();
                true
            }),
            10
        );
        assert_eq!(take_available(0, |_| true), 0);
    }

    #[test]
    fn a_new_limit_is_in_force_for_the_next_request_of_a_thread_that_kept_the_old_one() {
        let a = std::sync::Arc::new(Admission::new(&limit(None, 1, None), Gauge::default()));
        let (used, used_rx) = std::sync::mpsc::channel();
        let (changed, changed_rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn({
            let a = a.clone();
            move || {
                let before = matches!(a.try_admit(), Admit::Admitted(_));
                used.send(()).unwrap();
                changed_rx.recv().unwrap();
                let after = matches!(a.try_admit(), Admit::RejectedRate { .. });
                (before, after)
            }
        });
        used_rx.recv().unwrap();
        a.apply(&limit(Some(0.0), 1, None));
        changed.send(()).unwrap();
        assert_eq!(other.join().unwrap(), (true, true));
    }

    #[test]
    fn starts_with_a_full_burst_then_holds_the_rate() {
        let a = Admission::new(&limit(Some(1.0), 5, None), Gauge::default());
        assert_eq!(admitted_now(&a, 20), 5);
    }

    #[test]
    fn raising_the_burst_under_load_opens_no_new_burst() {
        let a = Admission::new(&limit(Some(1.0), 5, None), Gauge::default());
        assert_eq!(admitted_now(&a, 20), 5, "old bucket drained");
        a.apply(&limit(Some(1.0), 500, None));
        assert!(
            admitted_now(&a, 1000) <= 1,
            "a fresh limiter would admit 500"
        );
    }

    #[test]
    fn a_full_bucket_opens_only_when_asked_and_never_above_the_burst() {
        let a = Admission::new(&limit(Some(1.0), 500, None), Gauge::default());
        assert_eq!(admitted_now(&a, 1000), 500);
        a.apply_filled(&limit(Some(1.0), 50, None), 50);
        assert_eq!(admitted_now(&a, 1000), 50);
        a.apply_filled(&limit(Some(1.0), 50, None), 5000);
        assert_eq!(admitted_now(&a, 1000), 50);
    }

    /// A fill of N tokens admits exactly N at once, whatever the old bucket held, then
    /// the rate: from empty (a carried change after the bucket was spent) and from full.
    #[test]
    fn a_fill_of_n_tokens_admits_exactly_n_at_once() {
        let a = Admission::new(&limit(Some(1.0), 500, None), Gauge::default());
        assert_eq!(admitted_now(&a, 1000), 500);
        a.apply_filled(&limit(Some(1.0), 180, None), 97);
        assert_eq!(admitted_now(&a, 1000), 97);
        let b = Admission::new(&limit(Some(1.0), 180, None), Gauge::default());
        b.apply_filled(&limit(Some(1.0), 180, None), 3);
        assert_eq!(admitted_now(&b, 1000), 3);
        b.apply_filled(&limit(Some(1.0), 180, None), 0);
        assert_eq!(admitted_now(&b, 1000), 0);
    }

    #[test]
    fn lowering_keeps_at_most_the_new_burst_of_what_was_left() {
        let a = Admission::new(&limit(Some(1.0), 50, None), Gauge::default());
        assert_eq!(admitted_now(&a, 10), 10);
        a.apply(&limit(Some(1.0), 5, None));
        assert_eq!(admitted_now(&a, 100), 5);
        let b = Admission::new(&limit(None, 1, None), Gauge::default());
        assert_eq!(admitted_now(&b, 100), 100);
        b.apply(&limit(Some(1.0), 50, None));
        assert!(
            admitted_now(&b, 100) <= 1,
            "unlimited carries no burst over"
        );
    }

    #[test]
    fn rate_zero_and_in_flight_cap_reject() {
        let a = Admission::new(&limit(Some(0.0), 0, None), Gauge::default());
        assert!(matches!(a.try_admit(), Admit::RejectedRate { .. }));
        let a = Admission::new(&limit(None, 1, Some(2)), Gauge::default());
        let first = a.try_admit();
        let second = a.try_admit();
        assert!(matches!(a.try_admit(), Admit::RejectedInFlight));
        assert_eq!(a.in_flight(), 2);
        drop(first);
        drop(second);
        assert_eq!(a.in_flight(), 0);
        assert!(matches!(a.try_admit(), Admit::Admitted(_)));
    }

    #[test]
    fn any_rate_and_burst_builds_a_limiter_that_admits_without_panicking() {
        for rate in [5e-324, 1e-300, 1e-12, 3.2e-8, 1e-3, 1.0, 1e9, f64::MAX] {
            for burst in [0, 1, 2, 1000, u32::MAX] {
                let a = Admission::new(&limit(Some(rate), burst, None), Gauge::default());
                admitted_now(&a, 3);
                a.apply(&limit(Some(rate), burst, Some(u32::MAX)));
                admitted_now(&a, 3);
                a.apply(&limit(Some(1.0), 5, None));
                a.apply(&limit(Some(rate), burst, None));
            }
        }
        let slowest = period(1e-300, NonZeroU32::MIN);
        assert!(slowest > Duration::from_secs(100 * 365 * 24 * 3600));
        assert_eq!(period(1e12, NonZeroU32::MIN), Duration::from_nanos(1));
        assert_eq!(period(2.0, NonZeroU32::MIN), Duration::from_millis(500));
    }

    #[test]
    fn shadow_decides_as_enforced_and_admits_everything() {
        let enforced = Admission::new(&limit(Some(1.0), 5, None), Gauge::default());
        let shadow = Admission::new(
            &Limit {
                shadow: true,
                ..limit(Some(1.0), 5, None)
            },
            Gauge::default(),
        );
        assert_eq!(admitted_now(&enforced, 20), 5);
        let slots: Vec<_> = (0..20)
            .map(|_| match shadow.try_admit() {
                Admit::Admitted(slot) => slot,
                _ => panic!("shadow refuses nothing"),
            })
            .collect();
        let refused = slots
            .iter()
            .filter(|s| s.shadow_refused().is_some())
            .count();
        assert_eq!(refused, 15, "the same 15 the enforced limit refused");
        assert_eq!(shadow.in_flight(), 20);
        assert_eq!(shadow.shadow_in_flight(), 5);
        drop(slots);
        assert_eq!((shadow.in_flight(), shadow.shadow_in_flight()), (0, 0));
    }

    #[test]
    fn shadow_holds_its_own_in_flight_count() {
        let a = Admission::new(
            &Limit {
                shadow: true,
                ..limit(None, 1, Some(2))
            },
            Gauge::default(),
        );
        let held: Vec<_> = (0..3)
            .map(|_| match a.try_admit() {
                Admit::Admitted(slot) => slot,
                _ => panic!("shadow refuses nothing"),
            })
            .collect();
        let why: Vec<_> = held.iter().map(|s| s.shadow_refused()).collect();
        assert_eq!(why, [None, None, Some(Refused::InFlight)]);
        assert_eq!((a.in_flight(), a.shadow_in_flight()), (3, 2));
        drop(held);
        // Enforcing the same cap afterwards starts from the real count, not the shadow's.
        a.apply(&limit(None, 1, Some(2)));
        let first = a.try_admit();
        assert_eq!((a.in_flight(), a.shadow_in_flight()), (1, 0));
        drop(first);
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_secs(Duration::from_millis(10)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1500)), 2);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
    }
}
