//! The state file: the last limit put in force, its version and the peers it was shared
//! with, so a gate restarted in the middle of a recovery (its container restarted, the
//! API server unreachable) comes back enforcing the share it last enforced, not wide open
//! and not the whole total.
//!
//! Rule at start: a readable state file wins over the limit flags (and the gate logs that
//! it does); no state file means the flags. A file holding a bare limit (as older gates
//! wrote it) still reads, without peers. A state file that cannot be applied (unreadable,
//! not a limit, out of range) is reported as an error, moved aside (renamed with a
//! `.rejected-<unix time>` suffix, kept for a human to read) and counted, and the gate
//! starts at the limit of its flags, as if there were no file. Exiting instead would be a
//! crash loop: the file would still be there at every restart, and the edge down until
//! someone deleted it. The flags and not "block everything": a file that cannot be read
//! says nothing about what is safe, and blocking would turn a bad file into an outage; a
//! limit set through the admin API or the ConfigMap puts the intended limit back.

use super::limit::Limit;
use super::share::Peers;
use super::validate;
use crate::util::atomic_file::write_replace;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where the limit in force at start came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Flags,
    StateFile,
    /// The state file could not be applied: the flags, as if there were no file.
    FlagsAfterRejectedFile,
}

/// A state file that could not be applied at start, and where it went.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub path: PathBuf,
    pub reason: String,
    /// Where the file was moved, or why it could not be.
    pub moved_to: Result<PathBuf, String>,
}

impl Rejected {
    /// The note the starting limit carries, shown by `GET /admin/limit`.
    pub fn note(&self) -> String {
        let moved = match &self.moved_to {
            Ok(to) => format!("moved to {}", to.display()),
            Err(e) => format!("could not be moved aside: {e}"),
        };
        format!(
            "the state file {} could not be applied ({}) and was {moved}; the gate started at the limit of its flags: set the intended limit again",
            self.path.display(),
            self.reason
        )
    }
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

/// Move the state file at `path` aside after it could not be applied for `reason`, so the
/// next start does not trip on it again; the copy keeps its content for a human.
pub fn reject(path: &Path, reason: String) -> Rejected {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let base = format!("{}.rejected-{secs}", path.display());
    let to = (0..100)
        .map(|n| match n {
            0 => PathBuf::from(&base),
            n => PathBuf::from(format!("{base}-{n}")),
        })
        .find(|p| !p.exists())
        .unwrap_or_else(|| PathBuf::from(&base));
    let moved_to = std::fs::rename(path, &to)
        .map(|()| to)
        .map_err(|e| e.to_string());
    Rejected {
        path: path.to_path_buf(),
        reason,
        moved_to,
    }
}

/// Replace what is stored atomically for every process (write, rename), without waiting
/// for the disk: [`super::durable`] syncs it.
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
    write_replace(path, &json)
}

/// Pure: the limit to start with, from the flags and what the state file held.
pub fn resolve(flags: Limit, stored: &Result<Option<Stored>, Rejected>) -> (Limit, Origin) {
    match stored {
        Ok(Some(s)) => (s.limit.clone(), Origin::StateFile),
        Ok(None) => (flags, Origin::Flags),
        Err(rejected) => (
            Limit {
                note: Some(rejected.note()),
                ..flags
            },
            Origin::FlagsAfterRejectedFile,
        ),
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
            shadow: false,
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
            resolve(Limit::unlimited(), &Ok(back)),
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

    #[test]
    fn a_file_that_cannot_be_applied_is_set_aside_and_the_flags_start() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("gate.json");
        std::fs::write(&p, r#"{"rate_per_s": 1e-300, "burst": 1}"#).unwrap();
        let reason = load(&p).unwrap_err();
        assert!(reason.contains("rate_per_s"), "{reason}");
        let rejected = reject(&p, reason);
        let moved = rejected.moved_to.clone().unwrap();
        assert!(!p.exists(), "the next start must not trip on it again");
        assert!(std::fs::read_to_string(&moved).unwrap().contains("1e-300"));
        assert!(moved.display().to_string().contains("gate.json.rejected-"));
        let flags = Limit {
            rate_per_s: Some(50.0),
            burst: 25,
            max_in_flight: None,
            note: None,
            shadow: false,
        };
        let (limit, origin) = resolve(flags.clone(), &Err(rejected.clone()));
        assert_eq!(origin, Origin::FlagsAfterRejectedFile);
        assert_eq!(
            (limit.rate_per_s, limit.burst),
            (flags.rate_per_s, flags.burst)
        );
        let note = limit.note.unwrap();
        assert!(
            note.contains("could not be applied") && note.contains(".rejected-"),
            "{note}"
        );
        // A second bad file in the same second does not overwrite the first copy.
        std::fs::write(&p, "[1]").unwrap();
        let again = reject(&p, "body".into()).moved_to.unwrap();
        assert_ne!(again, moved);
        assert!(moved.exists() && again.exists());
    }
}
