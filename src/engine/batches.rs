//! Which replicas to restart in which batch, as a pure function of the replica list, the
//! batch size and what the journal says is already done, so a resumed run carries on where
//! the killed one stopped and never restarts a finished replica again.

use crate::runbook::action::BatchSize;
use std::collections::BTreeSet;

/// Progress of a batched restart as recorded in the journal.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RestartProgress {
    /// Replicas whose restart finished (the old process is gone, the new one started).
    pub restarted: BTreeSet<String>,
    /// Replicas confirmed ready after their restart.
    pub ready: BTreeSet<String>,
}

/// The remaining work: first, replicas restarted but not yet confirmed ready (wait only),
/// then batches of replicas still to restart.
#[derive(Debug, Clone, PartialEq)]
pub struct RestartWork {
    pub await_ready: Vec<String>,
    pub batches: Vec<Vec<String>>,
}

/// Plan the rest of a batched restart. Batch size is computed from all replicas, so a
/// resumed run keeps the batch size the original had.
pub fn remaining(all: &[String], batch: BatchSize, done: &RestartProgress) -> RestartWork {
    let per = batch.per_batch(all.len());
    let await_ready = all
        .iter()
        .filter(|r| done.restarted.contains(*r) && !done.ready.contains(*r))
        .cloned()
        .collect();
    let todo: Vec<String> = all
        .iter()
        .filter(|r| !done.restarted.contains(*r))
        .cloned()
        .collect();
    RestartWork {
        await_ready,
        batches: todo.chunks(per).map(|c| c.to_vec()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("r{i}")).collect()
    }

    #[test]
    fn splits_by_percentage() {
        let w = remaining(
            &ids(5),
            BatchSize::Percent(40.0),
            &RestartProgress::default(),
        );
        assert_eq!(
            w.batches,
            vec![vec!["r0", "r1"], vec!["r2", "r3"], vec!["r4"]]
        );
        assert!(w.await_ready.is_empty());
    }

    #[test]
    fn resume_skips_finished_replicas() {
        let done = RestartProgress {
            restarted: ["r0", "r1", "r2"].iter().map(|s| s.to_string()).collect(),
            ready: ["r0", "r1"].iter().map(|s| s.to_string()).collect(),
        };
        let w = remaining(&ids(5), BatchSize::Count(2), &done);
        assert_eq!(w.await_ready, vec!["r2"]);
        assert_eq!(w.batches, vec![vec!["r3", "r4"]]);
    }
}
