//! What `POST /admin/drain` is asked to keep, read from its query: `?keep=none` or
//! `?keep=answerable` (no `keep`: none, the drain that drops everything). Anything else is
//! refused naming `keep` and the values it takes, and nothing is dropped: a drain is not
//! undone, so one whose caller meant something this service does not know must not run.

use crate::platform::admin::DrainKeep;
use serde::Serialize;

/// The query's pairs, decoded, in their order.
pub type DrainQuery = Vec<(String, String)>;

/// The body of the `400` a drain this service does not understand gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refused {
    pub error: String,
    pub field: &'static str,
    pub accepted: [&'static str; 2],
}

const ACCEPTED: [DrainKeep; 2] = [DrainKeep::None, DrainKeep::Answerable];

/// What the drain keeps, from its query's pairs (or why the query could not be read).
pub fn keep(query: Result<&[(String, String)], String>) -> Result<DrainKeep, Refused> {
    let refuse = |why: String| Refused {
        error: format!("keep: {why}; expected ?keep=none or ?keep=answerable (no keep: none)"),
        field: "keep",
        accepted: ACCEPTED.map(DrainKeep::as_str),
    };
    let pairs = query.map_err(|e| refuse(format!("unreadable query ({e})")))?;
    let mut asked = None;
    for (key, value) in pairs.iter().filter(|(k, _)| k == "keep") {
        let Some(keep) = ACCEPTED.into_iter().find(|k| k.as_str() == value) else {
            return Err(refuse(format!("{value:?} is not a value it takes")));
        };
        if asked.is_some_and(|a| a != keep) {
            return Err(refuse(format!("{key} given twice, differently")));
        }
        asked = Some(keep);
    }
    Ok(asked.unwrap_or(DrainKeep::None))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(q: &[(&str, &str)]) -> DrainQuery {
        q.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn keep_is_none_answerable_or_refused() {
        let read = |q: &[(&str, &str)]| keep(Ok(&pairs(q)));
        assert_eq!(read(&[]), Ok(DrainKeep::None));
        assert_eq!(read(&[("keep", "none")]), Ok(DrainKeep::None));
        assert_eq!(read(&[("keep", "answerable")]), Ok(DrainKeep::Answerable));
        // Other keys are not this endpoint's business.
        assert_eq!(
            read(&[("trace", "1"), ("keep", "answerable")]),
            Ok(DrainKeep::Answerable)
        );
        for bad in [
            &[("keep", "bogus")][..],
            &[("keep", "")],
            &[("keep", "Answerable")],
            &[("keep", "none"), ("keep", "answerable")],
        ] {
            let e = read(bad).unwrap_err();
            assert_eq!(e.field, "keep");
            assert_eq!(e.accepted, ["none", "answerable"]);
            assert!(e.error.starts_with("keep: "), "{}", e.error);
        }
        let e = keep(Err("invalid percent-encoding".into())).unwrap_err();
        assert!(e.error.contains("invalid percent-encoding"), "{}", e.error);
    }
}
