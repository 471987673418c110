//! Checks a [`Limit`] before the gate puts it in force. Whoever sends a limit (an operator
//! with curl at 3 am, a ConfigMap, a runbook) must learn which field is wrong, and a bad
//! limit must never replace a good one: the gate keeps the last valid limit.

use super::limit::Limit;

/// The largest rate the gate accepts: one request per nanosecond, governor's resolution.
pub const MAX_RATE_PER_S: f64 = 1e9;

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

/// Check the ranges serde cannot: a rate is finite and not negative, a rate above zero
/// comes with a burst of at least 1.
pub fn check(limit: &Limit) -> Result<(), InvalidLimit> {
    if let Some(rate) = limit.rate_per_s {
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
        if rate > 0.0 && limit.burst == 0 {
            return Err(InvalidLimit::new(
                "burst",
                "must be at least 1 when rate_per_s is set",
            ));
        }
    }
    Ok(())
}

/// Parse and check a limit from JSON, naming the field on any error (unknown fields,
/// wrong types, missing fields, out-of-range values).
pub fn parse_json(body: &[u8]) -> Result<Limit, InvalidLimit> {
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
    let limit: Limit = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let msg = inner.to_string();
        // serde reports unknown and missing fields at the parent: lift the name out.
        let field = field_from_message(&msg).unwrap_or(match path.as_str() {
            "." | "?" | "" => "body".to_string(),
            _ => path,
        });
        InvalidLimit::new(&field, msg)
    })?;
    check(&limit)?;
    Ok(limit)
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
        assert_eq!(field_of(r#"{"rate_per_s": 5}"#), "burst");
        assert_eq!(
            field_of(r#"{"rate_per_s": "fast", "burst": 1}"#),
            "rate_per_s"
        );
        assert_eq!(
            field_of(r#"{"rate_per_s": 5, "burst": 1, "max_in_flight": -3}"#),
            "max_in_flight"
        );
        assert_eq!(field_of("not json"), "body");
        let e = parse_json(b" [1, 2, 3]").unwrap_err();
        assert_eq!(e.field, "body");
        assert!(e.message.contains("not an array"), "{e}");
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
}
