//! Checks a [`Limit`] before the gate stores it or puts it in force: the one check every
//! source goes through (admin API, state file, flags, ConfigMap, the engine's limits).
//! Whoever sends a limit (an operator with curl at 3 am, a ConfigMap, a runbook) must learn
//! which field is wrong, and a bad limit must never replace a good one: the gate keeps the
//! last valid limit.
//!
//! The range is what admission can enforce. The GCRA counts nanoseconds in a u64 (584
//! years) and adds a full burst's refill time to the clock, so a rate whose burst takes
//! centuries to refill cannot be represented; far short of that, a rate of one request a
//! year is already a block in all but name. So a rate above zero must refill its whole
//! burst within [`MAX_REFILL_S`] (one year): at burst 1 the smallest rate is about
//! 3.2e-8 per second. Anything below is refused, not rounded: `0` blocks everything.

use super::limit::{default_burst, Fill, Limit, LimitChange};
use serde::Deserialize;

/// The largest rate the gate accepts: one request per nanosecond, governor's resolution.
pub const MAX_RATE_PER_S: f64 = 1e9;

/// The longest a limited rate may take to refill its whole burst: one year.
pub const MAX_REFILL_S: f64 = 365.0 * 24.0 * 3600.0;

/// The smallest rate above zero the gate enforces with `burst` (at least 1).
pub fn min_rate_per_s(burst: u32) -> f64 {
    f64::from(burst.max(1)) / MAX_REFILL_S
}

/// A limit that cannot be put in force, naming the offending field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct InvalidLimit {
    pub field: String,
    pub message: String,
}

impl InvalidLimit {
    fn new(field: &str, message: impl Into<String>) -> Self {
        InvalidLimit {
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// Check the ranges serde cannot: a rate is finite, not negative and enforceable (see the
/// module doc); a rate above zero comes with a burst of at least 1 that it refills within
/// [`MAX_REFILL_S`]; a limit in shadow has something to decide.
pub fn check(limit: &Limit) -> Result<(), InvalidLimit> {
    if limit.shadow && !limit.decides() {
        return Err(InvalidLimit::new(
            "shadow",
            "needs a limit to watch: set rate_per_s or max_in_flight (to lift the limit, leave shadow out)",
        ));
    }
    let Some(rate) = limit.rate_per_s else {
        return Ok(());
    };
    if !rate.is_finite() || rate < 0.0 {
        return Err(InvalidLimit::new(
            "rate_per_s",
            format!("must be a number >= 0 or null, got {rate}"),
        ));
    }
    if rate > MAX_RATE_PER_S {
        return Err(InvalidLimit::new(
            "rate_per_s",
            format!("must be at most {MAX_RATE_PER_S}, got {rate}; use null for unlimited"),
        ));
    }
    if rate == 0.0 {
        return Ok(()); // blocks everything; the burst does not matter
    }
    if limit.burst == 0 {
        return Err(InvalidLimit::new(
            "burst",
            "must be at least 1 when rate_per_s is set",
        ));
    }
    if rate < min_rate_per_s(1) {
        return Err(InvalidLimit::new(
            "rate_per_s",
            format!(
                "{rate:e} is below the smallest rate the gate can enforce, {:.2e}/s (one request a year); use 0 to block everything",
                min_rate_per_s(1)
            ),
        ));
    }
    if f64::from(limit.burst) / rate > MAX_REFILL_S {
        return Err(InvalidLimit::new(
            "burst",
            format!(
                "{} takes longer than a year to refill at {rate} per second; at most {} with this rate",
                limit.burst,
                (rate * MAX_REFILL_S).floor()
            ),
        ));
    }
    Ok(())
}

/// A limit as written in JSON: `rate_per_s` must be present (`null` lifts the limit, so an
/// empty object is not read as "unlimited"), `burst` may be left out (half a second of the
/// rate, at least 1), `max_in_flight` and `note` default to none, `shadow` to false. `fill`
/// belongs to a change ([`parse_change`]), never to a stored limit.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Written {
    #[serde(deserialize_with = "present")]
    rate_per_s: Option<f64>,
    #[serde(default)]
    burst: Option<u32>,
    #[serde(default)]
    max_in_flight: Option<u32>,
    #[serde(default)]
    note: Option<String>,
    #[serde(default)]
    shadow: bool,
    #[serde(default, deserialize_with = "some_fill")]
    fill: Option<Fill>,
}

/// An optional fill that, when present, is one ([`Fill`]: a boolean or a whole number;
/// `null` is neither).
fn some_fill<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Fill>, D::Error> {
    Fill::deserialize(d).map(Some)
}

/// A required field that may be `null`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Option::<f64>::deserialize(d)
}

impl Written {
    fn limit(self) -> Limit {
        Limit {
            burst: self
                .burst
                .unwrap_or_else(|| self.rate_per_s.map_or(1, default_burst)),
            rate_per_s: self.rate_per_s,
            max_in_flight: self.max_in_flight,
            note: self.note,
            shadow: self.shadow,
        }
    }
}

/// Parse and check a limit from JSON ([`Written`]), naming the field on any error (unknown
/// fields, wrong types, a missing `rate_per_s`, out-of-range values). This is a stored
/// limit (state file, ConfigMap): `fill` is refused, since a stored one would open a
/// burst again at every restart or re-read.
pub fn parse_json(body: &[u8]) -> Result<Limit, InvalidLimit> {
    let written = parse_written(body)?;
    if written.fill.is_some() {
        return Err(InvalidLimit::new(
            "fill",
            "only a change through the admin API (PUT /admin/limit) may fill the bucket: it is a one-off at the change, and a stored limit would open a burst again at every restart or re-read",
        ));
    }
    let limit = written.limit();
    check(&limit)?;
    Ok(limit)
}

/// Parse and check a change through the admin API: a limit ([`parse_json`]) and an
/// optional `fill` (`true`, `false` or a whole number of tokens), which needs a rate above
/// 0 (a bucket to fill).
pub fn parse_change(body: &[u8]) -> Result<LimitChange, InvalidLimit> {
    let written = parse_written(body)?;
    let fill = written.fill.unwrap_or_default();
    let limit = written.limit();
    check(&limit)?;
    if !fill.is_carried() && !matches!(limit.rate_per_s, Some(r) if r > 0.0) {
        return Err(InvalidLimit::new(
            "fill",
            "fills the bucket of a rate above 0: with rate_per_s null or 0 there is no bucket (leave fill out)",
        ));
    }
    Ok(LimitChange { limit, fill })
}

fn parse_written(body: &[u8]) -> Result<Written, InvalidLimit> {
    // serde fills a struct from an array too, by position: `[1, 2, 3]` would read as rate
    // 1, burst 2, max_in_flight 3. A limit is only ever written as an object.
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') | None => {}
        Some(b'[') => {
            return Err(InvalidLimit::new(
                "body",
                "must be a JSON object with named fields (rate_per_s, burst, max_in_flight), not an array",
            ))
        }
        Some(_) => {}
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let msg = inner.to_string();
        // serde reports unknown and missing fields at the parent: lift the name out.
        let field = field_from_message(&msg).unwrap_or(match path.as_str() {
            "." | "?" | "" => "body".to_string(),
            _ => path,
        });
        InvalidLimit::new(&field, msg)
    })
}

/// serde_json says "unknown field `rat`, expected ..." and "missing field `burst`":
/// the field between the first pair of backticks is the one to name.
fn field_from_message(msg: &str) -> Option<String> {
    if !(msg.starts_with("unknown field") || msg.starts_with("missing field")) {
        return None;
    }
    let start = msg.find('`')? + 1;
    let len = msg[start..].find('`')?;
    Some(msg[start..start + len].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(body: &str) -> String {
        parse_json(body.as_bytes()).unwrap_err().field
    }

    #[test]
    fn names_the_field_that_is_wrong() {
        assert_eq!(field_of(r#"{"rate_per_s": -1, "burst": 1}"#), "rate_per_s");
        assert_eq!(field_of(r#"{"rate_per_s": 5, "burst": 0}"#), "burst");
        assert_eq!(
            field_of(r#"{"rate_per_s": 5, "burst": 1, "rat": 3}"#),
            "rat"
        );
        assert_eq!(field_of(r#"{"burst": 5}"#), "rate_per_s");
        assert_eq!(field_of("{}"), "rate_per_s");
        assert_eq!(
            field_of(r#"{"rate_per_s": "fast", "burst": 1}"#),
            "rate_per_s"
        );
        assert_eq!(
            field_of(r#"{"rate_per_s": 5, "burst": 1, "max_in_flight": -3}"#),
            "max_in_flight"
        );
        assert_eq!(field_of("not json"), "body");
        assert_eq!(field_of(r#"{"rate_per_s": 5, "shadow": "yes"}"#), "shadow");
        assert_eq!(
            field_of(r#"{"rate_per_s": null, "shadow": true}"#),
            "shadow"
        );
        assert!(
            parse_json(br#"{"rate_per_s": 5, "shadow": true}"#)
                .unwrap()
                .shadow
        );
        assert!(parse_json(br#"{"rate_per_s": null, "max_in_flight": 3, "shadow": true}"#).is_ok());
        let e = parse_json(b" [1, 2, 3]").unwrap_err();
        assert_eq!(e.field, "body");
        assert!(e.message.contains("not an array"), "{e}");
    }

    #[test]
    fn fill_is_a_boolean_or_a_whole_count_of_a_change_with_a_rate_and_never_of_a_stored_limit() {
        let fill = |body: &str| parse_change(body.as_bytes()).map(|c| c.fill);
        let c = parse_change(br#"{"rate_per_s": 90, "burst": 90, "fill": true}"#).unwrap();
        assert!(c.fill == Fill::Full && c.limit.burst == 90);
        assert_eq!(fill(r#"{"rate_per_s": 90}"#).unwrap(), Fill::Carried);
        assert_eq!(
            fill(r#"{"rate_per_s": 90, "fill": false}"#).unwrap(),
            Fill::Carried
        );
        assert_eq!(
            fill(r#"{"rate_per_s": 90, "fill": 1}"#).unwrap(),
            Fill::Tokens(1)
        );
        assert_eq!(
            fill(r#"{"rate_per_s": 90, "fill": 0}"#).unwrap(),
            Fill::Tokens(0)
        );
        // Above the burst is taken and bounded where it becomes a count.
        let c = parse_change(br#"{"rate_per_s": 90, "burst": 90, "fill": 500}"#).unwrap();
        assert_eq!(c.fill.tokens(c.limit.burst), Some(90));
        for bad in [
            r#"{"rate_per_s": 90, "fill": "yes"}"#,
            r#"{"rate_per_s": 90, "fill": "12"}"#,
            r#"{"rate_per_s": 90, "fill": -3}"#,
            r#"{"rate_per_s": 90, "fill": 2.5}"#,
            r#"{"rate_per_s": 90, "fill": 4294967296}"#,
            r#"{"rate_per_s": 90, "fill": null}"#,
            r#"{"rate_per_s": null, "fill": true}"#,
            r#"{"rate_per_s": 0, "fill": true}"#,
            r#"{"rate_per_s": 0, "fill": 5}"#,
        ] {
            let e = parse_change(bad.as_bytes()).unwrap_err();
            assert_eq!(e.field, "fill", "{bad}: {e}");
        }
        let e = parse_change(br#"{"rate_per_s": 90, "fil": true}"#).unwrap_err();
        assert_eq!(e.field, "fil", "{e}");
        for stored in [
            r#"{"rate_per_s": 90, "fill": true}"#,
            r#"{"rate_per_s": 90, "fill": 5}"#,
        ] {
            let e = parse_json(stored.as_bytes()).unwrap_err();
            assert_eq!(e.field, "fill", "{e}");
            assert!(e.message.contains("one-off"), "{e}");
        }
    }

    #[test]
    fn accepts_block_all_and_unlimited() {
        let l = parse_json(br#"{"rate_per_s": 0, "burst": 0, "max_in_flight": null}"#).unwrap();
        assert!(l.blocks_all());
        let l = parse_json(br#"{"rate_per_s": null, "burst": 1, "max_in_flight": null}"#).unwrap();
        assert_eq!(l, Limit::unlimited());
        let l =
            parse_json(br#"{"rate_per_s": 2.5, "burst": 3, "max_in_flight": 10, "note": "ramp"}"#)
                .unwrap();
        assert_eq!(l.note.as_deref(), Some("ramp"));
    }

    #[test]
    fn burst_may_be_left_out_and_null_lifts_the_limit() {
        assert_eq!(
            parse_json(br#"{"rate_per_s": null}"#).unwrap(),
            Limit::unlimited()
        );
        let l = parse_json(br#"{"rate_per_s": 40}"#).unwrap();
        assert_eq!((l.burst, l.max_in_flight), (default_burst(40.0), None));
        assert_eq!(parse_json(br#"{"rate_per_s": 0.5}"#).unwrap().burst, 1);
    }

    #[test]
    fn rates_admission_cannot_represent_are_refused_with_the_bound() {
        for tiny in ["1e-300", "5e-324", "1e-12", "1e-11", "3e-8"] {
            let e = parse_json(format!(r#"{{"rate_per_s": {tiny}}}"#).as_bytes()).unwrap_err();
            assert_eq!(e.field, "rate_per_s", "{tiny}: {e}");
            assert!(e.message.contains("3.17e-8"), "{tiny}: {e}");
            assert!(e.message.contains("use 0"), "{tiny}: {e}");
        }
        assert!(parse_json(br#"{"rate_per_s": 3.2e-8}"#).is_ok());
        let e = parse_json(br#"{"rate_per_s": 1, "burst": 4000000000}"#).unwrap_err();
        assert_eq!(e.field, "burst", "{e}");
        assert!(e.message.contains("31536000"), "{e}");
        assert!(parse_json(br#"{"rate_per_s": 1, "burst": 31536000}"#).is_ok());
        assert!(parse_json(br#"{"rate_per_s": 1e9, "burst": 4294967295}"#).is_ok());
        assert_eq!(field_of(r#"{"rate_per_s": 1e400}"#), "rate_per_s");
    }
}
