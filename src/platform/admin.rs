//! The admin API a replica exposes to the engine (`POST /admin/drain`, `POST /admin/warm`):
//! what each call asks and answers, as one set of types the demo service writes and the
//! platforms read, so the two cannot drift apart; and what a drain that keeps the
//! answerable requests keeps ([`answerable`]), the one rule the demo service and the
//! simulator both follow.
//!
//! A reply that does not carry its figure (a service whose endpoint answers 200 with some
//! other body) leaves the figure [`Known::Unknown`] with the reply quoted: the call
//! happened, but how much it dropped is not a zero.

use serde::{Deserialize, Serialize};

/// Admin operations a replica exposes (`POST /admin/<op>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdminOp {
    /// Drop the queued backlog, all of it or all but what [`DrainKeep`] keeps; the reply
    /// says how many requests were dropped and kept.
    Drain(DrainKeep),
    /// Start warming caches.
    Warm,
}

impl AdminOp {
    /// The call's path and query: what a drain keeps travels as `?keep=`, so a platform
    /// that can only POST a path (the Kubernetes pod proxy) carries it unchanged.
    pub fn path(self) -> &'static str {
        match self {
            AdminOp::Drain(DrainKeep::None) => "/admin/drain",
            AdminOp::Drain(DrainKeep::Answerable) => "/admin/drain?keep=answerable",
            AdminOp::Warm => "/admin/warm",
        }
    }
}

pub use crate::runbook::action::DrainKeep;

/// The body of `POST /admin/drain`'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainReply {
    /// Queued requests dropped.
    pub drained: u64,
    /// Queued requests kept (`?keep=answerable`); absent from a service that keeps none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<u64>,
}

/// What a drain said it did: dropped and kept, each a count or why it is not known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DrainCounts {
    pub dropped: Known<u64>,
    /// A drain asked to keep nothing keeps nothing whatever its reply says; one asked to
    /// keep the answerable requests whose reply says nothing of them kept an unknown
    /// number (a service that does not know `keep` drops everything, but may not).
    pub kept: Known<u64>,
}

impl DrainCounts {
    /// A drain whose call got no reply to read (it failed, or answered something else),
    /// for `why`: how many it dropped is unknown, and so is how many it kept, unless it
    /// was asked to keep nothing.
    pub fn unread(keep: DrainKeep, why: String) -> DrainCounts {
        DrainCounts {
            kept: DrainCounts::kept(keep, None, || why.clone()),
            dropped: Known::Unknown { unknown: why },
        }
    }

    /// What a drain asked to `keep` kept, from the count its reply `said`: 0 when asked to
    /// keep nothing, whatever the reply says; else the count, or unknown for `why`.
    fn kept(keep: DrainKeep, said: Option<u64>, why: impl FnOnce() -> String) -> Known<u64> {
        match (keep, said) {
            (DrainKeep::None, _) => Known::Value(0),
            (DrainKeep::Answerable, Some(n)) => Known::Value(n),
            (DrainKeep::Answerable, None) => Known::Unknown { unknown: why() },
        }
    }
}

/// How many of the youngest queued requests a replica answers before their deadlines:
/// the drain keeps that many at the back of its FIFO queue and drops every one ahead.
///
/// `deadlines_in_s` are the live queued requests' time left until their clients' deadlines
/// (oldest first; the caller leaves out those whose clients have gone). They are served in
/// FIFO order, each on the first server free, each costing `cost_s` (the replica's cost
/// now, not overloaded: what is kept is at most what it answers within the deadlines, which
/// is the service's own threshold of overload); server `i` is free `free_in_s[i]` from now
/// (0 when idle). The largest `n` such that each of the last `n` completes by its deadline:
/// keeping fewer only moves each kept request earlier, so the feasible counts are `0..=n`
/// and a binary search finds `n`.
pub fn answerable(deadlines_in_s: &[f64], cost_s: f64, free_in_s: &[f64]) -> usize {
    if free_in_s.is_empty() || !(cost_s.is_finite() && cost_s >= 0.0) {
        return 0;
    }
    let fits = |n: usize| {
        let mut free: Vec<f64> = free_in_s.iter().map(|f| f.max(0.0)).collect();
        deadlines_in_s[deadlines_in_s.len() - n..]
            .iter()
            .all(|&deadline| {
                let (i, at) = free
                    .iter()
                    .copied()
                    .enumerate()
                    .min_by(|a, b| a.1.total_cmp(&b.1))
                    .unwrap_or((0, 0.0));
                free[i] = at + cost_s;
                free[i] <= deadline
            })
    };
    let (mut lo, mut hi) = (0, deadlines_in_s.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// The body of `POST /admin/warm`'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WarmReply {
    /// How warm the caches are now, 0 to 1.
    pub warm_fraction: f64,
}

/// A figure a reply gave, or why it is not known. In JSON the bare value, or
/// `{"unknown": "why"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Known<T> {
    Value(T),
    Unknown { unknown: String },
}

impl<T: Copy> Known<T> {
    pub fn value(&self) -> Option<T> {
        match self {
            Known::Value(v) => Some(*v),
            Known::Unknown { .. } => None,
        }
    }
}

/// What a replica answered to an admin call, as the platform read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdminReply {
    Drained(DrainCounts),
    Warmed(Known<f64>),
}

impl AdminReply {
    /// Read the body of a successful answer to `op`.
    pub fn read(op: AdminOp, body: &str) -> AdminReply {
        let unknown = |what: &str| {
            let quoted: String = body.trim().chars().take(200).collect();
            format!("the reply to {} carries no {what}: {quoted:?}", op.path())
        };
        match op {
            AdminOp::Drain(keep) => {
                let reply = serde_json::from_str::<DrainReply>(body).ok();
                let dropped = match reply {
                    Some(r) => Known::Value(r.drained),
                    None => Known::Unknown {
                        unknown: unknown("drained count"),
                    },
                };
                let kept =
                    DrainCounts::kept(keep, reply.and_then(|r| r.kept), || unknown("kept count"));
                AdminReply::Drained(DrainCounts { dropped, kept })
            }
            AdminOp::Warm => AdminReply::Warmed(match serde_json::from_str::<WarmReply>(body) {
                Ok(r) => Known::Value(r.warm_fraction),
                Err(_) => Known::Unknown {
                    unknown: unknown("warm_fraction"),
                },
            }),
        }
    }

    /// The drained count, when this is a drain's answer that gave one.
    pub fn drained(&self) -> Option<u64> {
        match self {
            AdminReply::Drained(d) => d.dropped.value(),
            AdminReply::Warmed(_) => None,
        }
    }

    /// The kept count, when this is a drain's answer and it is known.
    pub fn kept(&self) -> Option<u64> {
        match self {
            AdminReply::Drained(d) => d.kept.value(),
            AdminReply::Warmed(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_without_its_figure_is_unknown_never_zero() {
        let drain = AdminOp::Drain(DrainKeep::None);
        let body = serde_json::to_string(&DrainReply {
            drained: 12,
            kept: None,
        })
        .unwrap();
        let r = AdminReply::read(drain, &body);
        assert_eq!(
            r,
            AdminReply::Drained(DrainCounts {
                dropped: Known::Value(12),
                kept: Known::Value(0)
            })
        );
        assert_eq!(r.drained(), Some(12));
        let r = AdminReply::read(drain, "OK\n");
        assert_eq!(r.drained(), None);
        let AdminReply::Drained(DrainCounts {
            dropped: Known::Unknown { unknown },
            ..
        }) = &r
        else {
            panic!("{r:?}")
        };
        assert!(
            unknown.contains("/admin/drain") && unknown.contains("OK"),
            "{unknown}"
        );
        assert_eq!(
            AdminReply::read(drain, "{}").drained(),
            None,
            "a missing key is no count"
        );
        let w = AdminReply::read(AdminOp::Warm, r#"{"warm_fraction": 0.5}"#);
        assert_eq!(w, AdminReply::Warmed(Known::Value(0.5)));
        // In JSON: the bare value, or why it is unknown.
        assert_eq!(serde_json::to_string(&Known::Value(3u64)).unwrap(), "3");
        let back: Known<u64> = serde_json::from_str(r#"{"unknown":"x"}"#).unwrap();
        assert_eq!(
            back,
            Known::Unknown {
                unknown: "x".into()
            }
        );
    }

    #[test]
    fn a_drain_asked_to_keep_says_what_it_kept_or_that_it_is_unknown() {
        let keep = AdminOp::Drain(DrainKeep::Answerable);
        assert_eq!(keep.path(), "/admin/drain?keep=answerable");
        let r = AdminReply::read(keep, r#"{"drained": 40, "kept": 7}"#);
        assert_eq!((r.drained(), r.kept()), (Some(40), Some(7)));
        // A service that does not know `keep` answers the old reply: what it kept is not
        // known to be 0.
        let r = AdminReply::read(keep, r#"{"drained": 40}"#);
        assert_eq!((r.drained(), r.kept()), (Some(40), None));
    }

    #[test]
    fn the_youngest_requests_answered_in_time_are_kept() {
        // One server, 0.125 s a request: the youngest with 0.375 s left fit in turn (answered
        // at 0.125, 0.25, 0.375 s); the oldest (0.05 s left) cannot be answered even first.
        assert_eq!(answerable(&[0.05, 0.375, 0.375, 0.375], 0.125, &[0.0]), 3);
        // Keeping all four would put the last one's answer at 0.5 s, past its 0.375 s.
        assert_eq!(answerable(&[0.5, 0.375, 0.375, 0.375], 0.125, &[0.0]), 3);
        // Two servers halve the wait; a busy one frees later.
        assert_eq!(answerable(&[0.25; 4], 0.125, &[0.0, 0.0]), 4);
        assert_eq!(answerable(&[0.25; 4], 0.125, &[0.0, 0.1875]), 2);
        // Nothing to serve with, or nothing queued.
        assert_eq!(answerable(&[1.0], 0.1, &[]), 0);
        assert_eq!(answerable(&[], 0.1, &[0.0]), 0);
    }

    #[test]
    fn what_is_kept_is_answered_in_time_and_one_more_is_not() {
        // Deadlines spread as a queue's live requests are, sent over the last second with
        // a 1 s timeout: each kept one is answered in time, and keeping one more misses.
        let left: Vec<f64> = (0..300).map(|i| 1.0 - (299 - i) as f64 / 300.0).collect();
        let free = [0.0; 8];
        let n = answerable(&left, 0.04, &free);
        assert!(n > 0 && n < left.len(), "{n}");
        let done = |n: usize| {
            let mut f = free.to_vec();
            left[left.len() - n..].iter().all(|&d| {
                let i = (0..f.len()).min_by(|&a, &b| f[a].total_cmp(&f[b])).unwrap();
                f[i] += 0.04;
                f[i] <= d
            })
        };
        assert!(done(n) && !done(n + 1));
    }
}
