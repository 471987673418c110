//! Where a running gate gets new limits from, besides its admin API.
//!
//! The gate consumes [`VersionedLimit`]s from any number of sources. The Kubernetes
//! platform adds a ConfigMap source; the gate reports the applied version in `/metrics`
//! (`recover_gate_limit_applied_info{version=...}`) so whoever wrote it can wait until
//! it is in force.
//!
//! Several gate replicas share one limit: a [`PeerSource`] tells the gate how many there
//! are (Kubernetes: the ready endpoints of the gate's Service), and each enforces its share.

use super::limit::Limit;
use super::share::Peers;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A limit together with the version of the source it came from (a ConfigMap's
/// resourceVersion, an admin API sequence number), and what the source means by it.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionedLimit {
    pub limit: Limit,
    pub version: String,
    pub meaning: Meaning,
}

impl VersionedLimit {
    /// A new limit to put in force.
    pub fn new(limit: Limit, version: impl Into<String>) -> Self {
        VersionedLimit {
            limit,
            version: version.into(),
            meaning: Meaning::New,
        }
    }
}

/// What a source's update says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Meaning {
    /// Put this limit in force.
    #[default]
    New,
    /// The limit at this version still stands (the source read it again): its age is now.
    Confirm,
    /// The source holds no limit at all (a ConfigMap without the key): this limit
    /// (unlimited) is what that means, put in force only by a gate that knows no limit.
    Fallback,
}

/// Why a limit source stopped or could not read a limit.
#[derive(Debug, thiserror::Error)]
pub enum LimitSourceError {
    #[error("limit source {source_name}: {message}")]
    Unavailable {
        source_name: &'static str,
        message: String,
    },
    #[error("limit source {source_name}: invalid limit: {message}")]
    Invalid {
        source_name: &'static str,
        message: String,
    },
}

/// A feed of limits. `run` pushes every new limit (the current one first) into `updates`
/// until `shutdown` is cancelled. A source that cannot parse a limit reports it and keeps
/// the last good one in force: the gate must never fall open because of a typo.
#[async_trait::async_trait]
pub trait LimitSource: Send + 'static {
    fn name(&self) -> &'static str;
    async fn run(
        self: Box<Self>,
        updates: mpsc::Sender<VersionedLimit>,
        shutdown: CancellationToken,
    ) -> Result<(), LimitSourceError>;
}

/// A feed of the gate replicas sharing the limit. `run` pushes the current [`Peers`] first,
/// then every change, until `shutdown` is cancelled. A source that loses track keeps the
/// last count in force (the limit must not jump to the total on one replica because a
/// watch broke).
#[async_trait::async_trait]
pub trait PeerSource: Send + 'static {
    fn name(&self) -> &'static str;
    async fn run(
        self: Box<Self>,
        updates: mpsc::Sender<Peers>,
        shutdown: CancellationToken,
    ) -> Result<(), LimitSourceError>;
}
