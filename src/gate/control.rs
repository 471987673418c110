//! The one place a new limit is put in force, whoever sent it (admin API, ConfigMap, any
//! [`super::limit_source::LimitSource`]): check it, persist it, hand this replica's share
//! of it to admission, show it in `/metrics`. Changes are serialised so the state file,
//! the enforced share and the reported version and peer count always agree.
//!
//! The limit a source sends is the total for every gate replica behind the same Service;
//! a [`super::limit_source::PeerSource`] says how many replicas share it, and a change of
//! peers changes the share at once without a new version.
//!
//! Fail static, never open: a gate that follows a limit source and has no limit from it
//! (nor from its state file) refuses everything ([`LimitControl::await_source`]) until the
//! source answers, and is not ready; the state file keeps the limit, its version and the
//! peers it was shared with, so a restarted gate enforces the share it last enforced. How
//! long ago the source last confirmed the limit and the peer count is kept for `/metrics`.
//!
//! A change is written to the state file before it is put in force (a write that fails
//! leaves the limit as it was) and synced to disk after, off the request's path
//! ([`super::durable`]).

use super::admission::Admission;
use super::durable::Flusher;
use super::limit::{Fill, Limit, LimitChange};
use super::limit_source::VersionedLimit;
use super::share::{share, share_fill, Peers};
use super::state::{self, Stored};
use super::telemetry::GateMetrics;
use super::validate::{self, InvalidLimit};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    /// In the answer to a change that asked for a fill: the bucket started as asked.
    /// Never in a GET: it is a one-off at the change.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub filled: bool,
    /// With `filled`: the tokens this replica's bucket started with (the fill's part at
    /// this replica, at most the share's burst).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u32>,
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
    /// When a source (or the admin API, or the flags) last gave or confirmed the limit;
    /// `None` while no limit is known.
    limit_at: Option<Instant>,
    /// When the peer source last reported; `None` before its first report.
    peers_at: Option<Instant>,
}

/// The version shown while no limit is known.
pub const UNKNOWN_VERSION: &str = "unknown";

/// What a gate with no known limit enforces: it refuses every request with the usual
/// refusal (429 and Retry-After), never admits everything.
pub fn refuse_all() -> Limit {
    Limit {
        rate_per_s: Some(0.0),
        burst: 1,
        max_in_flight: Some(0),
        note: Some("no limit known yet: waiting for the limit source; refusing all".into()),
        shadow: false,
    }
}

pub struct LimitControl {
    admission: Arc<Admission>,
    metrics: Arc<GateMetrics>,
    state_file: Option<StateFile>,
    current: Mutex<Current>,
}

/// Where the limit is kept, and what syncs it to disk.
struct StateFile {
    path: PathBuf,
    flusher: Flusher,
}

impl StateFile {
    fn save(&self, stored: &Stored) -> Result<(), ApplyError> {
        state::save(&self.path, stored).map_err(|source| ApplyError::Persist {
            path: self.path.clone(),
            source,
        })?;
        self.flusher.request();
        Ok(())
    }
}

impl LimitControl {
    /// Take over `initial` (already enforced by `admission`) as version "0".
    pub fn new(
        initial: Limit,
        admission: Arc<Admission>,
        metrics: Arc<GateMetrics>,
        state_file: Option<PathBuf>,
    ) -> Self {
        let flusher = state_file.clone().map(Flusher::start);
        Self::with_flusher(initial, admission, metrics, state_file.zip(flusher))
    }

    /// [`LimitControl::new`] with the state file synced to disk by `flusher`.
    pub fn with_flusher(
        initial: Limit,
        admission: Arc<Admission>,
        metrics: Arc<GateMetrics>,
        state_file: Option<(PathBuf, Flusher)>,
    ) -> Self {
        let applied = AppliedLimit {
            share: Some(initial.clone()),
            limit: initial,
            version: "0".to_string(),
            peers: 1,
            filled: false,
            tokens: None,
        };
        metrics.limit_applied(&applied.limit, &applied.version, Peers::ALONE);
        LimitControl {
            admission,
            metrics,
            state_file: state_file.map(|(path, flusher)| StateFile { path, flusher }),
            current: Mutex::new(Current {
                applied,
                peers: Peers::ALONE,
                seq: 0,
                limit_at: Some(Instant::now()),
                peers_at: None,
            }),
        }
    }

    /// The state file's limit, with the version and the share it had: enforced as it was
    /// until the sources say otherwise.
    pub fn restore(&self, stored: &Stored) {
        let mut cur = self.lock();
        let peers = stored.peers.unwrap_or(cur.peers);
        cur.peers = peers;
        let version = stored
            .version
            .clone()
            .unwrap_or_else(|| cur.applied.version.clone());
        cur.applied = self.enforce(stored.limit.clone(), version, peers);
    }

    /// No limit is known until a source gives one: refuse everything meanwhile.
    pub fn await_source(&self) {
        let mut cur = self.lock();
        let peers = cur.peers;
        cur.applied = self.enforce(refuse_all(), UNKNOWN_VERSION.to_string(), peers);
        cur.limit_at = None;
    }

    /// Ready to take traffic: a limit is known and, when `needs_peers`, so is the number
    /// of replicas sharing it; otherwise why not.
    pub fn readiness(&self, needs_peers: bool) -> Result<(), &'static str> {
        let cur = self.lock();
        if cur.limit_at.is_none() {
            return Err("no limit known yet (the limit source has not answered and there is no state file); refusing all traffic");
        }
        if needs_peers && cur.peers_at.is_none() {
            return Err("waiting for the number of gate replicas sharing the limit");
        }
        Ok(())
    }

    /// How long ago the limit and the peer count were last given or confirmed (`None`:
    /// never).
    pub fn ages(&self) -> (Option<Duration>, Option<Duration>) {
        let cur = self.lock();
        (
            cur.limit_at.map(|t| t.elapsed()),
            cur.peers_at.map(|t| t.elapsed()),
        )
    }

    /// A source says the limit at `version` still stands.
    pub fn confirm(&self, version: &str) {
        let mut cur = self.lock();
        if cur.limit_at.is_some() && cur.applied.version == version {
            cur.limit_at = Some(Instant::now());
        }
    }

    /// A source holds no limit (`fallback` is what that means, e.g. unlimited): put it in
    /// force only if no limit is known, else confirm the one in force.
    pub fn fallback(&self, update: VersionedLimit) -> Result<Option<AppliedLimit>, ApplyError> {
        if self.lock().limit_at.is_some() {
            let mut cur = self.lock();
            cur.limit_at = Some(Instant::now());
            return Ok(None);
        }
        self.apply_versioned(update).map(Some)
    }

    fn save(&self, cur: &Current) -> Result<(), ApplyError> {
        if let (Some(file), Some(_)) = (&self.state_file, cur.limit_at) {
            file.save(&Stored {
                limit: cur.applied.limit.clone(),
                version: Some(cur.applied.version.clone()),
                peers: Some(cur.peers),
            })?;
        }
        Ok(())
    }

    pub fn current(&self) -> AppliedLimit {
        self.lock().applied.clone()
    }

    /// An admin API change: its version is the next sequence number. With a `fill` the
    /// bucket starts with its tokens (never above the new burst); the state file keeps
    /// only the limit.
    pub fn apply(&self, change: LimitChange) -> Result<AppliedLimit, ApplyError> {
        self.apply_with(change, None)
    }

    /// A change from an extra source, carrying that source's version.
    pub fn apply_versioned(&self, update: VersionedLimit) -> Result<AppliedLimit, ApplyError> {
        self.apply_with(LimitChange::carried(update.limit), Some(update.version))
    }

    fn apply_with(
        &self,
        LimitChange { limit, fill }: LimitChange,
        version: Option<String>,
    ) -> Result<AppliedLimit, ApplyError> {
        validate::check(&limit)?;
        let mut cur = self.lock();
        let version = version.unwrap_or_else(|| (cur.seq + 1).to_string());
        let peers = cur.peers;
        if let Some(file) = &self.state_file {
            file.save(&Stored {
                limit: limit.clone(),
                version: Some(version.clone()),
                peers: Some(peers),
            })?;
        }
        cur.seq += 1;
        let (applied, tokens) = self.enforce_opening(limit, version, peers, fill);
        cur.applied = applied;
        cur.limit_at = Some(Instant::now());
        Ok(AppliedLimit {
            filled: tokens.is_some(),
            tokens,
            ..cur.applied.clone()
        })
    }

    /// The gate replicas sharing the limit changed: enforce the new share of the same
    /// total, same version. Returns the limit now in force.
    pub fn set_peers(&self, peers: Peers) -> AppliedLimit {
        let mut cur = self.lock();
        cur.peers_at = Some(Instant::now());
        if cur.peers != peers {
            cur.peers = peers;
            let AppliedLimit { limit, version, .. } = cur.applied.clone();
            cur.applied = self.enforce(limit, version, peers);
            if let Err(e) = self.save(&cur) {
                tracing::error!("{e}; the new share is in force, the state file keeps the old one");
            }
        }
        cur.applied.clone()
    }

    /// Put this replica's share of `total` in force and show it.
    fn enforce(&self, total: Limit, version: String, peers: Peers) -> AppliedLimit {
        self.enforce_opening(total, version, peers, Fill::Carried).0
    }

    /// [`Self::enforce`], the bucket starting with this replica's part of `fill` (the
    /// tokens, None when carried).
    fn enforce_opening(
        &self,
        total: Limit,
        version: String,
        peers: Peers,
        fill: Fill,
    ) -> (AppliedLimit, Option<u32>) {
        let mine = share(&total, peers);
        let tokens = share_fill(fill, peers).tokens(mine.burst);
        match tokens {
            Some(n) => self.admission.apply_filled(&mine, n),
            None => self.admission.apply(&mine),
        }
        self.metrics.limit_applied(&mine, &version, peers);
        let applied = AppliedLimit {
            limit: total,
            version,
            peers: peers.count,
            share: Some(mine),
            filled: false,
            tokens: None,
        };
        (applied, tokens)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Current> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::admission::Admit;
    use std::sync::mpsc;

    fn admitted(a: &Admission, tries: usize) -> usize {
        (0..tries)
            .filter(|_| matches!(a.try_admit(), Admit::Admitted(_)))
            .count()
    }

    /// The disk may take its time (a busy machine's fsync): the new limit is written and
    /// in force for the very next request, and answered, while the sync still waits.
    #[test]
    fn a_change_is_in_force_and_written_before_the_disk_has_synced_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gate-state.json");
        let (release, held) = mpsc::channel::<()>();
        let held = Mutex::new(held);
        let (synced_tx, synced) = mpsc::channel::<PathBuf>();
        let synced_tx = Mutex::new(synced_tx);
        let flusher = Flusher::with_sync(
            path.clone(),
            Box::new(move |p| {
                let _ = held.lock().unwrap().recv();
                let _ = synced_tx.lock().unwrap().send(p.to_path_buf());
                Ok(())
            }),
        );
        let metrics = Arc::new(GateMetrics::new());
        let admission = Arc::new(Admission::new(
            &Limit::unlimited(),
            metrics.in_flight.clone(),
        ));
        let control = LimitControl::with_flusher(
            Limit::unlimited(),
            admission.clone(),
            metrics,
            Some((path.clone(), flusher)),
        );
        assert_eq!(admitted(&admission, 10), 10);
        let hold = Limit {
            rate_per_s: Some(1000.0),
            burst: 5,
            max_in_flight: Some(0),
            note: Some("block at the edge".into()),
            shadow: false,
        };
        let applied = control.apply(LimitChange::carried(hold.clone())).unwrap();
        assert_eq!(applied.version, "1");
        assert_eq!(admitted(&admission, 10), 0, "the new limit is not in force");
        let stored = state::load(&path)
            .unwrap()
            .expect("written before the sync");
        assert_eq!(stored.limit, hold);
        assert!(synced.try_recv().is_err(), "the sync was not held");
        release.send(()).unwrap();
        assert_eq!(synced.recv_timeout(Duration::from_secs(10)).unwrap(), path);
    }
}
