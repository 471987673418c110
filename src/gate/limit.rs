//! The gate's limit: the one value every other part of `recover` reads or writes.
//!
//! Its JSON form is the admin API's wire format and the state file's content:
//! `{"rate_per_s": number|null, "burst": integer, "max_in_flight": integer|null, "note": string|null, "shadow": bool}`
//! (read by [`super::validate::parse_json`], where `burst` and `shadow` may be left out).
//! A change through the admin API may add `"fill": true` or `"fill": N` ([`LimitChange`],
//! [`Fill`]).
//!
//! A limit in shadow is decided exactly as it would be enforced and refuses nothing: the
//! gate counts what it would have refused, so a team can see what a limit would do to
//! today's traffic before trusting it with an outage.

use serde::{Deserialize, Serialize};

/// How much the gate admits. `None` means unlimited on that axis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    /// Admitted requests per second (GCRA). `None`: unlimited. `Some(0.0)`: block all.
    pub rate_per_s: Option<f64>,
    /// Requests that may be admitted back to back above the rate. At least 1 when a rate is set.
    pub burst: u32,
    /// Requests admitted and not yet answered. `None`: unlimited.
    pub max_in_flight: Option<u32>,
    /// Who set this limit and what a human should do about it; shown by `GET /admin/limit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Decide every request by this limit, count what it would refuse, admit everything.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shadow: bool,
}

/// A change of limit as the admin API takes it: the limit, and how its bucket starts
/// ([`Fill`]). A new limit opens no burst by default (it carries over at most what the old
/// one had left, [`super::admission`]); a fill is for a readmission that knows what is
/// queued and sized its burst to what the queue may hold. It is a one-off at the change,
/// never stored: the state file and a ConfigMap hold a [`Limit`], so a gate restarted or
/// re-reading its source does not open a burst again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimitChange {
    #[serde(flatten)]
    pub limit: Limit,
    /// How many tokens the new bucket starts with.
    #[serde(default, skip_serializing_if = "Fill::is_carried")]
    pub fill: Fill,
}

impl LimitChange {
    /// The usual change: the bucket keeps what the old limit had left.
    pub fn carried(limit: Limit) -> Self {
        LimitChange {
            limit,
            fill: Fill::Carried,
        }
    }
}

/// How many tokens a new limit's bucket starts with. On the wire: absent or `false`
/// carried, `true` full, a whole number `N` that many (never above the burst); a runbook
/// may also write the words `carried` and `full`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fill {
    /// At most what the old limit had left (none after an unlimited or blocked one).
    #[default]
    Carried,
    /// Full at the new limit's burst.
    Full,
    /// This many tokens, at most the new limit's burst.
    Tokens(u32),
}

impl Fill {
    /// The tokens the bucket starts with under a burst of `burst`; None when carried
    /// (what the old limiter had left decides). The one place a fill becomes a count.
    pub fn tokens(self, burst: u32) -> Option<u32> {
        match self {
            Fill::Carried => None,
            Fill::Full => Some(burst),
            Fill::Tokens(n) => Some(n.min(burst)),
        }
    }

    pub fn is_carried(&self) -> bool {
        *self == Fill::Carried
    }
}

impl Serialize for Fill {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Fill::Carried => s.serialize_bool(false),
            Fill::Full => s.serialize_bool(true),
            Fill::Tokens(n) => s.serialize_u32(*n),
        }
    }
}

impl<'de> Deserialize<'de> for Fill {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FillVisitor)
    }
}

struct FillVisitor;

impl serde::de::Visitor<'_> for FillVisitor {
    type Value = Fill;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("`full` or true (the bucket full), `carried` or false, or a whole number of tokens from 0")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Fill, E> {
        match v {
            "full" => Ok(Fill::Full),
            "carried" => Ok(Fill::Carried),
            _ => Err(E::invalid_value(serde::de::Unexpected::Str(v), &self)),
        }
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Fill, E> {
        Ok(if v { Fill::Full } else { Fill::Carried })
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Fill, E> {
        u32::try_from(v).map(Fill::Tokens).map_err(|_| {
            E::invalid_value(
                serde::de::Unexpected::Unsigned(v),
                &"at most 4294967295 tokens",
            )
        })
    }
}

/// The burst when none is given, in seconds of the rate. Clients retrying on a fixed delay
/// arrive in waves; a burst much smaller than a wave turns most of it away although the
/// rate is not used up (seen in rehearsals: a limit of 90 req/s with burst 9 admitted
/// 21 req/s while rejecting 45), and every rejection keeps the wave together for the next
/// round. Half a second of the rate lets a wave through whole, and a service that can take
/// the rate clears it in half a second.
pub const DEFAULT_BURST_SECONDS: f64 = 0.5;

/// [`DEFAULT_BURST_SECONDS`] of `rate`, at least 1.
pub fn default_burst(rate_per_s: f64) -> u32 {
    (rate_per_s * DEFAULT_BURST_SECONDS)
        .ceil()
        .clamp(1.0, f64::from(u32::MAX)) as u32
}

impl Limit {
    /// Pass-through: no rate limit, no in-flight cap.
    pub fn unlimited() -> Self {
        Limit {
            rate_per_s: None,
            burst: 1,
            max_in_flight: None,
            note: None,
            shadow: false,
        }
    }

    /// True when this limit rejects every request (in shadow it rejects none).
    pub fn blocks_all(&self) -> bool {
        !self.shadow && (self.rate_per_s == Some(0.0) || self.max_in_flight == Some(0))
    }

    /// True when this limit turns anything away (a rate or an in-flight cap is set, and
    /// enforced, not in shadow).
    pub fn restricts(&self) -> bool {
        !self.shadow && self.decides()
    }

    /// True when this limit has anything to decide (a rate or an in-flight cap), enforced
    /// or in shadow.
    pub fn decides(&self) -> bool {
        self.rate_per_s.is_some() || self.max_in_flight.is_some()
    }

    /// When a human must have reviewed this limit: the first `review by <RFC 3339 time>`
    /// in its note, as the runbook engine writes it ("...; review by
    /// 2025-01-31T12:30:00Z: if that run is no longer active ..."). None without one.
    pub fn review_by(&self) -> Option<std::time::SystemTime> {
        let note = self.note.as_deref()?;
        let at = note.find(REVIEW_BY)? + REVIEW_BY.len();
        let token = note[at..].split_whitespace().next()?;
        humantime::parse_rfc3339(token.trim_end_matches([':', ',', ';', '.', ')'])).ok()
    }
}

/// How a limit's note states its review deadline (see [`Limit::review_by`]).
pub const REVIEW_BY: &str = "review by ";

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn the_review_deadline_is_read_from_the_note() {
        let note = "set by recover run r1 (runbook stuck-overload, step block-at-edge); review by 2030-01-01T00:00:00Z: if that run is no longer active, the owner must check";
        let l = Limit {
            rate_per_s: Some(25.0),
            burst: 13,
            max_in_flight: None,
            note: Some(note.into()),
            shadow: false,
        };
        assert_eq!(
            l.review_by(),
            Some(UNIX_EPOCH + Duration::from_secs(1_893_456_000))
        );
        assert!(l.restricts());
        let plain = Limit {
            note: Some("manual, no deadline".into()),
            ..l.clone()
        };
        assert_eq!(plain.review_by(), None);
        assert!(!Limit::unlimited().restricts());
        let watched = Limit {
            shadow: true,
            ..l.clone()
        };
        assert!(!watched.restricts() && watched.decides());
        let json = serde_json::to_string(&l).unwrap();
        assert!(!json.contains("shadow"), "{json}");
        assert!(serde_json::to_string(&watched)
            .unwrap()
            .contains(r#""shadow":true"#));
    }
}
