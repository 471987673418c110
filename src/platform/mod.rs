//! What the engine acts on, behind one trait: local OS processes or a Kubernetes
//! Deployment. The engine decides; a platform only carries out one action at a time and
//! reports what it observed, so the decision logic is tested without a cluster.

pub mod admin;
mod fetch;
pub mod gate_address;
pub mod kube;
pub mod local;
pub mod target;

pub use crate::metrics::scrape::ScrapeEndpoint;
pub use admin::{AdminOp, AdminReply, DrainKeep, Known};
pub use fetch::PlatformFetch;
pub use target::{connect, ConnectError, Connected, KubeTarget, Target};

use crate::gate::limit::{Limit, LimitChange};
use std::time::{Duration, SystemTime};

/// A replica of the target service, as the platform sees it now.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Replica {
    /// Stable for local replicas; the pod name on Kubernetes (a replacement has a new one).
    pub id: String,
    pub ready: bool,
    /// When the current process or pod started; `None` if not running.
    #[serde(with = "crate::util::time::rfc3339::option")]
    pub started_at: Option<SystemTime>,
}

/// The phase of the one step event a run publishes after losing its lock: what was left
/// where. A platform that fences its writes lets exactly this one through.
pub const LOCK_LOST_PHASE: &str = "lock-lost";

/// A step boundary the platform may publish (Kubernetes Events; a log line locally).
#[derive(Debug, Clone, serde::Serialize)]
pub struct StepEvent {
    pub run_id: String,
    pub step: String,
    pub phase: String,
    pub message: String,
}

/// Something that makes acting on the target unsafe now, and how to clear it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hazard {
    pub what: String,
    pub fix: String,
}

/// Who holds (or wants) the per-target lock.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LockHolder {
    pub run_id: String,
    /// host:pid locally, a pod or user name on Kubernetes.
    pub identity: String,
}

/// Why a platform call failed: the transport or API error itself (so callers can look at
/// it), or, for an answer that arrived but was wrong, what was wrong with it.
pub type CallCause = Box<dyn std::error::Error + Send + Sync>;

/// Everything that can go wrong while acting on a platform.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    #[error("lock on {target} is held by {holder} (run {run_id})")]
    LockHeld {
        target: String,
        holder: String,
        run_id: String,
    },
    #[error("replica {0} not found")]
    NoSuchReplica(String),
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout { what: String, after: Duration },
    /// The lock on the target was lost (a Kubernetes Lease taken over or not renewed in
    /// time): another controller may be acting, so nothing more is done.
    #[error("not done: {what}: the lock on the target was lost ({why})")]
    LockLost { what: String, why: String },
    /// A call to the platform (HTTP, the Kubernetes API) failed; `source` is why.
    #[error("{what}: {source}")]
    Call { what: String, source: CallCause },
    #[error("{0}")]
    Other(String),
}

/// A held lock; dropping it without `release` leaves it for stale-lock detection.
#[async_trait::async_trait]
pub trait LockGuard: Send + Sync {
    async fn release(self: Box<Self>) -> Result<(), PlatformError>;
    /// Cancelled when the lock is lost while held (a Kubernetes Lease taken over or not
    /// renewed in time): the run must stop as on Ctrl-C. A lock that cannot be lost
    /// (a local lock file) never cancels it.
    fn lost(&self) -> tokio_util::sync::CancellationToken {
        tokio_util::sync::CancellationToken::new()
    }
}

/// The gate as the engine sees it: read and set the limit; `set_limit` returns only once
/// the new limit is in force.
#[async_trait::async_trait]
pub trait GateControl: Send + Sync {
    async fn get_limit(&self) -> Result<Limit, PlatformError>;
    async fn set_limit(&self, limit: &Limit) -> Result<(), PlatformError>;
    /// Whether [`GateControl::change_limit`] can fill the bucket on this gate: a change
    /// through the admin API can; a limit every replica re-reads from stored state (a
    /// ConfigMap) cannot carry a one-off.
    fn fills(&self) -> bool {
        false
    }
    /// Set `change.limit`, its bucket starting with `change.fill`'s tokens when it names
    /// some (the admin API's `fill`); returns once the new limit is in force.
    async fn change_limit(&self, change: &LimitChange) -> Result<(), PlatformError> {
        if !change.fill.is_carried() {
            return Err(PlatformError::Other(
                "this gate takes its limit from stored state and cannot start a limit with a filled bucket".into(),
            ));
        }
        self.set_limit(&change.limit).await
    }
    /// The flags of `recover gate limit` that reach this gate from a shell, one entry per
    /// gate a person must change (several local gates each hold a share; lifting each
    /// lifts the total). Empty when no command reaches it.
    fn shell_flags(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A place the engine can act on.
#[async_trait::async_trait]
pub trait Platform: Send + Sync {
    /// "local" or "kube".
    fn kind(&self) -> &'static str;
    /// Stable name of the target, used for the lock and the journal
    /// (`local:demo`, `kube:shop/config-service`).
    fn target_id(&self) -> String;
    async fn replicas(&self) -> Result<Vec<Replica>, PlatformError>;
    /// Take one replica down and start its replacement; returns once the old one is gone.
    async fn restart(&self, replica: &str) -> Result<(), PlatformError>;
    /// Whether [`Platform::restart`] can work on `replica` now; if not, why and how to
    /// make it (a local process started by hand must be adopted). Checked before a run's
    /// first action. Default: yes (Kubernetes replaces any pod of its workload).
    async fn restartable(&self, _replica: &str) -> Result<(), PlatformError> {
        Ok(())
    }
    /// What would make a restart unsafe now (a rollout in progress, an autoscaler that
    /// would fight it, pods that are not Running), each with how to clear it. Checked
    /// before a run's first action. Default: nothing.
    async fn hazards(&self) -> Result<Vec<Hazard>, PlatformError> {
        Ok(Vec::new())
    }
    /// Wait until the replacements for `replicas` (same ids locally, new pods on
    /// Kubernetes) are ready.
    async fn wait_ready(&self, replicas: &[String], timeout: Duration)
        -> Result<(), PlatformError>;
    /// Call an admin endpoint on one replica; returns its reply.
    async fn admin(&self, replica: &str, op: AdminOp) -> Result<AdminReply, PlatformError>;
    /// The gate in front of the target.
    fn gate(&self) -> std::sync::Arc<dyn GateControl>;
    /// Where metrics can be scraped now.
    async fn scrape_endpoints(&self) -> Result<Vec<ScrapeEndpoint>, PlatformError>;
    /// Fetch one endpoint's `/metrics` text.
    async fn scrape(&self, endpoint: &ScrapeEndpoint) -> Result<String, PlatformError>;
    /// Take the per-target lock or fail with [`PlatformError::LockHeld`].
    async fn lock(&self, holder: &LockHolder) -> Result<Box<dyn LockGuard>, PlatformError>;
    /// Publish a step boundary where people look (Kubernetes Events). Best effort.
    async fn record_event(&self, _event: &StepEvent) -> Result<(), PlatformError> {
        Ok(())
    }
    /// Copy the run's journal where another machine can read it (a ConfigMap on
    /// Kubernetes), so `recover resume` works from elsewhere. Local: nothing to do.
    async fn mirror_journal(&self, _run_id: &str, _jsonl: &str) -> Result<(), PlatformError> {
        Ok(())
    }
    /// Read a journal mirrored by [`Platform::mirror_journal`], if there is one.
    async fn fetch_journal(&self, _run_id: &str) -> Result<Option<String>, PlatformError> {
        Ok(None)
    }
    /// Copy the series the run observed beside its mirrored journal, for `recover
    /// report` elsewhere. Local: nothing to do.
    async fn mirror_observed(&self, _run_id: &str, _json: &str) -> Result<(), PlatformError> {
        Ok(())
    }
    /// Read a series mirrored by [`Platform::mirror_observed`], if there is one.
    async fn fetch_observed(&self, _run_id: &str) -> Result<Option<String>, PlatformError> {
        Ok(None)
    }
}
