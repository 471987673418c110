//! A warm step after a drain alone readmits before its warm call (`engine::warm_readmit`):
//! the gate goes to the readmission's first limit at the warmth measured then, journalled
//! before and after, its bucket filled as the ramp's first limit would be; the ramp then
//! goes on at the warm service's rate with the bucket carried over; the dry run says so.

use super::test_target::{ctx_with, fixed, Heard, Recording};
use super::{perform, Tally};
use crate::engine::journal::{ActionRecord, Entry, Event, Journal};
use crate::metrics::signal::{names, Reading, SignalSpec, Snapshot};
use crate::metrics::source::{MetricError, MetricSource};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

fn shipped() -> crate::runbook::Runbook {
    crate::runbook::find("stuck-overload", &[]).unwrap().runbook
}

/// A service half warm until the target has been asked to warm, then warm; its clients
/// time out after 1 s.
struct Warming(Arc<Mutex<Vec<String>>>);

#[async_trait::async_trait]
impl MetricSource for Warming {
    fn kind(&self) -> &'static str {
        "warming"
    }
    async fn snapshot(&self, _: &BTreeMap<String, SignalSpec>) -> Result<Snapshot, MetricError> {
        let warmed = self.0.lock().unwrap().iter().any(|c| c.contains("warm"));
        let value = |v| Reading::Value { value: v };
        Ok(Snapshot {
            at: SystemTime::now(),
            readings: BTreeMap::from([
                (names::CLIENT_TIMEOUT.to_string(), value(1.0)),
                (
                    names::WARM_FRACTION.to_string(),
                    value(if warmed { 1.0 } else { 0.5 }),
                ),
            ]),
        })
    }
}

/// The shipped runbook up to its readmission's first limit (refused, so the ramp stops
/// there), on a half-warm service drained alone: every change to the target, the journal's
/// `gate.set_limit` records of the warm step, and the run log.
async fn run_until_readmit() -> (Vec<String>, Vec<serde_json::Value>, Vec<String>) {
    let rb = shipped();
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::create(dir.path(), "run-warm").unwrap();
    let platform = Recording {
        refuse_readmit: true,
        fills: true,
        ..Recording::default()
    };
    let changes = platform.changes.clone();
    let heard = Arc::new(Heard::default());
    let ctx = ctx_with(
        &rb,
        Arc::new(platform),
        Arc::new(Warming(changes.clone())),
        journal,
        "run-warm",
        Some(heard.clone()),
    );
    for name in [
        "block-at-edge",
        "drain-backlog",
        "batched-restart",
        "warm-caches",
        "readmit",
    ] {
        let step = rb.steps.iter().find(|s| s.name == name).unwrap();
        let done = perform(&ctx, step, Tally::default()).await;
        assert_eq!(done.is_err(), name == "readmit", "{name}: {done:?}");
    }
    let text = std::fs::read_to_string(dir.path().join("run-warm.jsonl")).unwrap();
    let warm_limits = text
        .lines()
        .filter(|l| {
            let entry: Entry = serde_json::from_str(l).unwrap();
            matches!(
                entry.event,
                Event::ActionStarted { step, action: ActionRecord::SetLimit { .. } }
                | Event::ActionFinished { step, action: ActionRecord::SetLimit { .. } }
                    if step == "warm-caches"
            )
        })
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .collect();
    let c = changes.lock().unwrap().clone();
    let heard = heard.0.lock().unwrap().clone();
    (c, warm_limits, heard)
}

/// Plan: 0.9 x 50 cold / k 2 = 22.5 req/s. Half warm (cold factor 2) the drained service
/// answers 100 / 1.5 = 66.7 req/s: the warm step admits 0.9 x that = 60 req/s, its bucket
/// (60, what the queue answers within the 1 s timeout) full, before it calls warm; warm,
/// the ramp goes to 90 req/s with the bucket carried over.
#[tokio::test]
async fn after_a_drain_alone_the_warm_step_readmits_before_its_warm_call() {
    let (changes, warm_limits, heard) = run_until_readmit().await;
    // Each limit's rate to 0.1 req/s, and whether its bucket was filled.
    let limits: Vec<(String, bool)> = changes
        .iter()
        .filter_map(|c| c.strip_prefix("set_limit Some("))
        .map(|c| {
            let (rate, rest) = c.split_once(')').unwrap();
            let rate: f64 = rate.parse().unwrap();
            (format!("{rate:.1}"), rest.contains("filled"))
        })
        .collect();
    // The block (22.5) starts full as the shipped runbook says; the warm step's limit
    // leaves room for what it may have let in.
    let want = [("22.5", true), ("60.0", true), ("90.0", false)];
    let want: Vec<(String, bool)> = want.iter().map(|(r, f)| (r.to_string(), *f)).collect();
    assert_eq!(limits, want, "{changes:?}");
    let opened = changes
        .iter()
        .position(|c| c.starts_with("set_limit Some(60"));
    let warmed = changes.iter().position(|c| c.starts_with("/admin/warm"));
    assert!(
        opened < warmed,
        "readmitted before the warm call: {changes:?}"
    );
    // Journalled before and after, as every limit.
    let events: Vec<&str> = warm_limits
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["action_started", "action_finished"]);
    let after = warm_limits[1]["after"]["rate_per_s"].as_f64().unwrap();
    assert!((after - 60.0).abs() < 1e-9, "{after}");
    let said = heard.join("\n");
    assert!(
        said.contains("warm-caches: readmitting at 60.0 req/s while the caches warm")
            && said.contains("readmitting at 60.0 req/s since the caches began to warm"),
        "{said}"
    );
}

/// After a restart the service is cold and may not answer what it did: the warm step
/// keeps the plan's rate through its warm call.
#[tokio::test]
async fn after_a_restart_the_warm_step_keeps_the_plans_rate() {
    let rb = shipped();
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::create(dir.path(), "run-restart").unwrap();
    let platform = Recording {
        not_ready: vec!["r1"],
        fills: true,
        ..Recording::default()
    };
    let changes = platform.changes.clone();
    let ctx = ctx_with(
        &rb,
        Arc::new(platform),
        Arc::new(Warming(changes.clone())),
        journal,
        "run-restart",
        None,
    );
    for name in [
        "block-at-edge",
        "drain-backlog",
        "batched-restart",
        "warm-caches",
    ] {
        let step = rb.steps.iter().find(|s| s.name == name).unwrap();
        perform(&ctx, step, Tally::default()).await.unwrap();
    }
    let c = changes.lock().unwrap().clone();
    let limits: Vec<&String> = c.iter().filter(|c| c.starts_with("set_limit")).collect();
    assert_eq!(limits, ["set_limit Some(22.5) filled"], "{c:?}");
}

/// The dry run of the shipped warm step says it readmits first after a drain alone.
#[test]
fn the_dry_run_says_the_warm_step_readmits_after_a_drain_alone() {
    let rb = shipped();
    let warm = rb.steps.iter().find(|s| s.name == "warm-caches").unwrap();
    let said = super::describe(warm, &fixed(&rb), &["r0".to_string()], &rb).join(" ");
    assert!(
        said.contains("first, if this run drained every replica and restarted none: set the gate to the first limit step readmit would set at the warmth measured now"),
        "{said}"
    );
}
