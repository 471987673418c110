//! The decisions of the Kubernetes platform as pure functions: what a pod is good for,
//! which pods form the next batch and whether a batch is done, what an eviction's refusal
//! means, whether we may take the lease, what the gates report, which journal runs to
//! prune. They see plain views of API objects, so they are tested without a cluster and
//! the I/O modules stay thin.

pub mod evict;
pub mod hazards;
pub mod keys;
pub mod lease;
pub mod metrics;
pub mod pods;
pub mod rollout;

pub use evict::{after_evict, BlockKind, Blocked, EvictNext, EvictOutcome};
pub use keys::configmap_key;
pub use lease::{lease_decision, LeaseDecision, LeaseView, Observed};
pub use metrics::{applied_version, reported_peers};
pub use pods::{Owner, PodPhase, PodView};
pub use rollout::{batch_progress, next_batch, BatchProgress, PodRef, RolloutState};
