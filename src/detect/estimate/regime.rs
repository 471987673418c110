//! The regime of a scrape, for the estimators that fit the cost model
//! ([`super::cold`], [`super::cost`]): each needs to know whether a scrape's service time
//! carries k.
//!
//! A busy scrape shows one of two regimes: overloaded, or queued and not overloaded. The
//! service is overloaded while its queue holds more than it answers within the clients'
//! timeout at its un-overloaded capacity, `queue > concurrency / (healthy x m(w)) x timeout`. The observed service time makes that
//! test without knowing `healthy`, `f` or `k`: not overloaded, it is `healthy x m(w)` and
//! `queue > concurrency / service_time x timeout` is the model's condition itself, false;
//! overloaded, it carries k and the right side is k times lower than the model's threshold,
//! which the queue is already over, so true. Only a busy service counts (`queue > 0`:
//! every slot working, so the service time is the cost of the work, not of a trickle),
//! and only where the regime held at every scrape of the rate window the service time is
//! a mean over. Summed over replicas (queue, concurrency) the test is exact while the
//! replicas are alike, which balancing keeps them.

use crate::metrics::signal::{names, Snapshot};

/// What a busy scrape shows of the cost model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Regime {
    /// Queued beyond what the service answers within the clients' timeout: costs carry k.
    Overloaded,
    /// Queued, every slot busy, not overloaded: costs are `healthy x m(w)`.
    Queued,
}

/// Why a scrape says nothing of the regime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoRegime {
    /// Nothing queued: the service was not busy.
    Idle,
    /// A signal the test needs is absent (named).
    Missing(&'static str),
}

/// The regime of one scrape (module doc).
pub fn regime(s: &Snapshot) -> Result<Regime, NoRegime> {
    let queue = s
        .get(names::QUEUE_DEPTH)
        .ok_or(NoRegime::Missing(names::QUEUE_DEPTH))?;
    if queue <= 0.0 {
        return Err(NoRegime::Idle);
    }
    let st = s
        .get(names::SERVICE_TIME)
        .filter(|v| v.is_finite() && *v > 0.0)
        .ok_or(NoRegime::Missing(names::SERVICE_TIME))?;
    let conc = s
        .get(names::CONCURRENCY_LIMIT)
        .filter(|v| *v > 0.0)
        .ok_or(NoRegime::Missing(names::CONCURRENCY_LIMIT))?;
    let timeout = s
        .get(names::CLIENT_TIMEOUT)
        .filter(|v| *v > 0.0)
        .ok_or(NoRegime::Missing(names::CLIENT_TIMEOUT))?;
    Ok(if queue > conc / st * timeout {
        Regime::Overloaded
    } else {
        Regime::Queued
    })
}

/// The regime of `s` if it held at every scrape of the rate window ending at `s`.
pub fn held_regime(window: &[Snapshot], s: &Snapshot) -> Result<Regime, NoRegime> {
    regime(s)?;
    held_over_rate_window(window, s, regime).unwrap_or(Err(NoRegime::Idle))
}

/// `class` of `s` if every scrape of the rate window ending at `s` has the same: a rate
/// (the service time among them) is a mean over that window, so it shows one regime only
/// where the regime held throughout.
pub fn held_over_rate_window<T: PartialEq>(
    window: &[Snapshot],
    s: &Snapshot,
    class: impl Fn(&Snapshot) -> T,
) -> Option<T> {
    let span = crate::util::duration::parse(crate::detect::default_signals::RATE_WINDOW)
        .unwrap_or_default();
    let from = s.at.checked_sub(span).unwrap_or(s.at);
    let c = class(s);
    // Windows are oldest first: the rate window is a slice (a history of hundreds of
    // scrapes, each tested over its own rate window, stays linear).
    let lo = window.partition_point(|o| o.at < from);
    let hi = window.partition_point(|o| o.at <= s.at);
    window[lo..hi.max(lo)]
        .iter()
        .all(|o| class(o) == c)
        .then_some(c)
}
