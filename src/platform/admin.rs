//! The admin API a replica exposes to the engine (`POST /admin/drain`, `POST /admin/warm`):
//! what each call answers, as one set of types the demo service writes and the platforms
//! read, so the two cannot drift apart.
//!
//! A reply that does not carry its figure (a service whose endpoint answers 200 with some
//! other body) leaves the figure [`Known::Unknown`] with the reply quoted: the call
//! happened, but how much it dropped is not a zero.

use serde::{Deserialize, Serialize};

/// Admin operations a replica exposes (`POST /admin/<op>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdminOp {
    /// Drop the queued backlog; the reply says how many requests were dropped.
    Drain,
    /// Start warming caches.
    Warm,
}

impl AdminOp {
    pub fn path(self) -> &'static str {
        match self {
            AdminOp::Drain => "/admin/drain",
            AdminOp::Warm => "/admin/warm",
        }
    }
}

/// The body of `POST /admin/drain`'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainReply {
    /// Queued requests dropped.
    pub drained: u64,
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
    Drained(Known<u64>),
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
            AdminOp::Drain => AdminReply::Drained(match serde_json::from_str::<DrainReply>(body) {
                Ok(r) => Known::Value(r.drained),
                Err(_) => Known::Unknown {
                    unknown: unknown("drained count"),
                },
            }),
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
            AdminReply::Drained(k) => k.value(),
            AdminReply::Warmed(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_without_its_figure_is_unknown_never_zero() {
        let body = serde_json::to_string(&DrainReply { drained: 12 }).unwrap();
        let r = AdminReply::read(AdminOp::Drain, &body);
        assert_eq!(r, AdminReply::Drained(Known::Value(12)));
        assert_eq!(r.drained(), Some(12));
        let r = AdminReply::read(AdminOp::Drain, "OK\n");
        assert_eq!(r.drained(), None);
        let AdminReply::Drained(Known::Unknown { unknown }) = &r else {
            panic!("{r:?}")
        };
        assert!(
            unknown.contains("/admin/drain") && unknown.contains("OK"),
            "{unknown}"
        );
        assert_eq!(
            AdminReply::read(AdminOp::Drain, "{}").drained(),
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
}
