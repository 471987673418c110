//! What makes a restart unsafe now, and only that: a rollout of the workload in progress
//! (two controllers replacing the same pods), an autoscaler that would fight the restart
//! (its new pods end a batch early; it scales against the shed), and pods that are not
//! Running (Pending: no capacity to come back to). Pods that are Running but NotReady are
//! not here: under a stuck overload their readiness probe times out, and they are what the
//! runbook is for. Pure.

use super::PodView;
use crate::platform::Hazard;

/// The workload as the checks see it.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadState {
    /// `Deployment` or `StatefulSet`.
    pub kind: String,
    pub name: String,
    pub generation: i64,
    pub observed_generation: i64,
    /// spec.replicas, status.replicas, status.updatedReplicas.
    pub desired: i32,
    pub current: i32,
    pub updated: i32,
}

/// An autoscaler as the checks see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Autoscaler {
    pub name: String,
    /// `scaleTargetRef`'s kind and name.
    pub target_kind: String,
    pub target_name: String,
    pub min: i32,
    pub max: i32,
}

pub fn hazards(
    namespace: &str,
    workload: Option<&WorkloadState>,
    autoscalers: &[Autoscaler],
    pods: &[PodView],
) -> Vec<Hazard> {
    let mut out = Vec::new();
    if let Some(w) = workload {
        let kind = w.kind.to_ascii_lowercase();
        if w.observed_generation < w.generation || w.updated < w.desired || w.current > w.desired {
            out.push(Hazard {
                what: format!(
                    "{kind} {} is in the middle of a rollout ({} of {} pods updated, {} pods for {} wanted, generation {} observed {}): a batched restart would race it",
                    w.name, w.updated, w.desired, w.current, w.desired, w.generation, w.observed_generation
                ),
                fix: format!(
                    "let it finish (kubectl -n {namespace} rollout status {kind}/{}) or undo it (kubectl -n {namespace} rollout undo {kind}/{}), then run again",
                    w.name, w.name
                ),
            });
        }
        for a in autoscalers
            .iter()
            .filter(|a| a.target_kind == w.kind && a.target_name == w.name && a.min != a.max)
        {
            out.push(Hazard {
                what: format!(
                    "HorizontalPodAutoscaler {} scales {kind} {} between {} and {} replicas: its new pods would end a restart batch early and it scales against the shed",
                    a.name, w.name, a.min, a.max
                ),
                fix: format!(
                    "pin it for the run at the current {n} replicas: kubectl -n {namespace} patch hpa {} --type=merge -p '{{\"spec\":{{\"minReplicas\":{n},\"maxReplicas\":{n}}}}}' (put back minReplicas {} and maxReplicas {} afterwards)",
                    a.name, a.min, a.max, n = w.desired.max(1)
                ),
            });
        }
    }
    let pending: Vec<String> = pods
        .iter()
        .filter(|p| !p.terminating && !p.terminal() && !p.running())
        .map(PodView::describe)
        .collect();
    if !pending.is_empty() {
        out.push(Hazard {
            what: format!(
                "pods not Running: {}: restarting Running pods now could leave nothing to serve",
                pending.join(", ")
            ),
            fix: format!(
                "find why they do not start (kubectl -n {namespace} describe pod NAME) and run again once they are Running"
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::kube::decide::PodPhase;

    fn pod(name: &str, phase: PodPhase, ready: bool) -> PodView {
        PodView {
            name: name.into(),
            uid: name.into(),
            phase,
            ready,
            terminating: false,
            ip: Some("10.0.0.1".into()),
            started_at: None,
            owner: None,
            waiting: None,
        }
    }

    fn steady() -> WorkloadState {
        WorkloadState {
            kind: "Deployment".into(),
            name: "web".into(),
            generation: 3,
            observed_generation: 3,
            desired: 3,
            current: 3,
            updated: 3,
        }
    }

    #[test]
    fn running_pods_that_are_not_ready_are_no_hazard() {
        let pods = [
            pod("a", PodPhase::Running, false),
            pod("b", PodPhase::Running, false),
            pod("c", PodPhase::Running, true),
        ];
        assert_eq!(hazards("ns", Some(&steady()), &[], &pods), vec![]);
    }

    #[test]
    fn a_rollout_an_autoscaler_and_pending_pods_are_each_named_with_their_fix() {
        let mut w = steady();
        w.generation = 4;
        let hpa = Autoscaler {
            name: "web-hpa".into(),
            target_kind: "Deployment".into(),
            target_name: "web".into(),
            min: 2,
            max: 10,
        };
        let pods = [pod("a", PodPhase::Pending, false)];
        let h = hazards("ns", Some(&w), std::slice::from_ref(&hpa), &pods);
        assert_eq!(h.len(), 3, "{h:?}");
        assert!(
            h[0].what.contains("rollout") && h[0].fix.contains("rollout status deployment/web")
        );
        assert!(h[1].what.contains("web-hpa") && h[1].fix.contains("\"minReplicas\":3"));
        assert!(h[2].what.contains("not Running") && h[2].what.contains('a'));
        // Pinned (min = max): not a hazard.
        let pinned = Autoscaler {
            min: 3,
            max: 3,
            ..hpa
        };
        assert_eq!(hazards("ns", Some(&steady()), &[pinned], &[]), vec![]);
    }
}
