//! Nothing acts without its record: with a journal that cannot be written (a full disk:
//! `/dev/full` answers every write with ENOSPC), every action of the shipped runbook fails
//! its step before it touches the target. And the shipped runbook's restart, recorded
//! against the same target, happens only where a drain does not suffice.

use super::test_target::{ctx_on, first_readmission, fixed, Readmission, Recording};
use super::{perform, StepFailure, Tally};
use crate::engine::journal::Journal;
use crate::runbook::action::Action;
use std::sync::Arc;

/// The shipped runbook's block, drain and restart steps against `platform`, on a journal
/// in `dir`; the changes they made.
async fn block_drain_restart(platform: Recording, dir: &std::path::Path) -> Vec<String> {
    let rb = crate::runbook::find("stuck-overload", &[]).unwrap().runbook;
    let journal = Journal::create(dir, "run-drain").unwrap();
    let changes = platform.changes.clone();
    let ctx = ctx_on(&rb, Arc::new(platform), journal, "run-drain");
    for name in ["block-at-edge", "drain-backlog", "batched-restart"] {
        let step = rb.steps.iter().find(|s| s.name == name).unwrap();
        perform(&ctx, step, Tally::default()).await.unwrap();
    }
    let c = changes.lock().unwrap().clone();
    c
}

#[tokio::test]
async fn the_shipped_runbook_restarts_only_where_a_drain_does_not_suffice() {
    let tmp = tempfile::tempdir().unwrap();
    // Ready, drained, the gate at the plan's admit rate (22.5 req/s, below the warm
    // capacity 100): the overload lived in the queue, and nothing is restarted.
    let changes = block_drain_restart(Recording::default(), tmp.path()).await;
    assert!(
        changes.iter().all(|c| !c.starts_with("restart")),
        "{changes:?}"
    );
    assert!(
        changes.contains(&"/admin/drain?keep=answerable r1".to_string()),
        "{changes:?}"
    );
    // A replica that is not ready is replaced, and only it.
    let tmp = tempfile::tempdir().unwrap();
    let sick = Recording {
        not_ready: vec!["r1"],
        ..Recording::default()
    };
    let changes = block_drain_restart(sick, tmp.path()).await;
    let restarts: Vec<_> = changes
        .iter()
        .filter(|c| c.starts_with("restart"))
        .collect();
    assert_eq!(restarts, ["restart r1"], "{changes:?}");
}

#[tokio::test]
async fn an_action_whose_journal_record_cannot_be_written_does_not_run() {
    let rb = crate::runbook::find("stuck-overload", &[]).unwrap().runbook;
    let full = std::fs::OpenOptions::new()
        .append(true)
        .open("/dev/full")
        .unwrap();
    let journal = Journal::on_file(full, "/dev/full".as_ref(), "run-full");
    let platform = Arc::new(Recording::default());
    let changes = platform.changes.clone();
    let ctx = ctx_on(&rb, platform, journal, "run-full");
    let acting: Vec<_> = rb
        .steps
        .iter()
        .chain(&rb.on_failure)
        .filter(|s| !matches!(s.action, Action::WaitUntil(_)))
        .collect();
    assert!(acting.len() >= 6, "{acting:?}");
    for step in acting {
        let e = perform(&ctx, step, Tally::default()).await.unwrap_err();
        assert!(
            matches!(e.failure, StepFailure::Journal { .. }),
            "{}: {e}",
            step.name
        );
        assert!(
            e.to_string().contains("No space left on device"),
            "{}: {e}",
            step.name
        );
        assert_eq!(
            *changes.lock().unwrap(),
            Vec::<String>::new(),
            "step {} acted without its record",
            step.name
        );
    }
}

#[tokio::test]
async fn a_gate_limit_step_in_shadow_sets_the_plans_limit_in_shadow_and_says_so() {
    let rb = crate::runbook::find("stuck-overload", &[]).unwrap().runbook;
    let mut step = rb
        .steps
        .iter()
        .find(|s| s.name == "block-at-edge")
        .unwrap()
        .clone();
    let Action::GateLimit(a) = &mut step.action else {
        panic!("block-at-edge sets the gate's limit")
    };
    a.shadow = true;
    let said = super::describe(&step, &fixed(&rb), &[], &rb).join(" ");
    assert!(said.contains("in shadow"), "{said}");
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::create(dir.path(), "run-shadow").unwrap();
    let platform = Recording::default();
    let changes = platform.changes.clone();
    let ctx = ctx_on(&rb, Arc::new(platform), journal, "run-shadow");
    let done = perform(&ctx, &step, Tally::default()).await.unwrap();
    let changes = changes.lock().unwrap().clone();
    assert_eq!(changes, ["set_limit Some(22.5) in shadow"], "{changes:?}");
    assert!(format!("{done:?}").contains("in shadow"), "{done:?}");
}

/// The shipped block says `fill: full`: on a gate that can fill, its limit starts with
/// its burst (half a second of the plan's 22.5 req/s) and the journal records the fill;
/// on one that cannot (a ConfigMap), it is carried and the run log says why. The dry run
/// says how the bucket starts.
#[tokio::test]
async fn the_shipped_block_starts_its_bucket_full_where_the_gate_can_fill() {
    let rb = crate::runbook::find("stuck-overload", &[]).unwrap().runbook;
    let step = rb.steps.iter().find(|s| s.name == "block-at-edge").unwrap();
    let said = super::describe(step, &fixed(&rb), &[], &rb).join(" ");
    assert!(said.contains("its bucket starting with 12"), "{said}");
    for fills in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::create(dir.path(), "run-block").unwrap();
        let platform = Recording {
            fills,
            ..Recording::default()
        };
        let changes = platform.changes.clone();
        let ctx = ctx_on(&rb, Arc::new(platform), journal, "run-block");
        perform(&ctx, step, Tally::default()).await.unwrap();
        let changes = changes.lock().unwrap().clone();
        let want = if fills {
            "set_limit Some(22.5) filled"
        } else {
            "set_limit Some(22.5)"
        };
        assert_eq!(changes, [want], "{changes:?}");
        let text = std::fs::read_to_string(dir.path().join("run-block.jsonl")).unwrap();
        let started = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|e| e["event"] == "action_started")
            .unwrap();
        let fill = &started["new"]["fill"];
        if fills {
            assert_eq!(fill, &serde_json::json!(true), "{started}");
        } else {
            assert!(fill.is_null(), "{started}");
        }
    }
}

/// After a drain alone that kept nothing, the first limit's bucket holds the room the
/// queue has: all of it but what the shipped block's full bucket (12) may have let in.
#[tokio::test]
async fn the_first_limit_after_a_drain_alone_asks_the_queues_room_and_says_why() {
    let rb = crate::runbook::find("stuck-overload", &[]).unwrap().runbook;
    let readmit = rb.steps.iter().find(|s| s.name == "readmit").unwrap();
    let said = super::describe(readmit, &fixed(&rb), &[], &rb).join(" ");
    assert!(said.contains("bucket full (fill"), "{said}");
    let Readmission { changes, new, .. } = first_readmission(Recording {
        fills: true,
        ..Recording::default()
    })
    .await;
    assert_eq!(
        changes.last().unwrap(),
        "set_limit Some(90.0) filled with 78",
        "{changes:?}"
    );
    assert_eq!(new.len(), 1, "{new:?}");
    assert_eq!(
        (new[0]["fill"].clone(), new[0]["burst"].clone()),
        (78.into(), 90.into())
    );
    let note = new[0]["note"].as_str().unwrap();
    assert!(
        note.contains("12 requests are queued at most") && note.contains("1.00 s timeout"),
        "{note}"
    );
    let Readmission { changes, new, .. } = first_readmission(Recording::default()).await;
    assert_eq!(
        changes.last().unwrap(),
        "set_limit Some(90.0)",
        "{changes:?}"
    );
    assert!(new[0].get("fill").is_none(), "{new:?}");
}
