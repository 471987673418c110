//! Whether a request that failed on a reused upstream connection may go out again on a
//! new one. The gate exists so that the upstream never sees more than was admitted, and a
//! proxy must never repeat a request the upstream may have acted on (RFC 9110 §9.2.2), so
//! the rule is strict: a resend needs all three of
//!
//! - not one byte of the request reached the old connection (its first write failed: the
//!   upstream had already reset it), so the upstream cannot have read any of it;
//! - an idempotent method (GET, HEAD, OPTIONS, TRACE, PUT, DELETE), as a second line;
//! - a fresh admission: the resend counts against the rate and the in-flight cap like a
//!   new request (checked last, so a refused resend spends no rate).
//!
//! A connection the upstream closed while idle is normally seen before anything is
//! written ([`super::upstream::Links::take`]) and replaced without any of this; what is
//! left here is the race where it closes in between.

/// Why a request was not sent again; the label of
/// `recover_gate_upstream_resends_refused_total{reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Some of the request reached the connection: the upstream may have acted on it.
    Written = 0,
    /// A method that is not idempotent is never sent twice by the gate.
    NotIdempotent = 1,
    /// The resend did not pass admission (rate or in-flight cap).
    NotAdmitted = 2,
}

impl Refusal {
    pub const ALL: [Refusal; 3] = [
        Refusal::Written,
        Refusal::NotIdempotent,
        Refusal::NotAdmitted,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Refusal::Written => "written",
            Refusal::NotIdempotent => "not_idempotent",
            Refusal::NotAdmitted => "not_admitted",
        }
    }
}

/// The label of `recover_gate_upstream_resends_total{reason}`: the only case sent again.
pub const RESENT_REASON: &str = "closed_before_write";

/// The decision before admission: `written` is whether any byte of the request reached
/// the failed connection.
pub fn may_resend(written: bool, idempotent: bool) -> Result<(), Refusal> {
    if written {
        Err(Refusal::Written)
    } else if !idempotent {
        Err(Refusal::NotIdempotent)
    } else {
        Ok(())
    }
}

/// RFC 9110 §9.2.2: the methods whose repetition has the effect of one request.
pub fn is_idempotent(method: &str) -> bool {
    ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]
        .iter()
        .any(|m| m.eq_ignore_ascii_case(method))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_unwritten_idempotent_request_may_go_again() {
        assert_eq!(may_resend(false, true), Ok(()));
        assert_eq!(may_resend(true, true), Err(Refusal::Written));
        assert_eq!(may_resend(true, false), Err(Refusal::Written));
        assert_eq!(may_resend(false, false), Err(Refusal::NotIdempotent));
    }

    #[test]
    fn idempotent_methods_are_those_of_rfc_9110() {
        for m in ["GET", "head", "OPTIONS", "TRACE", "PUT", "DELETE"] {
            assert!(is_idempotent(m), "{m}");
        }
        for m in ["POST", "PATCH", "CONNECT", "LOCK", ""] {
            assert!(!is_idempotent(m), "{m}");
        }
    }
}
