//! Durations as people write them ("2s", "150ms", "1m30s"), for flags and YAML alike.

use std::time::Duration;

/// Parse a human duration for a clap flag. Bare numbers are refused: "2" could mean
/// seconds or milliseconds, and guessing wrong at 3 am is expensive.
pub fn parse(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim()).map_err(|e| {
        format!("invalid duration {s:?} ({e}); write it with a unit, like 2s or 150ms")
    })
}

/// Format a duration the way [`parse`] reads it.
pub fn format(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// serde adapter: `#[serde(with = "crate::util::duration::serde_human")]`.
pub mod serde_human {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        super::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// serde adapter for `Option<Duration>`.
pub mod serde_human_opt {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_str(&super::format(*d)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let s = Option::<String>::deserialize(d)?;
        s.map(|s| super::parse(&s).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_refuses_bare_numbers() {
        assert_eq!(parse("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse("150ms").unwrap(), Duration::from_millis(150));
        assert!(parse("2").unwrap_err().contains("with a unit"));
    }
}
