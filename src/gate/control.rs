//! The one place a new limit is put in force, whoever sent it (admin API, ConfigMap, any
//! [`super::limit_source::LimitSource`]): check it, persist it, hand it to admission,
//! show it in `/metrics`. Changes are serialised so the state file, the enforced limit
//! and the reported version always agree.

use super::admission::Admission;
use super::limit::Limit;
use super::limit_source::VersionedLimit;
use super::state;
use super::telemetry::GateMetrics;
use super::validate::{self, InvalidLimit};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// A limit in force and its version: the admin API's answer to GET and PUT.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedLimit {
    pub limit: Limit,
    /// Admin API changes: a sequence number counting up from 0 (the limit at start)
    /// within one gate process. Other sources: their own version (a resourceVersion).
    pub version: String,
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
            limit: initial,
            version: "0".to_string(),
        };
        metrics.limit_applied(&applied.limit, &applied.version);
        LimitControl {
            admission,
            metrics,
            state_file,
            current: Mutex::new(Current { applied, seq: 0 }),
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
        self.admission.apply(&limit);
        cur.seq += 1;
        let version = version.unwrap_or_else(|| cur.seq.to_string());
        self.metrics.limit_applied(&limit, &version);
        cur.applied = AppliedLimit { limit, version };
        Ok(cur.applied.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Current> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }
}
