//! The state file: the last limit put in force, its version and the peers it was shared
//! with, so a gate restarted in the middle of a recovery (its container restarted, the
//! API server unreachable) comes back enforcing the share it last enforced, not wide open
//! and not the whole total.
//!
//! Rule at start: a readable state file wins over the limit flags (and the gate logs that
//! it does); no state file means the flags; an unreadable or invalid state file stops the
//! gate with exit 2, because guessing a limit is worse than not starting. A file holding
//! a bare limit (as older gates wrote it) still reads, without peers.

use super::limit::Limit;
use super::share::Peers;
use super::validate;
use crate::util::atomic_file::write_atomic;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Where the limit in force at start came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Flags,
    StateFile,
}

/// What the state file keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// The total for all replicas sharing it.
    pub limit: Limit,
    /// The version it had (a ConfigMap's resourceVersion); `None` in an old file.
    pub version: Option<String>,
    /// How it was shared when last enforced; `None` in an old file.
    pub peers: Option<Peers>,
}

#[derive(Serialize, Deserialize)]
struct StoredPeers {
    count: usize,
    rank: usize,
}

#[derive(Serialize, Deserialize)]
struct File {
    limit: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    peers: Option<StoredPeers>,
}

/// What is stored at `path`, `Ok(None)` when there is no file yet.
pub fn load(path: &Path) -> Result<Option<Stored>, String> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let wrapped = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .filter(|v| v.get("limit").is_some_and(|l| l.is_object()));
    let Some(v) = wrapped else {
        return validate::parse_json(&bytes)
            .map(|limit| {
                Some(Stored {
                    limit,
                    version: None,
                    peers: None,
                })
            })
            .map_err(|e| format!("field {e}"));
    };
    let file: File = serde_json::from_value(v).map_err(|e| e.to_string())?;
    let limit_bytes = serde_json::to_vec(&file.limit).map_err(|e| e.to_string())?;
    let limit = validate::parse_json(&limit_bytes).map_err(|e| format!("field limit.{e}"))?;
    Ok(Some(Stored {
        limit,
        version: file.version,
        peers: file.peers.map(|p| Peers::new(p.count, p.rank)),
    }))
}

/// Replace what is stored atomically (write, fsync, rename).
pub fn save(path: &Path, stored: &Stored) -> std::io::Result<()> {
    let file = File {
        limit: serde_json::to_value(&stored.limit).map_err(std::io::Error::other)?,
        version: stored.version.clone(),
        peers: stored.peers.map(|p| StoredPeers {
            count: p.count,
            rank: p.rank,
        }),
    };
    let mut json = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
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
    fn round_trips_with_its_peers_and_wins_over_flags() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("gate.json");
        assert_eq!(load(&p).unwrap(), None);
        let limit = Limit {
            rate_per_s: Some(12.5),
            burst: 3,
            max_in_flight: Some(40),
            note: Some("step 2".into()),
        };
        let stored = Stored {
            limit: limit.clone(),
            version: Some("812".into()),
            peers: Some(Peers::new(3, 1)),
        };
        save(&p, &stored).unwrap();
        let back = load(&p).unwrap();
        assert_eq!(back.as_ref(), Some(&stored));
        assert_eq!(
            resolve(Limit::unlimited(), back.map(|s| s.limit)),
            (limit.clone(), Origin::StateFile)
        );
        // A bare limit, as older gates wrote it.
        std::fs::write(&p, serde_json::to_vec(&limit).unwrap()).unwrap();
        assert_eq!(
            load(&p).unwrap().map(|s| (s.limit, s.peers)),
            Some((limit, None))
        );
        std::fs::write(&p, r#"{"rate_per_s": -2, "burst": 1}"#).unwrap();
        assert!(load(&p).unwrap_err().contains("rate_per_s"));
        std::fs::write(&p, r#"{"limit": {"rate_per_s": -2, "burst": 1}}"#).unwrap();
        assert!(load(&p).unwrap_err().contains("limit.rate_per_s"));
    }
}
