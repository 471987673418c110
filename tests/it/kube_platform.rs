//! The kube platform against an in-memory cluster (kube-fake-client plus the Eviction API,
//! pod proxy and ReplicaSet behaviour it lacks, see `support::kube`): batched restarts that
//! honour the disruption budget and wait for new pods, the Lease lock, Events, and a run
//! resumed by a second instance after a crash mid-batch.

use crate::support::eventually;
use crate::support::kube::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};
use recover::platform::kube::disrupt::{ApiDisruptor, Disruptor};
use recover::platform::kube::rollout::{lease_decision, EvictOutcome, LeaseDecision, PodView};
use recover::platform::kube::{KubeOptions, KubePlatform, Workload};
use recover::platform::{LockHolder, Platform, PlatformError, StepEvent};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

fn options(identity: &str) -> KubeOptions {
    let mut o = KubeOptions::new(NS, Workload::Deployment(DEPLOY.to_string()));
    o.identity = identity.to_string();
    o.evict_retry = Duration::from_millis(100);
    o.evict_timeout = Duration::from_secs(20);
    o.poll = Duration::from_millis(50);
    o.lease_duration = Duration::from_secs(1);
    o
}

/// Whether `who` running `run` would take the target's Lease over now, by the platform's
/// own rule: its holder stopped renewing it and it has run out.
async fn lease_expired_for(c: &FakeCluster, run: &str, who: &str) -> bool {
    let leases: Api<Lease> = Api::namespaced(c.fake.clone(), NS);
    let lease = leases
        .get("recover-recover-demo-config-service")
        .await
        .unwrap();
    let view = recover::platform::kube::lease::view(&lease);
    lease_decision(Some(&view), who, run, SystemTime::now()) == LeaseDecision::TakeOver
}

fn holder(run: &str, who: &str) -> LockHolder {
    LockHolder {
        run_id: run.to_string(),
        identity: who.to_string(),
    }
}

/// Ready, non-terminating pods of the target that were not there at the start.
async fn ready_new(c: &FakeCluster) -> usize {
    c.target_pods()
        .await
        .iter()
        .map(PodView::of)
        .filter(|p| p.ready && !p.terminating && !p.name.contains("-old"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_restart_honours_batch_size_budget_and_waits_for_new_pods() {
    let c = FakeCluster::start(4, Duration::from_millis(300)).await;
    c.set_max_unavailable(1); // the budget lets one pod go at a time: the 2nd eviction waits
    let p = KubePlatform::new(c.client.clone(), options("alice"));
    let _guard = p.lock(&holder("run-batch", "alice")).await.expect("lock");
    let originals: BTreeSet<String> = p
        .replicas()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(originals.len(), 4);

    let mut batches = Vec::new();
    loop {
        let batch = p.next_batch(2).await.expect("next batch");
        if batch.is_empty() {
            break;
        }
        assert!(batch.len() <= 2, "batch {batch:?} larger than 2");
        for pod in &batch {
            p.restart(pod).await.expect("restart");
        }
        p.wait_ready(&batch, Duration::from_secs(20))
            .await
            .expect("batch ready");
        // Waited for: every pod evicted so far has a ready replacement now.
        let evicted = c.evictions().len();
        assert_eq!(evicted, 2 * (batches.len() + 1));
        assert!(
            ready_new(&c).await >= evicted,
            "wait_ready returned before the replacements were ready"
        );
        batches.push(batch);
    }
    assert_eq!(batches.len(), 2);
    let evicted: BTreeSet<String> = c.evictions().into_iter().collect();
    assert_eq!(
        evicted, originals,
        "each original pod evicted exactly once, no replacement touched"
    );
    assert_eq!(c.evictions().len(), 4);
    assert!(
        c.refusals() > 0,
        "the budget should have refused (429) and the platform retried"
    );
    let now: Vec<String> = p
        .replicas()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.ready)
        .map(|r| r.id)
        .collect();
    assert_eq!(now.len(), 4);
    assert!(now.iter().all(|n| !originals.contains(n)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_eviction_times_out_unless_delete_is_allowed() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    c.set_max_unavailable(0); // a budget that never allows a disruption
    let mut o = options("alice");
    o.evict_timeout = Duration::from_millis(600);
    let p = KubePlatform::new(c.client.clone(), o.clone());
    let pod = p.next_batch(1).await.unwrap().remove(0);
    match p.restart(&pod).await {
        Err(PlatformError::Timeout { what, .. }) => assert!(
            what.contains(&pod) && what.contains("disruption budget"),
            "{what}"
        ),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(c.evictions().is_empty());

    o.allow_delete_fallback = true;
    let p = KubePlatform::new(c.client.clone(), o);
    p.restart(&pod)
        .await
        .expect("deleted as the stated fallback");
    let names: Vec<String> = c
        .target_pods()
        .await
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert!(
        !names.contains(&pod),
        "{pod} should be gone, pods: {names:?}"
    );
    let events: Api<Event> = Api::namespaced(c.fake.clone(), NS);
    let evs = events.list(&ListParams::default()).await.unwrap().items;
    assert!(
        evs.iter().any(|e| e.type_.as_deref() == Some("Warning")
            && e.message.as_deref().unwrap_or_default().contains(&pod)),
        "the fallback is announced as an Event"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lease_refuses_naming_its_holder_and_expires_after_a_crash() {
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    let a = KubePlatform::new(c.client.clone(), options("alice@laptop"));
    let b = KubePlatform::new(c.client.clone(), options("bob@desk"));
    let guard = a
        .lock(&holder("run-a", "alice@laptop"))
        .await
        .expect("alice locks");
    match b.lock(&holder("run-b", "bob@desk")).await {
        Err(PlatformError::LockHeld {
            holder,
            run_id,
            target,
        }) => {
            assert_eq!(
                (holder.as_str(), run_id.as_str()),
                ("alice@laptop", "run-a")
            );
            assert_eq!(target, "kube:recover-demo/config-service");
        }
        Err(e) => panic!("expected LockHeld, got {e}"),
        Ok(_) => panic!("expected LockHeld, got the lock"),
    }
    // Held for longer than its duration because it is renewed.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(matches!(
        b.lock(&holder("run-b", "bob@desk")).await,
        Err(PlatformError::LockHeld { .. })
    ));
    guard.release().await.expect("release");
    let g = b
        .lock(&holder("run-b", "bob@desk"))
        .await
        .expect("free after release");
    // Bob crashes (guard dropped without release): Alice must wait for expiry.
    drop(g);
    assert!(matches!(
        a.lock(&holder("run-c", "alice@laptop")).await,
        Err(PlatformError::LockHeld { .. })
    ));
    eventually(Duration::from_secs(10), || {
        lease_expired_for(&c, "run-c", "alice@laptop")
    })
    .await;
    let _g = a
        .lock(&holder("run-c", "alice@laptop"))
        .await
        .expect("taken over after expiry");
    let leases: Api<Lease> = Api::namespaced(c.fake.clone(), NS);
    let lease = leases
        .get("recover-recover-demo-config-service")
        .await
        .unwrap();
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("alice@laptop"));
    assert!(spec.lease_transitions.unwrap_or(0) >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_events_land_on_the_target_deployment() {
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    let p = KubePlatform::new(c.client.clone(), options("alice"));
    for (step, phase) in [("gate", "started"), ("gate", "done"), ("restart", "failed")] {
        p.record_event(&StepEvent {
            run_id: "run-ev".into(),
            step: step.into(),
            phase: phase.into(),
            message: format!("{step} {phase}"),
        })
        .await
        .expect("event");
    }
    let events: Api<Event> = Api::namespaced(c.fake.clone(), NS);
    let evs = events.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(evs.len(), 3);
    for e in &evs {
        assert_eq!(e.involved_object.kind.as_deref(), Some("Deployment"));
        assert_eq!(e.involved_object.name.as_deref(), Some(DEPLOY));
        assert!(e
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("run run-ev"));
    }
    let reasons: BTreeSet<_> = evs.iter().filter_map(|e| e.reason.clone()).collect();
    assert!(
        reasons.contains("RecoverStarted") && reasons.contains("RecoverFailed"),
        "{reasons:?}"
    );
    let warnings = evs
        .iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .count();
    assert_eq!(warnings, 1, "only the failed step is a Warning");
}

/// An in-test [`Disruptor`]: the real API one, counting what it is asked to evict.
struct Counting {
    inner: ApiDisruptor,
    asked: Arc<Mutex<Vec<String>>>,
}

#[async_trait::async_trait]
impl Disruptor for Counting {
    async fn evict(&self, pod: &str) -> Result<EvictOutcome, PlatformError> {
        self.asked.lock().unwrap().push(pod.to_string());
        self.inner.evict(pod).await
    }
    async fn delete(&self, pod: &str) -> Result<(), PlatformError> {
        self.inner.delete(pod).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_instance_resumes_a_crashed_rollout_without_evicting_finished_pods() {
    let c = FakeCluster::start(4, Duration::from_millis(200)).await;
    c.set_max_unavailable(2);
    let asked = Arc::new(Mutex::new(Vec::new()));
    let counting = |asked: &Arc<Mutex<Vec<String>>>| {
        Arc::new(Counting {
            inner: ApiDisruptor::new(c.client.clone(), NS),
            asked: asked.clone(),
        })
    };
    let a = KubePlatform::new(c.client.clone(), options("alice@laptop"))
        .with_disruptor(counting(&asked));
    let guard = a.lock(&holder("run-r", "alice@laptop")).await.unwrap();
    let first = a.next_batch(2).await.unwrap();
    for pod in &first {
        a.restart(pod).await.unwrap();
    }
    a.wait_ready(&first, Duration::from_secs(20)).await.unwrap();
    a.mirror_journal(
        "run-r",
        "{\"step\":\"restart\",\"batch\":1,\"done\":true}\n",
    )
    .await
    .unwrap();
    let second = a.next_batch(2).await.unwrap();
    assert_eq!(second.len(), 2);
    a.restart(&second[0]).await.unwrap(); // ... and the machine dies here, mid-batch.
    drop(guard);
    drop(a);

    // The crashed holder's lease expires.
    eventually(Duration::from_secs(10), || {
        lease_expired_for(&c, "run-r", "bob@desk")
    })
    .await;
    let asked_b = Arc::new(Mutex::new(Vec::new()));
    let b =
        KubePlatform::new(c.client.clone(), options("bob@desk")).with_disruptor(counting(&asked_b));
    let _g = b
        .lock(&holder("run-r", "bob@desk"))
        .await
        .expect("take over the expired lease");
    let journal = b
        .fetch_journal("run-r")
        .await
        .unwrap()
        .expect("mirrored journal");
    assert!(journal.contains("\"batch\":1"));
    let state = b
        .rollout_state()
        .expect("rollout state adopted from the cluster");
    assert_eq!(state.evicted.len(), 3);
    // Only the one original pod never evicted is left to do.
    assert_eq!(b.next_batch(2).await.unwrap(), vec![second[1].clone()]);
    // The engine resumes as its planner does (engine::batches::remaining): its journal
    // says which replicas it restarted and which were confirmed ready; it lists replicas by
    // their names now (replacements have new names) and restarts, in batches of 2, every
    // listed replica it has not restarted, after waiting for the restarted-not-ready ones.
    let restarted: BTreeSet<String> = first.iter().chain(&second[..1]).cloned().collect();
    let confirmed: BTreeSet<String> = first.iter().cloned().collect();
    let mut ids: Vec<String> = b
        .replicas()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    ids.sort();
    let await_ready: Vec<String> = ids
        .iter()
        .filter(|r| restarted.contains(*r) && !confirmed.contains(*r))
        .cloned()
        .collect();
    let todo: Vec<String> = ids
        .iter()
        .filter(|r| !restarted.contains(*r))
        .cloned()
        .collect();
    assert!(
        todo.len() > 1,
        "the resumed engine lists replacements too: {todo:?}"
    );
    if !await_ready.is_empty() {
        b.wait_ready(&await_ready, Duration::from_secs(20))
            .await
            .unwrap();
    }
    for batch in todo.chunks(2) {
        for pod in batch {
            b.restart(pod).await.unwrap();
        }
        b.wait_ready(batch, Duration::from_secs(20)).await.unwrap();
    }
    assert_eq!(
        asked_b.lock().unwrap().clone(),
        vec![second[1].clone()],
        "only the untouched original is evicted"
    );
    let evicted = c.evictions();
    let unique: BTreeSet<&String> = evicted.iter().collect();
    assert_eq!(
        (evicted.len(), unique.len()),
        (4, 4),
        "no pod evicted twice: {evicted:?}"
    );
    assert!(
        evicted.iter().all(|n| n.contains("-old")),
        "no replacement evicted: {evicted:?}"
    );
    assert_eq!(ready_new(&c).await, 4);
    assert!(b.next_batch(2).await.unwrap().is_empty());
}
