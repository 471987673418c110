//! Fencing, against the fake API server: a controller acts only while it holds the
//! target's Lease. A run that loses it in the middle of a restart a disruption budget
//! blocks makes no API write after it knows (the request log says so), runs no on_failure
//! step (the shipped hold writes the gate's ConfigMap), and says what it left where in one
//! Event. A renewal stuck in flight does not carry the holder past its renew deadline. A
//! stale controller's limit write is refused, not merely late.

use crate::kube_engine::pods_answer;
use crate::kube_platform::{holder, options};
use crate::support::engine::fixed_inputs;
use crate::support::fixture_path;
use crate::support::kube::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{Api, ListParams, PostParams};
use recover::engine::{self, Outcome, RunRequest, StepOutcome};
use recover::gate::limit::Limit;
use recover::metrics::scrape::ScrapeSource;
use recover::platform::kube::fence::FENCE_ANNOTATION;
use recover::platform::kube::KubePlatform;
use recover::platform::{Platform, PlatformError, PlatformFetch};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const LEASE: &str = "recover-recover-demo-config-service";

fn request(c: &FakeCluster, dir: &std::path::Path) -> RunRequest {
    let mut o = options("controller");
    o.lease_duration = Duration::from_secs(3);
    let platform: Arc<dyn Platform> = Arc::new(KubePlatform::new(c.client.clone(), o));
    let metrics = Arc::new(ScrapeSource::new(Arc::new(PlatformFetch {
        platform: platform.clone(),
    })));
    let runbook =
        recover::runbook::find(&fixture_path("runbooks/kube-restart-hold.yaml"), &[]).unwrap();
    RunRequest {
        runbook,
        platform,
        metrics,
        options: fixed_inputs(dir),
    }
}

/// Someone else writes itself into the target's lease (the fake's bare store: not logged).
async fn take_the_lease(c: &FakeCluster) {
    let leases: Api<Lease> = Api::namespaced(c.fake.clone(), NS);
    let mut l = leases.get(LEASE).await.unwrap();
    let spec = l.spec.as_mut().unwrap();
    spec.holder_identity = Some("another-controller".into());
    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    leases
        .replace(LEASE, &PostParams::default(), &l)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_loses_its_lease_in_a_blocked_restart_writes_nothing_after_and_says_so_once() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    c.set_pdb(0, false).await; // every eviction refused: the restart waits, retrying
    let stop = CancellationToken::new();
    pods_answer(&c, &stop).await;
    let dir = tempfile::tempdir().unwrap();
    let run = tokio::spawn(engine::run(
        request(&c, dir.path()),
        CancellationToken::new(),
    ));
    let blocked =
        crate::support::eventually(Duration::from_secs(30), || async { c.refusals() >= 2 }).await;
    assert!(blocked, "the restart never got blocked by the budget");
    let taken_at = c.recorded().len();
    take_the_lease(&c).await;
    let report = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("the run stopped")
        .unwrap()
        .unwrap();
    assert_eq!(
        report.outcome,
        Outcome::Aborted,
        "{}",
        report.summary_table()
    );
    let outcomes: Vec<(&str, StepOutcome)> = report
        .steps
        .iter()
        .map(|s| (s.name.as_str(), s.outcome))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("drain-backlog", StepOutcome::Succeeded),
            ("batched-restart", StepOutcome::Aborted),
            ("hold-at-safe-rate", StepOutcome::Aborted),
            ("say-so", StepOutcome::Aborted),
        ],
        "no on_failure step runs after the loss"
    );
    // Give anything still in flight time to show up in the log.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log = c.recorded();
    // The run learns of the loss from its next read of the lease.
    let noticed = log
        .iter()
        .enumerate()
        .skip(taken_at)
        .find(|(_, r)| r.who == OPERATOR && r.method == "GET" && r.path.ends_with(LEASE))
        .map(|(i, _)| i)
        .expect("the lease was read again after it was taken");
    let writes: Vec<String> = log[noticed..]
        .iter()
        .filter(|r| r.who == OPERATOR && r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        writes,
        [format!("POST /api/v1/namespaces/{NS}/events")],
        "after the loss: exactly one write, the Event saying so"
    );
    let events: Api<Event> = Api::namespaced(c.fake.clone(), NS);
    let lost: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("RecoverLockLost"))
        .filter_map(|e| e.message)
        .collect();
    assert_eq!(lost.len(), 1, "{lost:?}");
    let m = &lost[0];
    for says in [
        "lost",
        "batched-restart",
        "not restarted",
        "recover-gate-limit",
        "journal",
    ] {
        assert!(m.contains(says), "the event says {says}: {m}");
    }
    let cms: Api<ConfigMap> = Api::namespaced(c.fake.clone(), NS);
    let limit = cms
        .get("recover-gate-limit")
        .await
        .unwrap()
        .data
        .unwrap_or_default();
    assert!(limit.is_empty(), "the hold was not written: {limit:?}");
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_renewal_gives_the_lease_up_before_anyone_can_take_it_over() {
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    let mut o = options("alice");
    o.lease_duration = Duration::from_secs(3);
    let a = KubePlatform::new(c.client.clone(), o.clone());
    let guard = a.lock(&holder("run-a", "alice")).await.unwrap();
    let lost = guard.lost();
    // The API server stops answering alice's lease calls: her renewals hang in flight.
    c.stall_leases();
    o.identity = "bob".into();
    let b = KubePlatform::new(c.admin.clone(), o);
    let bob = b
        .lock(&holder("run-b", "bob"))
        .await
        .expect("bob takes over after a lease");
    assert!(
        lost.is_cancelled(),
        "alice still thought she held the lease when bob took it over"
    );
    // And alice's platform refuses to act from then on.
    match a.restart("anything").await {
        Err(PlatformError::LockLost { .. }) => {}
        other => panic!("expected LockLost, got {other:?}"),
    }
    drop(bob);
    drop(guard);
}

fn limit(rate: f64) -> Limit {
    Limit {
        rate_per_s: Some(rate),
        burst: 5,
        max_in_flight: None,
        note: None,
        shadow: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_controller_cannot_overwrite_a_limit_written_under_a_later_lease() {
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    let mut o = options("alice");
    o.lease_duration = Duration::from_secs(30); // alice does not notice by timing
    o.gate_apply_timeout = Duration::from_millis(200);
    let a = KubePlatform::new(c.client.clone(), o.clone());
    let _ga = a.lock(&holder("run-a", "alice")).await.unwrap();
    let _ = a.gate().set_limit(&limit(10.0)).await; // written; no gates to apply it
                                                    // Bob takes the lease over (as after a partition) and writes his limit.
    take_the_lease(&c).await;
    let leases: Api<Lease> = Api::namespaced(c.fake.clone(), NS);
    let mut l = leases.get(LEASE).await.unwrap();
    l.spec.as_mut().unwrap().holder_identity = Some("bob".into());
    l.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("recover.dev/run-id".into(), "run-b".into());
    leases
        .replace(LEASE, &PostParams::default(), &l)
        .await
        .unwrap();
    o.identity = "bob".into();
    let b = KubePlatform::new(c.client.clone(), o);
    let _gb = b.lock(&holder("run-b", "bob")).await.unwrap();
    let _ = b.gate().set_limit(&limit(20.0)).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.fake.clone(), NS);
    let cm = cms.get("recover-gate-limit").await.unwrap();
    let fence = cm.metadata.annotations.unwrap_or_default()[FENCE_ANNOTATION].clone();
    assert!(fence.contains("/1/bob"), "{fence}");
    // Alice, not knowing yet, tries again: refused, and the limit stays bob's.
    match a.gate().set_limit(&limit(10.0)).await {
        Err(PlatformError::LockLost { why, .. }) => assert!(why.contains("later holding"), "{why}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    let data = cms.get("recover-gate-limit").await.unwrap().data.unwrap();
    assert!(data["limit.json"].contains("20"), "{data:?}");
}
