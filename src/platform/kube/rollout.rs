//! The decisions of the Kubernetes platform as pure functions: which pods form the next
//! batch, whether a batch is done, whether we may take the lease, what the gate reports.
//! They see plain views of API objects, so they are tested without a cluster and the
//! I/O modules stay thin.

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

/// The part of a Pod the decisions look at.
#[derive(Debug, Clone, PartialEq)]
pub struct PodView {
    pub name: String,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// It has a deletionTimestamp: out of service, its replacement is (being) created.
    pub terminating: bool,
    pub started_at: Option<SystemTime>,
    /// The Deployment owning it, derived from its ReplicaSet owner and pod-template-hash.
    pub deployment: Option<String>,
}

impl PodView {
    pub fn of(pod: &Pod) -> PodView {
        let meta = &pod.metadata;
        let ready = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let started_at = pod
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .or(meta.creation_timestamp.as_ref())
            .map(|t| SystemTime::from(t.0));
        PodView {
            name: meta.name.clone().unwrap_or_default(),
            ready,
            terminating: meta.deletion_timestamp.is_some(),
            started_at,
            deployment: owner_deployment(pod),
        }
    }
}

/// A Deployment's pods are owned by a ReplicaSet named `<deployment>-<pod-template-hash>`;
/// reading that back needs no permission on Deployments or ReplicaSets.
pub fn owner_deployment(pod: &Pod) -> Option<String> {
    let hash = pod.metadata.labels.as_ref()?.get("pod-template-hash")?;
    let owner = pod
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.kind == "ReplicaSet" && o.controller == Some(true))?;
    owner
        .name
        .strip_suffix(hash.as_str())
        .and_then(|s| s.strip_suffix('-'))
        .map(str::to_string)
}

/// What a batched restart has done so far. Persisted (journal ConfigMap) after every
/// eviction so another instance can carry on without evicting a finished pod again.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RolloutState {
    /// The target's pods when the rollout began: the only ones it ever evicts.
    pub snapshot: Vec<String>,
    /// Pods evicted (or deleted) so far, in order.
    pub evicted: Vec<String>,
}

impl RolloutState {
    pub fn begin(pods: &[PodView]) -> RolloutState {
        let mut snapshot: Vec<String> = pods
            .iter()
            .filter(|p| !p.terminating)
            .map(|p| p.name.clone())
            .collect();
        snapshot.sort();
        RolloutState {
            snapshot,
            evicted: Vec::new(),
        }
    }

    pub fn record_evicted(&mut self, pod: &str) {
        if !self.evicted.iter().any(|e| e == pod) {
            self.evicted.push(pod.to_string());
        }
    }
}

/// The next pods to restart: from the snapshot, still running, not evicted yet. Replacement
/// pods are never chosen (they are not in the snapshot), and not-ready pods go first
/// because restarting them costs no serving capacity.
pub fn next_batch(state: &RolloutState, now: &[PodView], size: usize) -> Vec<String> {
    let evicted: BTreeSet<&str> = state.evicted.iter().map(String::as_str).collect();
    let mut candidates: Vec<&PodView> = now
        .iter()
        .filter(|p| !p.terminating)
        .filter(|p| state.snapshot.contains(&p.name) && !evicted.contains(p.name.as_str()))
        .collect();
    candidates.sort_by(|a, b| a.ready.cmp(&b.ready).then_with(|| a.name.cmp(&b.name)));
    candidates
        .into_iter()
        .take(size.max(1))
        .map(|p| p.name.clone())
        .collect()
}

/// How far the replacements for `waiting_for` have come.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchProgress {
    /// Pods of the batch still serving (not gone, not terminating).
    pub old_remaining: Vec<String>,
    /// Ready pods that are not in the snapshot: replacements.
    pub new_ready: usize,
    /// Replacements needed: one per pod evicted so far in this rollout.
    pub new_needed: usize,
}

impl BatchProgress {
    pub fn done(&self) -> bool {
        self.old_remaining.is_empty() && self.new_ready >= self.new_needed
    }
}

/// Is the batch done: every pod of it gone or terminating, and a ready *new* pod (not in
/// the rollout's snapshot) for every pod evicted so far. Counting all evictions, not only
/// this batch, means an earlier replacement that died does not make this batch look done.
/// A name in `waiting_for` outside the snapshot is a replacement itself (a resumed engine
/// lists the new names): it adds nothing to wait for beyond the replacements' readiness.
pub fn batch_progress(
    state: &RolloutState,
    waiting_for: &[String],
    now: &[PodView],
) -> BatchProgress {
    let snapshot: BTreeSet<&str> = state.snapshot.iter().map(String::as_str).collect();
    let waiting_for: Vec<&String> = waiting_for
        .iter()
        .filter(|w| snapshot.contains(w.as_str()))
        .collect();
    let old_remaining = waiting_for
        .iter()
        .filter(|w| now.iter().any(|p| &p.name == **w && !p.terminating))
        .map(|w| w.to_string())
        .collect();
    let new_ready = now
        .iter()
        .filter(|p| p.ready && !p.terminating && !snapshot.contains(p.name.as_str()))
        .count();
    let mut needed: BTreeSet<&str> = state.evicted.iter().map(String::as_str).collect();
    needed.extend(waiting_for.iter().map(|w| w.as_str()));
    BatchProgress {
        old_remaining,
        new_ready,
        new_needed: needed.len(),
    }
}

/// An eviction attempt's result, as the retry loop sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvictOutcome {
    /// Accepted: the pod is terminating.
    Evicted,
    /// The pod does not exist (any more): nothing left to do.
    Gone,
    /// 429: a PodDisruptionBudget does not allow it now.
    Blocked(String),
}

/// What to do after an eviction attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvictNext {
    Done,
    RetryAfter(Duration),
    /// Budget still blocks at the deadline and the caller allowed deleting.
    Delete,
    GiveUp(String),
}

pub fn after_evict(
    outcome: &EvictOutcome,
    elapsed: Duration,
    timeout: Duration,
    allow_delete: bool,
    retry_every: Duration,
) -> EvictNext {
    match outcome {
        EvictOutcome::Evicted | EvictOutcome::Gone => EvictNext::Done,
        EvictOutcome::Blocked(_) if elapsed + retry_every < timeout => {
            EvictNext::RetryAfter(retry_every)
        }
        EvictOutcome::Blocked(_) if allow_delete => EvictNext::Delete,
        EvictOutcome::Blocked(why) => EvictNext::GiveUp(why.clone()),
    }
}

/// The per-target Lease as the lock decision sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseView {
    pub holder_identity: Option<String>,
    pub run_id: Option<String>,
    pub renew_time: Option<SystemTime>,
    pub duration: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub enum LeaseDecision {
    /// No Lease yet: create it.
    Create,
    /// Ours already (same identity and run): renew it.
    Renew,
    /// Free or expired: take it over (a new transition).
    TakeOver,
    /// Someone else holds it and it has not expired.
    Held {
        holder: String,
        run_id: String,
        expires_in: Duration,
    },
}

pub fn lease_decision(
    lease: Option<&LeaseView>,
    identity: &str,
    run_id: &str,
    now: SystemTime,
) -> LeaseDecision {
    let Some(lease) = lease else {
        return LeaseDecision::Create;
    };
    let holder = match lease.holder_identity.as_deref() {
        None | Some("") => return LeaseDecision::TakeOver,
        Some(h) => h,
    };
    if holder == identity && lease.run_id.as_deref() == Some(run_id) {
        return LeaseDecision::Renew;
    }
    let expires = lease.renew_time.map(|t| t + lease.duration);
    match expires {
        Some(at) if at > now => LeaseDecision::Held {
            holder: holder.to_string(),
            run_id: lease.run_id.clone().unwrap_or_default(),
            expires_in: at.duration_since(now).unwrap_or_default(),
        },
        _ => LeaseDecision::TakeOver,
    }
}

/// The version in `recover_gate_limit_applied_info{version="..."} 1`, if the gate reports one.
pub fn applied_version(metrics: &str) -> Option<String> {
    metrics.lines().find_map(|line| {
        let rest = line.strip_prefix("recover_gate_limit_applied_info{")?;
        let (labels, value) = rest.split_once('}')?;
        if value.trim().parse::<f64>().ok()? != 1.0 {
            return None;
        }
        labels.split(',').find_map(|kv| {
            let v = kv.trim().strip_prefix("version=\"")?;
            v.strip_suffix('"').map(str::to_string)
        })
    })
}

/// ConfigMap keys allow `[-._a-zA-Z0-9]`; a run id that strays is rewritten, not refused.
pub fn configmap_key(prefix: &str, suffix: &str) -> String {
    let clean: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-._".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{clean}{suffix}")
}

#[cfg(test)]
#[path = "rollout_tests.rs"]
mod tests;
