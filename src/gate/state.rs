//! The state file: the last limit put in force, so a gate restarted in the middle of a
//! recovery comes back with the limit the runbook set, not wide open.
//!
//! Rule at start: a readable state file wins over the limit flags (and the gate logs that
//! it does); no state file means the flags; an unreadable or invalid state file stops the
//! gate with exit 2, because guessing a limit is worse than not starting.

use super::limit::Limit;
use super::validate;
use crate::util::atomic_file::write_atomic;
use std::path::Path;

/// Where the limit in force at start came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Flags,
    StateFile,
}

/// The limit stored at `path`, `Ok(None)` when there is no file yet.
pub fn load(path: &Path) -> Result<Option<Limit>, String> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    validate::parse_json(&bytes)
        .map(Some)
        .map_err(|e| format!("field {e}"))
}

/// Replace the stored limit atomically (write, fsync, rename).
pub fn save(path: &Path, limit: &Limit) -> std::io::Result<()> {
    let mut json = serde_json::to_vec_pretty(limit).map_err(std::io::Error::other)?;
    json.push(b'\n');
    write_atomic(path, &json)
}

/// Pure: the limit to start with.
pub fn resolve(flags: Limit, stored: Option<Limit>) -> (Limit, Origin) {
    match stored {
        Some(l) => (l, Origin::StateFile),
        None => (flags, Origin::Flags),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_wins_over_flags() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("gate.json");
        assert_eq!(load(&p).unwrap(), None);
        let stored = Limit {
            rate_per_s: Some(12.5),
            burst: 3,
            max_in_flight: Some(40),
            note: Some("step 2".into()),
        };
        save(&p, &stored).unwrap();
        let back = load(&p).unwrap();
        assert_eq!(back.as_ref(), Some(&stored));
        assert_eq!(
            resolve(Limit::unlimited(), back),
            (stored, Origin::StateFile)
        );
        std::fs::write(&p, r#"{"rate_per_s": -2, "burst": 1}"#).unwrap();
        assert!(load(&p).unwrap_err().contains("rate_per_s"));
    }
}
