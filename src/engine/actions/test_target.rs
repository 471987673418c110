//! A target for the actions' tests: a platform that records every call that would change
//! it, metric sources that say nothing or a fixed warm service, and what a run shows its
//! observer, so a test reads what the run log would say.

use super::Ctx;
use crate::engine::journal::Journal;
use crate::engine::progress::{Observer, ProgressEvent};
use crate::engine::vars::Fixed;
use crate::engine::RunOptions;
use crate::gate::limit::{Fill, Limit, LimitChange};
use crate::metrics::signal::{names, SignalSpec, Snapshot};
use crate::metrics::source::{MetricError, MetricSource};
use crate::plan::{make_plan, PlanInputs};
use crate::platform::{
    AdminOp, AdminReply, GateControl, LockGuard, LockHolder, Platform, PlatformError, Replica,
    ScrapeEndpoint,
};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// A target that records every call that would change it.
#[derive(Default)]
pub(super) struct Recording {
    pub changes: Arc<Mutex<Vec<String>>>,
    /// The gate's rate now (None: unlimited).
    pub rate: Arc<Mutex<Option<f64>>>,
    /// Replicas that answer not ready.
    pub not_ready: Vec<&'static str>,
    /// Whether the gate can fill a new limit's bucket (a local gate's admin API).
    pub fills: bool,
    /// Refuse the readmission's limits, so that a test stops a ramp at its first.
    pub refuse_readmit: bool,
    /// What each replica answers a drain (None: [`DRAIN_REPLY`]).
    pub drain_reply: Option<&'static str>,
}

/// A drain's answer from a service that keeps the answerable requests and had none.
pub(super) const DRAIN_REPLY: &str = r#"{"drained": 3, "kept": 0}"#;

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
        let fill = match change.fill {
            Fill::Carried => String::new(),
            Fill::Full => " filled".into(),
            Fill::Tokens(n) => format!(" filled with {n}"),
        };
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
        let body = match op {
            AdminOp::Drain(_) => self.drain_reply.unwrap_or(DRAIN_REPLY),
            AdminOp::Warm => "{}",
        };
        Ok(AdminReply::read(op, body))
    }
    fn gate(&self) -> Arc<dyn GateControl> {
        Arc::new(Recording {
            changes: self.changes.clone(),
            rate: self.rate.clone(),
            not_ready: self.not_ready.clone(),
            fills: self.fills,
            refuse_readmit: self.refuse_readmit,
            drain_reply: self.drain_reply,
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

pub(super) struct NoMetrics;

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
pub(super) struct Measured;

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

pub(super) fn fixed(rb: &crate::runbook::Runbook) -> Fixed {
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
pub(super) fn ctx_on(
    rb: &crate::runbook::Runbook,
    platform: Arc<dyn Platform>,
    journal: Journal,
    run_id: &str,
) -> Arc<Ctx> {
    ctx_with(rb, platform, Arc::new(NoMetrics), journal, run_id, None)
}

/// [`ctx_on`] reading `metrics`, showing what it does to `observer`.
pub(super) fn ctx_with(
    rb: &crate::runbook::Runbook,
    platform: Arc<dyn Platform>,
    metrics: Arc<dyn MetricSource>,
    journal: Journal,
    run_id: &str,
    observer: Option<Arc<dyn Observer>>,
) -> Arc<Ctx> {
    Arc::new(Ctx::new(
        rb.clone(),
        platform,
        metrics,
        fixed(rb),
        run_id.into(),
        journal,
        RunOptions {
            observer,
            ..RunOptions::default()
        },
        BTreeMap::new(),
    ))
}

/// Everything a run would show its observer, as the run log's lines.
#[derive(Default)]
pub(super) struct Heard(pub Mutex<Vec<String>>);

impl Observer for Heard {
    fn event(&self, _run_id: &str, e: &ProgressEvent) {
        if let ProgressEvent::Info { step, message } = e {
            self.0.lock().unwrap().push(format!("{step}: {message}"));
        }
    }
}

/// What the shipped runbook did up to its readmission's first limit.
pub(super) struct Readmission {
    /// Every call that changed the target.
    pub changes: Vec<String>,
    /// The `new` limit of each `gate.set_limit` the readmission started.
    pub new: Vec<serde_json::Value>,
    /// Every journal entry.
    pub journal: Vec<serde_json::Value>,
    /// The run log's lines.
    pub heard: Vec<String>,
}

/// The shipped runbook's block, drain, restart (if needed) and readmission on `platform`
/// (its readmission refused at the first limit, so the ramp stops there), reading a warm
/// service whose clients time out after 1 s.
pub(super) async fn first_readmission(platform: Recording) -> Readmission {
    let rb = crate::runbook::find("stuck-overload", &[]).unwrap().runbook;
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::create(dir.path(), "run-fill").unwrap();
    let platform = Recording {
        refuse_readmit: true,
        ..platform
    };
    let changes = platform.changes.clone();
    let heard = Arc::new(Heard::default());
    let ctx = ctx_with(
        &rb,
        Arc::new(platform),
        Arc::new(Measured),
        journal,
        "run-fill",
        Some(heard.clone()),
    );
    for name in [
        "block-at-edge",
        "drain-backlog",
        "batched-restart",
        "readmit",
    ] {
        let step = rb.steps.iter().find(|s| s.name == name).unwrap();
        let done = super::perform(&ctx, step, super::Tally::default()).await;
        assert_eq!(done.is_err(), name == "readmit", "{name}: {done:?}");
    }
    let text = std::fs::read_to_string(dir.path().join("run-fill.jsonl")).unwrap();
    let journal: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let new = journal
        .iter()
        .filter(|e| e["event"] == "action_started" && e["step"] == "readmit")
        .map(|e| e["new"].clone())
        .collect();
    let c = changes.lock().unwrap().clone();
    let heard = heard.0.lock().unwrap().clone();
    Readmission {
        changes: c,
        new,
        journal,
        heard,
    }
}
