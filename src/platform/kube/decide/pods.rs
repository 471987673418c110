//! The part of a Pod the decisions look at, and what its phase means for them: a replica
//! is a Running pod, tracked by its UID (a StatefulSet's replacement keeps the name);
//! Failed and Succeeded pods (evicted by node pressure, finished) are not replicas and are
//! never waited for; a Pending pod has no IP and gets no admin call.

use k8s_openapi::api::core::v1::Pod;
use std::time::SystemTime;

/// `status.phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl PodPhase {
    pub fn parse(s: Option<&str>) -> PodPhase {
        match s {
            Some("Pending") => PodPhase::Pending,
            Some("Running") => PodPhase::Running,
            Some("Succeeded") => PodPhase::Succeeded,
            Some("Failed") => PodPhase::Failed,
            _ => PodPhase::Unknown,
        }
    }
}

/// The workload a pod belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// `Deployment` or `StatefulSet`.
    pub kind: String,
    pub name: String,
}

/// The part of a Pod the decisions look at.
#[derive(Debug, Clone, PartialEq)]
pub struct PodView {
    pub name: String,
    pub uid: String,
    pub phase: PodPhase,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// It has a deletionTimestamp: out of service, its replacement is (being) created.
    pub terminating: bool,
    pub ip: Option<String>,
    pub started_at: Option<SystemTime>,
    /// The Deployment (through its ReplicaSet) or StatefulSet owning it.
    pub owner: Option<Owner>,
    /// Why a container is waiting (`CrashLoopBackOff`, `ImagePullBackOff`), for messages.
    pub waiting: Option<String>,
}

impl PodView {
    pub fn of(pod: &Pod) -> PodView {
        let meta = &pod.metadata;
        let status = pod.status.as_ref();
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let started_at = status
            .and_then(|s| s.start_time.as_ref())
            .or(meta.creation_timestamp.as_ref())
            .map(|t| SystemTime::from(t.0));
        let waiting = status
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|cs| {
                cs.iter()
                    .find_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone())
            });
        PodView {
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            phase: PodPhase::parse(status.and_then(|s| s.phase.as_deref())),
            ready,
            terminating: meta.deletion_timestamp.is_some(),
            ip: status
                .and_then(|s| s.pod_ip.clone())
                .filter(|ip| !ip.is_empty()),
            started_at,
            owner: owner(pod),
            waiting,
        }
    }

    /// Failed or Succeeded: it will never serve again.
    pub fn terminal(&self) -> bool {
        matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
    }

    /// A replica: Running and not on its way out.
    pub fn running(&self) -> bool {
        self.phase == PodPhase::Running && !self.terminating
    }

    /// Takes requests now: Running, Ready, not terminating, with an IP.
    pub fn serving(&self) -> bool {
        self.running() && self.ready && self.ip.is_some()
    }

    /// May get an admin call or a scrape: Running with an IP.
    pub fn reachable(&self) -> bool {
        self.running() && self.ip.is_some()
    }

    /// One line for a message: `name (Pending, CrashLoopBackOff)`.
    pub fn describe(&self) -> String {
        let mut parts = vec![format!("{:?}", self.phase)];
        if self.terminating {
            parts.push("terminating".into());
        } else if self.phase == PodPhase::Running && !self.ready {
            parts.push("not ready".into());
        }
        if let Some(w) = &self.waiting {
            parts.push(w.clone());
        }
        format!("{} ({})", self.name, parts.join(", "))
    }
}

/// The controller owning a pod: a StatefulSet directly, or a Deployment through its
/// ReplicaSet named `<deployment>-<pod-template-hash>` (read back with no permission on
/// ReplicaSets).
pub fn owner(pod: &Pod) -> Option<Owner> {
    let refs = pod.metadata.owner_references.as_ref()?;
    let r = refs.iter().find(|o| o.controller == Some(true))?;
    match r.kind.as_str() {
        "StatefulSet" => Some(Owner {
            kind: "StatefulSet".into(),
            name: r.name.clone(),
        }),
        "ReplicaSet" => {
            let hash = pod.metadata.labels.as_ref()?.get("pod-template-hash")?;
            r.name
                .strip_suffix(hash.as_str())
                .and_then(|s| s.strip_suffix('-'))
                .map(|d| Owner {
                    kind: "Deployment".into(),
                    name: d.to_string(),
                })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn owners_come_from_the_replicaset_name_or_the_statefulset() {
        let p = pod(serde_json::json!({
            "metadata": {
                "name": "config-service-7d9f8-abcde",
                "labels": {"pod-template-hash": "7d9f8"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "config-service-7d9f8", "uid": "u", "controller": true}]
            }
        }));
        assert_eq!(
            owner(&p),
            Some(Owner {
                kind: "Deployment".into(),
                name: "config-service".into()
            })
        );
        let p = pod(serde_json::json!({
            "metadata": {"name": "web-0", "ownerReferences": [{"apiVersion": "apps/v1",
                "kind": "StatefulSet", "name": "web", "uid": "u", "controller": true}]}
        }));
        assert_eq!(owner(&p).map(|o| o.kind), Some("StatefulSet".into()));
    }

    #[test]
    fn phases_decide_what_a_pod_is_good_for() {
        let p = PodView::of(&pod(serde_json::json!({
            "metadata": {"name": "a", "uid": "u1"},
            "status": {"phase": "Failed", "reason": "Evicted"}
        })));
        assert!(p.terminal() && !p.running());
        let p = PodView::of(&pod(serde_json::json!({
            "metadata": {"name": "b", "uid": "u2"},
            "status": {"phase": "Pending"}
        })));
        assert!(!p.reachable() && !p.terminal());
        let p = PodView::of(&pod(serde_json::json!({
            "metadata": {"name": "c", "uid": "u3"},
            "status": {"phase": "Running", "podIP": "10.0.0.3",
                "conditions": [{"type": "Ready", "status": "False"}],
                "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false,
                    "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}
        })));
        assert!(p.reachable() && !p.serving());
        assert_eq!(p.describe(), "c (Running, not ready, CrashLoopBackOff)");
    }
}
