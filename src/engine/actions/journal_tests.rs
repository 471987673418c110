//! Nothing acts without its record: with a journal that cannot be written (a full disk:
//! `/dev/full` answers every write with ENOSPC), every action of the shipped runbook fails
//! its step before it touches the target. And the shipped runbook's restart, recorded
//! against the same target, happens only where a drain does not suffice.

use super::{perform, Ctx, StepFailure, Tally};
use crate::engine::journal::Journal;
use crate::engine::vars::Fixed;
use crate::engine::RunOptions;
use crate::gate::limit::{Limit, LimitChange};
use crate::metrics::signal::{names, SignalSpec, Snapshot};
use crate::metrics::source::{MetricError, MetricSource};
use crate::plan::{make_plan, PlanInputs};
use crate::platform::{
    AdminOp, AdminReply, GateControl, LockGuard, LockHolder, Platform, PlatformError, Replica,
    ScrapeEndpoint,
};
use crate::runbook::action::Action;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// A target that records every call that would change it.
#[derive(Default)]
struct Recording {
    changes: Arc<Mutex<Vec<String>>>,
    /// The gate's rate now (None: unlimited).
    rate: Arc<Mutex<Option<f64>>>,
    /// Replicas that answer not ready.
    not_ready: Vec<&'static str>,
    /// Whether the gate can fill a new limit's bucket (a local gate's admin API).
    fills: bool,
    /// Refuse the readmission's limits, so that a test stops a ramp at its first.
    refuse_readmit: bool,
}

impl Recording {
    fn changed(&self, what: String) {
        self.changes.lock().unwrap().push(what);
    }
}

#[async_trait::async_trait]
impl GateControl for Recording {
    async fn get_limit(&self) -> Result<Limit, PlatformError> {
        Ok(Limit {
            rate_per_s: *self.rate.lock().unwrap(),
            ..Limit::unlimited()
        })
    }
    async fn set_limit(&self, limit: &Limit) -> Result<(), PlatformError> {
        self.change_limit(&LimitChange::carried(limit.clone()))
            .await
    }
    fn fills(&self) -> bool {
        self.fills
    }
    async fn change_limit(&self, change: &LimitChange) -> Result<(), PlatformError> {
        let limit = &change.limit;
        let shadow = if limit.shadow { " in shadow" } else { "" };
        let fill = if change.fill { " filled" } else { "" };
        self.changed(format!("set_limit {:?}{shadow}{fill}", limit.rate_per_s));
        let readmit = limit.note.as_deref().unwrap_or("").contains("step readmit");
        if self.refuse_readmit && readmit {
            return Err(PlatformError::Other("the test stops the ramp here".into()));
        }
        *self.rate.lock().unwrap() = limit.rate_per_s;
        Ok(())
    }
}

#[async_trait::async_trait]
impl Platform for Recording {
    fn kind(&self) -> &'static str {
        "test"
    }
    fn target_id(&self) -> String {
        "test:recording".into()
    }
    async fn replicas(&self) -> Result<Vec<Replica>, PlatformError> {
        Ok(["r0", "r1"]
            .map(|id| Replica {
                id: id.into(),
                ready: !self.not_ready.contains(&id),
                started_at: Some(SystemTime::now()),
            })
            .to_vec())
    }
    async fn restart(&self, replica: &str) -> Result<(), PlatformError> {
        self.changed(format!("restart {replica}"));
        Ok(())
    }
    async fn wait_ready(&self, _: &[String], _: Duration) -> Result<(), PlatformError> {
        Ok(())
    }
    async fn admin(&self, replica: &str, op: AdminOp) -> Result<AdminReply, PlatformError> {
        self.changed(format!("{} {replica}", op.path()));
        Ok(AdminReply::read(op, "{}"))
    }
    fn gate(&self) -> Arc<dyn GateControl> {
        Arc::new(Recording {
            changes: self.changes.clone(),
            rate: self.rate.clone(),
            not_ready: self.not_ready.clone(),
            fills: self.fills,
            refuse_readmit: self.refuse_readmit,
        })
    }
    async fn scrape_endpoints(&self) -> Result<Vec<ScrapeEndpoint>, PlatformError> {
        Ok(vec![])
    }
    async fn scrape(&self, _: &ScrapeEndpoint) -> Result<String, PlatformError> {
        Ok(String::new())
    }
    async fn lock(&self, _: &LockHolder) -> Result<Box<dyn LockGuard>, PlatformError> {
        Err(PlatformError::Other("not in this test".into()))
    }
}

struct NoMetrics;

#[async_trait::async_trait]
impl MetricSource for NoMetrics {
    fn kind(&self) -> &'static str {
        "none"
    }
    async fn snapshot(&self, _: &BTreeMap<String, SignalSpec>) -> Result<Snapshot, MetricError> {
        Ok(Snapshot {
            at: SystemTime::now(),
            readings: BTreeMap::new(),
        })
    }
}

/// A service the clients say they time out on after 1 s, all warm.
struct Measured;

#[async_trait::async_trait]
impl MetricSource for Measured {
    fn kind(&self) -> &'static str {
        "fixed"
    }
    async fn snapshot(&self, _: &BTreeMap<String, SignalSpec>) -> Result<Snapshot, MetricError> {
        let value = |v| crate::metrics::signal::Reading::Value { value: v };
        Ok(Snapshot {
            at: SystemTime::now(),
            readings: BTreeMap::from([
                (names::CLIENT_TIMEOUT.to_string(), value(1.0)),
                (names::WARM_FRACTION.to_string(), value(1.0)),
            ]),
        })
    }
}

fn fixed(rb: &crate::runbook::Runbook) -> Fixed {
    let inputs = PlanInputs {
        arrival_rate: 100.0,
        capacity_cold: 50.0,
        k: 2.0,
        capacity: Some(100.0),
        demand: Some(20.0),
    };
    Fixed {
        plan: make_plan(&inputs, &rb.plan),
        inputs,
        config: rb.plan.clone(),
        params: rb.params.clone(),
        slow_replica: None,
    }
}

/// A run's context for `rb` on `platform` and `journal`: no metrics, the runbook's
/// fixed inputs, default options.
fn ctx_on(
    rb: &crate::runbook::Runbook,
    platform: Arc<dyn Platform>,
    journal: Journal,
    run_id: &str,
) -> Arc<Ctx> {
    Arc::new(Ctx::new(
        rb.clone(),
        platform,
        Arc::new(NoMetrics),
        fixed(rb),
        run_id.into(),
        journal,
        RunOptions::default(),
        BTreeMap::new(),
    ))
}

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
        changes.contains(&"/admin/drain r1".to_string()),
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

/// The shipped runbook's readmission after a drain alone, its first limit: filled where
/// the gate can fill, journalled with `fill: true` and why; not where it cannot.
async fn first_readmission(fills: bool) -> (Vec<String>, Vec<serde_json::Value>) {
    let rb = crate::runbook::find("stuck-overload", &[]).unwrap().runbook;
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::create(dir.path(), "run-fill").unwrap();
    let platform = Recording {
        fills,
        refuse_readmit: true,
        ..Recording::default()
    };
    let changes = platform.changes.clone();
    let ctx = Arc::new(Ctx::new(
        rb.clone(),
        Arc::new(platform),
        Arc::new(Measured),
        fixed(&rb),
        "run-fill".into(),
        journal,
        RunOptions::default(),
        BTreeMap::new(),
    ));
    for name in [
        "block-at-edge",
        "drain-backlog",
        "batched-restart",
        "readmit",
    ] {
        let step = rb.steps.iter().find(|s| s.name == name).unwrap();
        let done = perform(&ctx, step, Tally::default()).await;
        assert_eq!(done.is_err(), name == "readmit", "{name}: {done:?}");
    }
    let text = std::fs::read_to_string(dir.path().join("run-fill.jsonl")).unwrap();
    let started = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["event"] == "action_started" && e["step"] == "readmit")
        .map(|e| e["new"].clone())
        .collect();
    let c = changes.lock().unwrap().clone();
    (c, started)
}

#[tokio::test]
async fn the_first_limit_after_a_drain_alone_asks_a_full_bucket_and_says_why() {
    let rb = crate::runbook::find("stuck-overload", &[]).unwrap().runbook;
    let readmit = rb.steps.iter().find(|s| s.name == "readmit").unwrap();
    let said = super::describe(readmit, &fixed(&rb), &[], &rb).join(" ");
    assert!(said.contains("bucket full (fill"), "{said}");
    let (changes, new) = first_readmission(true).await;
    assert_eq!(
        changes.last().unwrap(),
        "set_limit Some(90.0) filled",
        "{changes:?}"
    );
    assert_eq!(new.len(), 1, "{new:?}");
    assert_eq!(
        (new[0]["fill"].clone(), new[0]["burst"].clone()),
        (true.into(), 90.into())
    );
    let note = new[0]["note"].as_str().unwrap();
    assert!(
        note.contains("nothing is queued") && note.contains("1.00 s timeout"),
        "{note}"
    );
    let (changes, new) = first_readmission(false).await;
    assert_eq!(
        changes.last().unwrap(),
        "set_limit Some(90.0)",
        "{changes:?}"
    );
    assert!(new[0].get("fill").is_none(), "{new:?}");
}
