//! The per-target Lease, decided as client-go's leader election does: a lease held by
//! someone else has expired only when *this* controller has watched it stay unchanged for
//! a whole lease duration, timed by its own monotonic clock. The holder's `renewTime` is
//! another machine's clock: trusting it lets clock skew, or a renewal stuck in flight,
//! hand the target to a second controller while the first one keeps evicting.
//!
//! The holder, for its part, gives the lease up as lost once it has failed to renew it for
//! [`renew_deadline`], well before anyone else could take it over.

use std::time::{Duration, Instant};

/// The per-target Lease as the lock decision sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseView {
    pub holder_identity: Option<String>,
    pub run_id: Option<String>,
    /// The object's resourceVersion: any write (a renewal) changes it.
    pub version: String,
    pub duration: Duration,
}

/// When this controller first saw the lease at `version`.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub version: String,
    pub at: Instant,
}

impl Observed {
    /// The observation to keep after reading `lease` at `now`: the old one if the lease
    /// has not changed since, a fresh one if it has.
    pub fn update(previous: Option<Observed>, lease: &LeaseView, now: Instant) -> Observed {
        match previous {
            Some(o) if o.version == lease.version => o,
            _ => Observed {
                version: lease.version.clone(),
                at: now,
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum LeaseDecision {
    /// No Lease yet: create it.
    Create,
    /// Ours already (same identity and run): renew it.
    Renew,
    /// Free, or unchanged for a whole lease duration as we watched it: take it over.
    TakeOver,
    /// Someone else holds it; by our own clock it cannot have expired before `expires_in`.
    Held {
        holder: String,
        run_id: String,
        expires_in: Duration,
    },
}

/// Pure: what to do with `lease` given what we observed of it (see [`Observed::update`]).
pub fn lease_decision(
    lease: Option<&LeaseView>,
    identity: &str,
    run_id: &str,
    observed: &Observed,
    now: Instant,
) -> LeaseDecision {
    let Some(lease) = lease else {
        return LeaseDecision::Create;
    };
    let holder = match lease.holder_identity.as_deref() {
        None | Some("") => return LeaseDecision::TakeOver,
        Some(h) => h,
    };
    if holder == identity && lease.run_id.as_deref() == Some(run_id) {
        return LeaseDecision::Renew;
    }
    let unchanged_for = if observed.version == lease.version {
        now.saturating_duration_since(observed.at)
    } else {
        Duration::ZERO
    };
    if unchanged_for >= lease.duration {
        return LeaseDecision::TakeOver;
    }
    LeaseDecision::Held {
        holder: holder.to_string(),
        run_id: lease.run_id.clone().unwrap_or_default(),
        expires_in: lease.duration - unchanged_for,
    }
}

/// How long the holder may go without a successful renewal before it must stop acting:
/// two thirds of the lease, so it stops before a watcher could see the lease expire.
pub fn renew_deadline(lease: Duration) -> Duration {
    lease * 2 / 3
}

/// How often the holder renews: a third of the lease.
pub fn renew_every(lease: Duration) -> Duration {
    (lease / 3).max(Duration::from_millis(100))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(version: &str) -> LeaseView {
        LeaseView {
            holder_identity: Some("alice@laptop".into()),
            run_id: Some("run-1".into()),
            version: version.into(),
            duration: Duration::from_secs(15),
        }
    }

    #[test]
    fn a_lease_expires_only_after_we_watched_it_unchanged_for_its_duration() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let lease = held("10");
        assert_eq!(
            lease_decision(
                None,
                "bob",
                "run-2",
                &Observed::update(None, &lease, t0),
                t0
            ),
            LeaseDecision::Create
        );
        // First sight: held for a whole duration, whatever renewTime says.
        let o = Observed::update(None, &lease, t0);
        match lease_decision(Some(&lease), "bob", "run-2", &o, t0) {
            LeaseDecision::Held {
                holder,
                run_id,
                expires_in,
            } => {
                assert_eq!(
                    (holder.as_str(), run_id.as_str()),
                    ("alice@laptop", "run-1")
                );
                assert_eq!(expires_in, s(15));
            }
            other => panic!("expected Held, got {other:?}"),
        }
        // Unchanged for 14 s: still held; renewed at 14 s: the clock starts again.
        assert!(matches!(
            lease_decision(Some(&lease), "bob", "run-2", &o, t0 + s(14)),
            LeaseDecision::Held { .. }
        ));
        let renewed = held("11");
        let o2 = Observed::update(Some(o.clone()), &renewed, t0 + s(14));
        assert_eq!(o2.at, t0 + s(14));
        assert!(matches!(
            lease_decision(Some(&renewed), "bob", "run-2", &o2, t0 + s(20)),
            LeaseDecision::Held { .. }
        ));
        assert_eq!(
            lease_decision(Some(&renewed), "bob", "run-2", &o2, t0 + s(29)),
            LeaseDecision::TakeOver
        );
        assert_eq!(
            lease_decision(Some(&lease), "alice@laptop", "run-1", &o, t0),
            LeaseDecision::Renew
        );
        let released = LeaseView {
            holder_identity: None,
            ..lease
        };
        assert_eq!(
            lease_decision(Some(&released), "bob", "run-2", &o, t0),
            LeaseDecision::TakeOver
        );
    }

    #[test]
    fn the_holder_gives_up_before_anyone_can_take_over() {
        let lease = Duration::from_secs(15);
        assert!(renew_deadline(lease) < lease);
        assert!(renew_every(lease) < renew_deadline(lease));
    }
}
