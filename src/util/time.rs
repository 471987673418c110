//! Timestamps as every output writes them: RFC 3339 UTC. The journal, the lock files and
//! the reports use [`now_rfc3339`]; structs holding a `SystemTime` serialise it through
//! [`rfc3339`] instead of serde's `{"secs_since_epoch": ...}`, which no person and few
//! tools read as a time.

/// Now, as RFC 3339 UTC with milliseconds.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// `#[serde(with = "crate::util::time::rfc3339")]` for a `SystemTime`: written as RFC 3339
/// (whole seconds, or nanoseconds when there are any, so it reads back exactly); read
/// from RFC 3339 or from the `{"secs_since_epoch", "nanos_since_epoch"}` form that state
/// files of older versions hold.
pub mod rfc3339 {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::{Duration, SystemTime};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stamp {
        Text(String),
        Legacy {
            secs_since_epoch: u64,
            nanos_since_epoch: u32,
        },
    }

    impl Stamp {
        fn time<E: serde::de::Error>(self) -> Result<SystemTime, E> {
            match self {
                Stamp::Text(s) => humantime::parse_rfc3339_weak(&s)
                    .map_err(|e| E::custom(format!("{s:?} is not an RFC 3339 time: {e}"))),
                Stamp::Legacy {
                    secs_since_epoch,
                    nanos_since_epoch,
                } => {
                    Ok(SystemTime::UNIX_EPOCH + Duration::new(secs_since_epoch, nanos_since_epoch))
                }
            }
        }
    }

    /// The text a time is written as.
    pub fn text(t: SystemTime) -> String {
        humantime::format_rfc3339(t).to_string()
    }

    pub fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&text(*t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        Stamp::deserialize(d)?.time()
    }

    /// The same for `Option<SystemTime>` (None is `null`).
    pub mod option {
        use super::*;

        pub fn serialize<S: Serializer>(t: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
            match t {
                Some(t) => s.serialize_some(&text(*t)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<SystemTime>, D::Error> {
            Option::<Stamp>::deserialize(d)?
                .map(Stamp::time)
                .transpose()
        }
    }

    /// The same for `Vec<SystemTime>`.
    pub mod vec {
        use super::*;
        use serde::ser::SerializeSeq;

        pub fn serialize<S: Serializer>(ts: &[SystemTime], s: S) -> Result<S::Ok, S::Error> {
            let mut seq = s.serialize_seq(Some(ts.len()))?;
            for t in ts {
                seq.serialize_element(&text(*t))?;
            }
            seq.end()
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<SystemTime>, D::Error> {
            Vec::<Stamp>::deserialize(d)?
                .into_iter()
                .map(Stamp::time)
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};
    use std::time::{Duration, SystemTime};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Times {
        #[serde(with = "super::rfc3339")]
        at: SystemTime,
        #[serde(with = "super::rfc3339::option")]
        maybe: Option<SystemTime>,
        #[serde(with = "super::rfc3339::vec")]
        many: Vec<SystemTime>,
    }

    #[test]
    fn times_are_written_as_rfc3339_and_read_back_exactly() {
        let t = SystemTime::UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
        let v = Times {
            at: t,
            maybe: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
            many: vec![t],
        };
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(json["at"], "2023-11-14T22:13:20.123456789Z");
        assert_eq!(json["maybe"], "2023-11-14T22:13:20Z");
        assert_eq!(json["many"][0], "2023-11-14T22:13:20.123456789Z");
        assert_eq!(serde_json::from_value::<Times>(json).unwrap(), v);
    }

    #[test]
    fn the_old_secs_since_epoch_form_still_reads() {
        let old = serde_json::json!({
            "at": {"secs_since_epoch": 1_700_000_000u64, "nanos_since_epoch": 5},
            "maybe": null,
            "many": [{"secs_since_epoch": 1u64, "nanos_since_epoch": 0}],
        });
        let v: Times = serde_json::from_value(old).unwrap();
        assert_eq!(
            v.at,
            SystemTime::UNIX_EPOCH + Duration::new(1_700_000_000, 5)
        );
        assert_eq!(v.maybe, None);
        assert_eq!(v.many, [SystemTime::UNIX_EPOCH + Duration::from_secs(1)]);
    }
}
