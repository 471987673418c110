//! The batched restart's decisions: which pods form the next batch, and whether a batch is
//! done. Pods are tracked by UID, so a StatefulSet's replacement (same name, new UID) is
//! recognised as new, and a pod is never evicted twice.

use super::pods::PodView;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// One pod as the rollout remembers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodRef {
    pub name: String,
    pub uid: String,
}

impl PodRef {
    pub fn of(p: &PodView) -> PodRef {
        PodRef {
            name: p.name.clone(),
            uid: p.uid.clone(),
        }
    }
}

/// What a batched restart has done so far. Mirrored (journal ConfigMap) after every
/// eviction so another instance can carry on without evicting a finished pod again.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RolloutState {
    /// The target's Running pods when the rollout began (not Pending, not terminating,
    /// not terminal): the only ones it ever evicts.
    pub snapshot: Vec<PodRef>,
    /// Pods evicted (or deleted) so far, in order.
    pub evicted: Vec<PodRef>,
}

impl RolloutState {
    pub fn begin(pods: &[PodView]) -> RolloutState {
        let mut snapshot: Vec<PodRef> = pods
            .iter()
            .filter(|p| p.running())
            .map(PodRef::of)
            .collect();
        snapshot.sort_by(|a, b| a.name.cmp(&b.name));
        RolloutState {
            snapshot,
            evicted: Vec::new(),
        }
    }

    pub fn in_snapshot(&self, uid: &str) -> bool {
        self.snapshot.iter().any(|r| r.uid == uid)
    }

    pub fn was_evicted(&self, uid: &str) -> bool {
        self.evicted.iter().any(|r| r.uid == uid)
    }

    /// The snapshot's pod of that name, if any.
    pub fn original(&self, name: &str) -> Option<&PodRef> {
        self.snapshot.iter().find(|r| r.name == name)
    }

    pub fn record_evicted(&mut self, pod: &PodRef) {
        if !self.was_evicted(&pod.uid) {
            self.evicted.push(pod.clone());
        }
    }
}

/// The next pods to restart: from the snapshot, still there, not evicted yet. Replacements
/// are never chosen (their UIDs are not in the snapshot), and pods that are not ready go
/// first because restarting them costs no serving capacity.
pub fn next_batch(state: &RolloutState, now: &[PodView], size: usize) -> Vec<String> {
    let mut candidates: Vec<&PodView> = now
        .iter()
        .filter(|p| !p.terminating && !p.terminal())
        .filter(|p| state.in_snapshot(&p.uid) && !state.was_evicted(&p.uid))
        .collect();
    candidates.sort_by(|a, b| a.ready.cmp(&b.ready).then_with(|| a.name.cmp(&b.name)));
    candidates
        .into_iter()
        .take(size.max(1))
        .map(|p| p.name.clone())
        .collect()
}

/// How far the replacements for a batch have come.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchProgress {
    /// Pods of the batch still serving (the snapshot's pod, not terminating).
    pub old_remaining: Vec<String>,
    /// Ready, Running pods that are not in the snapshot: replacements.
    pub new_ready: usize,
    /// Replacements needed: one per pod evicted so far in this rollout.
    pub new_needed: usize,
    /// Replacements that are not ready yet, described (Pending, CrashLoopBackOff).
    pub new_waiting: Vec<String>,
}

impl BatchProgress {
    pub fn done(&self) -> bool {
        self.old_remaining.is_empty() && self.new_ready >= self.new_needed
    }
}

/// Is the batch done: every pod of it gone or terminating, and a ready *new* pod for every
/// pod evicted so far. Counting all evictions, not only this batch, means an earlier
/// replacement that died does not make this batch look done. A name in `waiting_for` whose
/// pod is not the snapshot's is a replacement itself (a resumed engine lists the new names):
/// it adds nothing to wait for beyond the replacements' readiness. Terminal pods count for
/// nothing: a Failed replacement is not waited for, its own replacement is.
pub fn batch_progress(
    state: &RolloutState,
    waiting_for: &[String],
    now: &[PodView],
) -> BatchProgress {
    let originals: Vec<&PodRef> = waiting_for
        .iter()
        .filter_map(|w| state.original(w))
        .collect();
    let old_remaining = originals
        .iter()
        .filter(|o| {
            now.iter()
                .any(|p| p.uid == o.uid && !p.terminating && !p.terminal())
        })
        .map(|o| o.name.clone())
        .collect();
    let new: Vec<&PodView> = now
        .iter()
        .filter(|p| !p.terminating && !p.terminal() && !state.in_snapshot(&p.uid))
        .collect();
    let new_ready = new.iter().filter(|p| p.ready && p.running()).count();
    let new_waiting = new
        .iter()
        .filter(|p| !(p.ready && p.running()))
        .map(|p| p.describe())
        .collect();
    let mut needed: BTreeSet<&str> = state.evicted.iter().map(|r| r.uid.as_str()).collect();
    needed.extend(originals.iter().map(|o| o.uid.as_str()));
    BatchProgress {
        old_remaining,
        new_ready,
        new_needed: needed.len(),
        new_waiting,
    }
}

#[cfg(test)]
mod tests {
    use super::super::pods::PodPhase;
    use super::*;

    fn pod(name: &str, uid: &str, ready: bool, terminating: bool) -> PodView {
        PodView {
            name: name.to_string(),
            uid: uid.to_string(),
            phase: PodPhase::Running,
            ready,
            terminating,
            ip: Some("10.0.0.1".into()),
            started_at: None,
            owner: None,
            waiting: None,
        }
    }

    fn with_phase(mut p: PodView, phase: PodPhase) -> PodView {
        p.phase = phase;
        p
    }

    fn r(name: &str, uid: &str) -> PodRef {
        PodRef {
            name: name.into(),
            uid: uid.into(),
        }
    }

    #[test]
    fn next_batch_takes_unrestarted_snapshot_pods_not_ready_first() {
        let now = vec![
            pod("a", "1", true, false),
            pod("b", "2", false, false),
            pod("c", "3", true, false),
            pod("d", "4", true, false),
        ];
        let mut state = RolloutState::begin(&now);
        assert_eq!(next_batch(&state, &now, 2), vec!["b", "a"]);
        state.record_evicted(&r("b", "2"));
        state.record_evicted(&r("a", "1"));
        let now = vec![
            pod("c", "3", true, false),
            pod("d", "4", true, false),
            pod("x", "5", true, false),
            pod("y", "6", false, false),
        ];
        assert_eq!(next_batch(&state, &now, 2), vec!["c", "d"]);
        assert_eq!(next_batch(&state, &now, 0), vec!["c"], "at least one pod");
    }

    #[test]
    fn terminal_pods_are_neither_replicas_nor_waited_for() {
        let now = vec![
            pod("a", "1", true, false),
            with_phase(pod("evicted", "9", false, false), PodPhase::Failed),
        ];
        let mut state = RolloutState::begin(&now);
        assert_eq!(state.snapshot, vec![r("a", "1")]);
        assert_eq!(next_batch(&state, &now, 5), vec!["a"]);
        state.record_evicted(&r("a", "1"));
        // The replacement failed; its own replacement is pending: not done, and the
        // message says why.
        let now = vec![
            with_phase(pod("x", "5", false, false), PodPhase::Failed),
            with_phase(pod("y", "6", false, false), PodPhase::Pending),
        ];
        let p = batch_progress(&state, &["a".into()], &now);
        assert_eq!((p.new_ready, p.new_needed), (0, 1));
        assert_eq!(p.new_waiting, vec!["y (Pending)"]);
        let now = vec![pod("y", "6", true, false)];
        assert!(batch_progress(&state, &["a".into()], &now).done());
    }

    #[test]
    fn a_statefulset_replacement_with_the_same_name_is_new() {
        let before = vec![
            pod("web-0", "1", true, false),
            pod("web-1", "2", true, false),
        ];
        let mut state = RolloutState::begin(&before);
        state.record_evicted(&r("web-0", "1"));
        // web-0 is back under the same name with a new UID: not the old pod.
        let now = vec![
            pod("web-0", "7", false, false),
            pod("web-1", "2", true, false),
        ];
        let p = batch_progress(&state, &["web-0".into()], &now);
        assert!(p.old_remaining.is_empty());
        assert!(!p.done(), "the new web-0 is not ready yet");
        assert_eq!(next_batch(&state, &now, 2), vec!["web-1"]);
        let now = vec![
            pod("web-0", "7", true, false),
            pod("web-1", "2", true, false),
        ];
        assert!(batch_progress(&state, &["web-0".into()], &now).done());
    }

    #[test]
    fn batch_waits_for_new_ready_pods_not_evicted_ones() {
        let before = vec![
            pod("a", "1", true, false),
            pod("b", "2", true, false),
            pod("c", "3", true, false),
        ];
        let mut state = RolloutState::begin(&before);
        state.record_evicted(&r("a", "1"));
        let batch = vec!["a".to_string()];
        let now = vec![
            pod("a", "1", true, true),
            pod("b", "2", true, false),
            pod("c", "3", true, false),
        ];
        assert!(!batch_progress(&state, &batch, &now).done());
        let now = vec![
            pod("b", "2", true, false),
            pod("c", "3", true, false),
            pod("x", "5", true, false),
        ];
        assert!(batch_progress(&state, &batch, &now).done());
        state.record_evicted(&r("b", "2"));
        let now = vec![
            pod("c", "3", true, false),
            pod("x", "5", true, false),
            pod("y", "6", false, false),
        ];
        let p = batch_progress(&state, &["b".to_string()], &now);
        assert_eq!(p.new_needed, 2);
        assert!(!p.done());
    }

    #[test]
    fn replacements_named_in_a_resumed_batch_only_need_to_be_ready() {
        let before = vec![pod("a", "1", true, false), pod("b", "2", true, false)];
        let mut state = RolloutState::begin(&before);
        state.record_evicted(&r("a", "1"));
        let batch = vec!["x".to_string(), "b".to_string()];
        state.record_evicted(&r("b", "2"));
        let now = vec![pod("x", "5", true, false), pod("y", "6", false, false)];
        let p = batch_progress(&state, &batch, &now);
        assert_eq!((p.new_ready, p.new_needed), (1, 2));
        let now = vec![pod("x", "5", true, false), pod("y", "6", true, false)];
        assert!(batch_progress(&state, &batch, &now).done());
    }
}
