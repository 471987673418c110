//! The one place a new limit is put in force, whoever sent it (admin API, ConfigMap, any
//! [`super::limit_source::LimitSource`]): check it, persist it, hand this replica's share
//! of it to admission, show it in `/metrics`. Changes are serialised so the state file,
//! the enforced share and the reported version and peer count always agree.
//!
//! The limit a source sends is the total for every gate replica behind the same Service;
//! a [`super::limit_source::PeerSource`] says how many replicas share it, and a change of
//! peers changes the share at once without a new version.

use super::admission::Admission;
use super::limit::Limit;
use super::limit_source::VersionedLimit;
use super::share::{share, Peers};
use super::state;
use super::telemetry::GateMetrics;
use super::validate::{self, InvalidLimit};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// A limit in force and its version: the admin API's answer to GET and PUT.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedLimit {
    /// The total for all gate replicas sharing it.
    pub limit: Limit,
    /// Admin API changes: a sequence number counting up from 0 (the limit at start)
    /// within one gate process. Other sources: their own version (a resourceVersion).
    pub version: String,
    /// How many gate replicas share `limit` (this one included).
    #[serde(default = "one")]
    pub peers: usize,
    /// What this replica enforces: its share of `limit`.
    #[serde(default)]
    pub share: Option<Limit>,
}

fn one() -> usize {
    1
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("{0}")]
    Invalid(#[from] InvalidLimit),
    #[error("could not write the state file {path}: {source}; the limit was not changed")]
    Persist {
        path: PathBuf,
        source: std::io::Error,
    },
}

struct Current {
    applied: AppliedLimit,
    peers: Peers,
    seq: u64,
}

pub struct LimitControl {
    admission: Arc<Admission>,
    metrics: Arc<GateMetrics>,
    state_file: Option<PathBuf>,
    current: Mutex<Current>,
}

impl LimitControl {
    /// Take over `initial` (already enforced by `admission`) as version "0".
    pub fn new(
        initial: Limit,
        admission: Arc<Admission>,
        metrics: Arc<GateMetrics>,
        state_file: Option<PathBuf>,
    ) -> Self {
        let applied = AppliedLimit {
            share: Some(initial.clone()),
            limit: initial,
            version: "0".to_string(),
            peers: 1,
        };
        metrics.limit_applied(&applied.limit, &applied.version, Peers::ALONE);
        LimitControl {
            admission,
            metrics,
            state_file,
            current: Mutex::new(Current {
                applied,
                peers: Peers::ALONE,
                seq: 0,
            }),
        }
    }

    pub fn current(&self) -> AppliedLimit {
        self.lock().applied.clone()
    }

    /// An admin API change: its version is the next sequence number.
    pub fn apply(&self, limit: Limit) -> Result<AppliedLimit, ApplyError> {
        self.apply_with(limit, None)
    }

    /// A change from an extra source, carrying that source's version.
    pub fn apply_versioned(&self, update: VersionedLimit) -> Result<AppliedLimit, ApplyError> {
        self.apply_with(update.limit, Some(update.version))
    }

    fn apply_with(
        &self,
        limit: Limit,
        version: Option<String>,
    ) -> Result<AppliedLimit, ApplyError> {
        validate::check(&limit)?;
        let mut cur = self.lock();
        if let Some(path) = &self.state_file {
            state::save(path, &limit).map_err(|source| ApplyError::Persist {
                path: path.clone(),
                source,
            })?;
        }
        cur.seq += 1;
        let version = version.unwrap_or_else(|| cur.seq.to_string());
        let peers = cur.peers;
        cur.applied = self.enforce(limit, version, peers);
        Ok(cur.applied.clone())
    }

    /// The gate replicas sharing the limit changed: enforce the new share of the same
    /// total, same version. Returns the limit now in force.
    pub fn set_peers(&self, peers: Peers) -> AppliedLimit {
        let mut cur = self.lock();
        if cur.peers != peers {
            cur.peers = peers;
            let AppliedLimit { limit, version, .. } = cur.applied.clone();
            cur.applied = self.enforce(limit, version, peers);
        }
        cur.applied.clone()
    }

    /// Put this replica's share of `total` in force and show it.
    fn enforce(&self, total: Limit, version: String, peers: Peers) -> AppliedLimit {
        let mine = share(&total, peers);
        self.admission.apply(&mine);
        self.metrics.limit_applied(&mine, &version, peers);
        AppliedLimit {
            limit: total,
            version,
            peers: peers.count,
            share: Some(mine),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Current> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }
}
