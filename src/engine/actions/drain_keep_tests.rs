//! A drain that keeps the answerable requests (`backlog.drain` with `keep: answerable`, as
//! the shipped runbook asks): it sends `?keep=answerable`, journals and says what each
//! replica kept; what it kept leaves the readmission's first bucket only the room they
//! leave, and not knowing it leaves the bucket empty, said once in the run log; the dry
//! run says what it keeps.

use super::test_target::{ctx_with, first_readmission, fixed, Heard, NoMetrics, Readmission};
use super::test_target::{Recording, DRAIN_REPLY};
use super::{perform, Tally};
use crate::engine::journal::{ActionRecord, Journal};
use crate::runbook::action::{Action, DrainKeep};
use std::sync::Arc;

fn shipped() -> crate::runbook::Runbook {
    crate::runbook::find("stuck-overload", &[]).unwrap().runbook
}

/// The drain's `action_finished` records, in order.
fn drains_finished(journal: &[serde_json::Value]) -> Vec<serde_json::Value> {
    journal
        .iter()
        .filter(|e| e["event"] == "action_finished")
        .filter(|e| {
            let action = serde_json::from_value::<ActionRecord>((*e).clone());
            matches!(action, Ok(ActionRecord::Drain { .. }))
        })
        .cloned()
        .collect()
}

#[test]
fn the_shipped_runbook_keeps_the_answerable_and_the_dry_run_says_so() {
    let rb = shipped();
    let drain = rb.steps.iter().find(|s| s.name == "drain-backlog").unwrap();
    let Action::BacklogDrain(d) = &drain.action else {
        panic!("drain-backlog drains")
    };
    assert_eq!(d.keep, DrainKeep::Answerable);
    let replicas = ["replica-0".to_string(), "replica-1".to_string()];
    let said = super::describe(drain, &fixed(&rb), &replicas, &rb).join(" ");
    assert!(
        said.contains("POST /admin/drain?keep=answerable on replica-0, replica-1 at once")
            && said.contains("but the youngest each answers before its clients' deadlines"),
        "{said}"
    );
    let readmit = rb.steps.iter().find(|s| s.name == "readmit").unwrap();
    let said = super::describe(readmit, &fixed(&rb), &replicas, &rb).join(" ");
    assert!(
        said.contains("starts full only if every replica says it kept none")
            && said.contains("it starts with the room they leave"),
        "{said}"
    );
    // A drain that keeps nothing is described as before.
    let mut none = drain.clone();
    none.action = Action::BacklogDrain(crate::runbook::action::BacklogDrain {
        keep: DrainKeep::None,
    });
    let said = super::describe(&none, &fixed(&rb), &replicas, &rb).join(" ");
    assert_eq!(
        said,
        "POST /admin/drain on replica-0, replica-1 at once (drops their queued requests)"
    );
}

#[tokio::test]
async fn a_drain_that_keeps_the_answerable_records_and_says_what_each_replica_kept() {
    let rb = shipped();
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::create(dir.path(), "run-keep").unwrap();
    let platform = Recording {
        drain_reply: Some(r#"{"drained": 4550, "kept": 200}"#),
        ..Recording::default()
    };
    let changes = platform.changes.clone();
    let heard = Arc::new(Heard::default());
    let ctx = ctx_with(
        &rb,
        Arc::new(platform),
        Arc::new(NoMetrics),
        journal,
        "run-keep",
        Some(heard.clone()),
    );
    let step = rb.steps.iter().find(|s| s.name == "drain-backlog").unwrap();
    let done = perform(&ctx, step, Tally::default()).await.unwrap();
    assert_eq!(
        *changes.lock().unwrap(),
        [
            "/admin/drain?keep=answerable r0",
            "/admin/drain?keep=answerable r1"
        ]
    );
    assert_eq!(done.figures.get("drained"), Some(&9100.0), "{done:?}");
    assert_eq!(done.figures.get("kept"), Some(&400.0), "{done:?}");
    let message = done.message.unwrap_or_default();
    assert!(
        message.contains("dropped 9100") && message.contains("kept 400"),
        "{message}"
    );
    let text = std::fs::read_to_string(dir.path().join("run-keep.jsonl")).unwrap();
    let journal: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let finished = drains_finished(&journal);
    assert_eq!(finished.len(), 2, "{finished:?}");
    for f in &finished {
        assert_eq!(
            (f["drained"].clone(), f["kept"].clone()),
            (4550.into(), 200.into())
        );
    }
    let heard = heard.0.lock().unwrap().clone();
    assert!(
        heard.contains(
            &"drain-backlog: r0: dropped 4550 queued requests, kept 200 it answers before their deadlines"
                .to_string()
        ),
        "{heard:?}"
    );
}

#[tokio::test]
async fn after_a_drain_that_kept_requests_the_first_bucket_starts_with_the_room_they_leave_and_empty_if_not_said(
) {
    // Kept a known 0 on every replica: nothing is queued but what the shipped block's
    // full bucket (12, half a second of 22.5 req/s) may have let in since, so the first
    // limit starts with the other 78 of its 90.
    let Readmission { changes, heard, .. } = first_readmission(Recording {
        fills: true,
        drain_reply: Some(DRAIN_REPLY),
        ..Recording::default()
    })
    .await;
    assert_eq!(
        changes.last().unwrap(),
        "set_limit Some(90.0) filled with 78"
    );
    assert!(!heard.iter().any(|l| l.contains("not filled")), "{heard:?}");
    // Kept 5 on each: 10 queued, answered within their deadlines, and the block's 12: the
    // bucket starts with the 68 of the 90 the queue answers within the clients' 1 s
    // timeout, the journal and the run log say so, and the start rate stands.
    let Readmission {
        changes,
        heard,
        journal,
        new,
    } = first_readmission(Recording {
        fills: true,
        drain_reply: Some(r#"{"drained": 40, "kept": 5}"#),
        ..Recording::default()
    })
    .await;
    assert_eq!(
        changes.last().unwrap(),
        "set_limit Some(90.0) filled with 68",
        "{changes:?}"
    );
    assert_eq!(
        (new[0]["fill"].clone(), new[0]["burst"].clone()),
        (68.into(), 90.into()),
        "{new:?}"
    );
    let why = "its bucket starts with 68 of burst 90: 22 requests are queued at most (those the drain kept, which the replicas answer within their deadlines, and any a filled block let in since), and 90 is what the queue answers within the clients' 1.00 s timeout";
    let note = new[0]["note"].as_str().unwrap_or_default();
    assert!(note.contains(why), "{note}");
    assert!(
        heard
            .iter()
            .any(|l| l.starts_with("readmit: admitting 90.0 req/s: ") && l.contains(why)),
        "{heard:?}"
    );
    assert!(!heard.iter().any(|l| l.contains("not filled")), "{heard:?}");
    assert!(
        drains_finished(&journal).iter().all(|f| f["kept"] == 5),
        "{journal:?}"
    );
    // A service that ignores ?keep= answers without `kept`: unknown, never 0, so no fill.
    let Readmission {
        changes,
        heard,
        journal,
        ..
    } = first_readmission(Recording {
        fills: true,
        drain_reply: Some(r#"{"drained": 40}"#),
        ..Recording::default()
    })
    .await;
    assert_eq!(
        changes.last().unwrap(),
        "set_limit Some(90.0)",
        "{changes:?}"
    );
    let said: Vec<_> = heard.iter().filter(|l| l.contains("not filled")).collect();
    assert_eq!(said.len(), 1, "{heard:?}");
    assert!(said[0].contains("did not say how many"), "{said:?}");
    for f in drains_finished(&journal) {
        let why = f["kept"]["unknown"].as_str().unwrap_or_default();
        assert!(why.contains("carries no kept count"), "{f}");
    }
    assert!(
        heard
            .iter()
            .any(|l| l.contains("how many it kept is unknown")),
        "{heard:?}"
    );
}
