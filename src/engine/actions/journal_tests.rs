//! Nothing acts without its record: with a journal that cannot be written (a full disk:
//! `/dev/full` answers every write with ENOSPC), every action of the shipped runbook fails
//! its step before it touches the target.

use super::{perform, Ctx, StepFailure, Tally};
use crate::engine::journal::Journal;
use crate::engine::vars::Fixed;
use crate::engine::RunOptions;
use crate::gate::limit::Limit;
use crate::metrics::signal::{SignalSpec, Snapshot};
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
}

impl Recording {
    fn changed(&self, what: String) {
        self.changes.lock().unwrap().push(what);
    }
}

#[async_trait::async_trait]
impl GateControl for Recording {
    async fn get_limit(&self) -> Result<Limit, PlatformError> {
        Ok(Limit::unlimited())
    }
    async fn set_limit(&self, limit: &Limit) -> Result<(), PlatformError> {
        self.changed(format!(
            "set_limit {:?} shadow={}",
            limit.rate_per_s, limit.shadow
        ));
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
                ready: true,
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

/// The shipped runbook and the figures of a plan for it.
fn shipped() -> (crate::runbook::Runbook, Fixed) {
    let rb = crate::runbook::find("stuck-overload", &[]).unwrap().runbook;
    let inputs = PlanInputs {
        arrival_rate: 100.0,
        capacity_cold: 50.0,
        k: 2.0,
        capacity: Some(100.0),
        demand: Some(20.0),
    };
    let fixed = Fixed {
        plan: make_plan(&inputs, &rb.plan),
        inputs,
        config: rb.plan.clone(),
        params: rb.params.clone(),
        slow_replica: None,
    };
    (rb, fixed)
}

#[tokio::test]
async fn a_gate_limit_step_in_shadow_sets_the_plans_limit_in_shadow_and_says_so() {
    let (rb, fixed) = shipped();
    let mut step = rb
        .steps
        .iter()
        .find(|s| matches!(&s.action, Action::GateLimit(a) if a.rate != crate::runbook::action::RateSetting::Unlimited))
        .expect("the shipped runbook sets a limit")
        .clone();
    let Action::GateLimit(a) = &mut step.action else {
        unreachable!()
    };
    a.shadow = true;
    let said = super::describe(&step, &fixed, &[], &rb).join(" ");
    assert!(said.contains("in shadow"), "{said}");
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::create(dir.path(), "run-shadow").unwrap();
    let platform = Arc::new(Recording::default());
    let changes = platform.changes.clone();
    let ctx = Arc::new(Ctx::new(
        rb.clone(),
        platform,
        Arc::new(NoMetrics),
        fixed,
        "run-shadow".into(),
        journal,
        RunOptions::default(),
        BTreeMap::new(),
    ));
    let done = perform(&ctx, &step, Tally::default()).await.unwrap();
    let changes = changes.lock().unwrap().clone();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert!(changes[0].ends_with("shadow=true"), "{changes:?}");
    assert!(format!("{done:?}").contains("in shadow"), "{done:?}");
}

#[tokio::test]
async fn an_action_whose_journal_record_cannot_be_written_does_not_run() {
    let (rb, fixed) = shipped();
    let full = std::fs::OpenOptions::new()
        .append(true)
        .open("/dev/full")
        .unwrap();
    let journal = Journal::on_file(full, "/dev/full".as_ref(), "run-full");
    let platform = Arc::new(Recording::default());
    let changes = platform.changes.clone();
    let ctx = Arc::new(Ctx::new(
        rb.clone(),
        platform,
        Arc::new(NoMetrics),
        fixed,
        "run-full".into(),
        journal,
        RunOptions::default(),
        BTreeMap::new(),
    ));
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
