//! The kube platform's batched restart against a fake API server that behaves like the
//! real one (`support::kube`): PodDisruptionBudgets with their real refusals, graceful
//! termination, pod phases, replacements that take their time (or never come), and a run
//! resumed by a second instance after a crash mid-batch.

use crate::support::kube::*;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use recover::platform::kube::decide::{EvictOutcome, PodRef, PodView};
use recover::platform::kube::disrupt::{ApiDisruptor, Disruptor};
use recover::platform::kube::{KubeOptions, KubePlatform, Reach, Workload};
use recover::platform::{LockHolder, Platform, PlatformError};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub fn options(identity: &str) -> KubeOptions {
    let mut o = KubeOptions::new(NS, Workload::Deployment(DEPLOY.to_string()));
    o.identity = identity.to_string();
    o.reach = Reach::ApiProxy;
    o.evict_retry = Duration::from_millis(100);
    o.evict_timeout = Duration::from_secs(20);
    o.poll = Duration::from_millis(50);
    o.lease_duration = Duration::from_secs(1);
    o
}

pub fn holder(run: &str, who: &str) -> LockHolder {
    LockHolder {
        run_id: run.to_string(),
        identity: who.to_string(),
    }
}

/// Ready, running pods of the target that were not there at the start.
async fn ready_new(c: &FakeCluster) -> usize {
    c.target_pods()
        .await
        .iter()
        .map(PodView::of)
        .filter(|p| p.serving() && !p.name.contains("-old"))
        .count()
}

fn evictions_posted(c: &FakeCluster) -> usize {
    c.recorded()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/eviction"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_restart_honours_batch_size_budget_and_waits_for_new_pods() {
    // Replacements get ready after the evicted pods are gone: the budget must refuse the
    // second eviction of a batch until the first replacement is ready.
    let c = FakeCluster::start(4, Duration::from_millis(900)).await;
    c.set_grace(Duration::from_millis(400)); // evicted pods linger, terminating
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
        let evicted = c.evictions().len();
        assert_eq!(evicted, 2 * (batches.len() + 1));
        assert!(
            ready_new(&c).await >= evicted,
            "returned before the replacements were ready"
        );
        batches.push(batch);
    }
    assert_eq!(batches.len(), 2);
    let evicted: BTreeSet<String> = c.evictions().into_iter().collect();
    assert_eq!(
        evicted, originals,
        "each original evicted once, no replacement touched"
    );
    assert_eq!(c.evicted_uids().len(), 4);
    assert!(
        c.refusals() > 0,
        "the budget (one at a time) refused the second of each batch"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_eviction_is_retried_on_our_schedule_and_names_the_budget_and_the_fix() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    c.set_pdb(0, false).await; // a budget that allows no disruption of ready pods
    let mut o = options("alice");
    o.evict_timeout = Duration::from_millis(700);
    o.evict_retry = Duration::from_millis(200);
    let p = KubePlatform::new(c.client.clone(), o.clone());
    let pod = p.next_batch(1).await.unwrap().remove(0);
    match p.restart(&pod).await {
        Err(PlatformError::Timeout { what, .. }) => {
            assert!(what.contains(&pod), "{what}");
            assert!(
                what.contains("PodDisruptionBudget config-service"),
                "{what}"
            );
            assert!(
                what.contains("needs 2 healthy pods and has 2 currently"),
                "{what}"
            );
            assert!(what.contains("unhealthyPodEvictionPolicy"), "{what}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    // Each attempt is one request, spaced by our own 200 ms inside the 700 ms deadline:
    // no hidden retry layer multiplying them.
    let attempts = evictions_posted(&c);
    assert!((2..=4).contains(&attempts), "{attempts} eviction requests");
    assert!(c.evictions().is_empty());

    // The fallback is opt-in twice: the option, and a Role rule the manifests do not ship.
    o.allow_delete_fallback = true;
    c.grant(OPERATOR, "", "pods", "delete");
    let p = KubePlatform::new(c.client.clone(), o);
    p.restart(&pod)
        .await
        .expect("deleted as the stated fallback");
    let events: Api<Event> = Api::namespaced(c.fake.clone(), NS);
    let evs = events.list(&ListParams::default()).await.unwrap().items;
    assert!(
        evs.iter().any(|e| e.type_.as_deref() == Some("Warning")
            && e.message.as_deref().unwrap_or_default().contains(&pod)),
        "the fallback is announced as an Event"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_retry_after_wins_while_the_budget_is_being_processed() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    c.pdb_catching_up(Duration::from_millis(1500), 1);
    let mut o = options("alice");
    o.evict_retry = Duration::from_millis(50);
    let p = KubePlatform::new(c.client.clone(), o);
    let pod = p.next_batch(1).await.unwrap().remove(0);
    p.restart(&pod)
        .await
        .expect("evicted once the budget caught up");
    // Told to wait a second each time: two or three attempts, not thirty at our 50 ms.
    let attempts = evictions_posted(&c);
    assert!((2..=4).contains(&attempts), "{attempts} eviction requests");
    assert_eq!(c.evictions(), vec![pod]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_under_two_budgets_fails_at_once_with_the_fix() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    let budgets: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::namespaced(c.fake.clone(), NS);
    budgets
        .create(&PostParams::default(), &pdb("overlap", DEPLOY, 1, true))
        .await
        .unwrap();
    let p = KubePlatform::new(c.client.clone(), options("alice"));
    let pod = p.next_batch(1).await.unwrap().remove(0);
    match p.restart(&pod).await {
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("more than one PodDisruptionBudget"), "{msg}");
            assert!(msg.contains("disjoint"), "{msg}");
        }
        Ok(()) => panic!("evicted a pod under two budgets"),
    }
    assert_eq!(evictions_posted(&c), 1, "never retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_ready_pods_are_evictable_only_with_always_allow() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    // Overload: every pod fails its readiness probe.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.fake.clone(), NS);
    for p in c.target_pods().await {
        let name = p.metadata.name.clone().unwrap();
        let mut p = p;
        p.metadata.deletion_timestamp = None;
        p.status = pod(DEPLOY, HASH, "x", DEPLOY, false).status;
        pods.replace_status(&name, &PostParams::default(), &p)
            .await
            .unwrap();
    }
    c.set_pdb(1, false).await; // the default policy, IfHealthyBudget
    let mut o = options("alice");
    o.evict_timeout = Duration::from_millis(400);
    let p = KubePlatform::new(c.client.clone(), o.clone());
    let pod = p.next_batch(1).await.unwrap().remove(0);
    let e = p.restart(&pod).await.unwrap_err().to_string();
    assert!(e.contains("AlwaysAllow"), "the fix is named: {e}");
    c.set_pdb(1, true).await; // as the manifests ship it
    let p = KubePlatform::new(c.client.clone(), o);
    p.restart(&pod)
        .await
        .expect("a pod that serves nothing may always go");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_and_pending_pods_are_not_replicas_and_get_no_calls() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    c.add_pod(with_phase(
        pod(DEPLOY, HASH, "evicted", DEPLOY, false),
        "Failed",
    ))
    .await;
    // A new revision's first pod, never scheduled (another ReplicaSet of the Deployment).
    c.add_pod(with_phase(
        pod(DEPLOY, "5c4b3a", "pending", DEPLOY, false),
        "Pending",
    ))
    .await;
    let p = KubePlatform::new(c.client.clone(), options("alice"));
    let ids: Vec<String> = p
        .replicas()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.iter().all(|i| i.contains("-old")), "{ids:?}");
    let eps = p.scrape_endpoints().await.unwrap();
    assert!(eps
        .iter()
        .all(|e| !e.instance.contains("evicted") && !e.instance.contains("pending")));
    let pending = format!("{DEPLOY}-5c4b3a-pending");
    let e = p
        .admin(
            &pending,
            recover::platform::AdminOp::Drain(recover::platform::DrainKeep::None),
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("Pending"), "{e}");
    assert!(
        !c.recorded()
            .iter()
            .any(|r| r.path.contains("/proxy") && r.path.contains("pending")),
        "no admin call went to the Pending pod"
    );
    // The rollout covers the two Running pods only and never waits for the others.
    let mut all = Vec::new();
    loop {
        let batch = p.next_batch(1).await.unwrap();
        if batch.is_empty() {
            break;
        }
        for pod in &batch {
            p.restart(pod).await.unwrap();
        }
        p.wait_ready(&batch, Duration::from_secs(20))
            .await
            .expect("not waiting on Failed/Pending");
        all.extend(batch);
    }
    assert_eq!(all.len(), 2, "{all:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacements_that_never_get_ready_are_named_when_the_wait_ends() {
    for (mode, says) in [
        (Replacement::StaysPending, "Pending"),
        (Replacement::CrashLoop, "CrashLoopBackOff"),
    ] {
        let c = FakeCluster::start(2, Duration::from_millis(100)).await;
        c.set_replacements(mode);
        let p = KubePlatform::new(c.client.clone(), options("alice"));
        let batch = p.next_batch(1).await.unwrap();
        p.restart(&batch[0]).await.unwrap();
        match p.wait_ready(&batch, Duration::from_millis(800)).await {
            Err(PlatformError::Timeout { what, .. }) => {
                assert!(
                    what.contains("0 of 1 new pods ready") && what.contains(says),
                    "{what}"
                )
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
    }
}

/// An in-test [`Disruptor`]: the real API one, counting what it is asked to evict.
struct Counting {
    inner: ApiDisruptor,
    asked: Arc<Mutex<Vec<String>>>,
}

#[async_trait::async_trait]
impl Disruptor for Counting {
    async fn evict(&self, pod: &PodRef) -> Result<EvictOutcome, PlatformError> {
        self.asked.lock().unwrap().push(pod.name.clone());
        self.inner.evict(pod).await
    }
    async fn delete(&self, pod: &PodRef) -> Result<(), PlatformError> {
        self.inner.delete(pod).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_instance_resumes_a_crashed_rollout_without_evicting_finished_pods() {
    let c = FakeCluster::start(4, Duration::from_millis(200)).await;
    c.set_pdb(2, true).await;
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
    let second = a.next_batch(2).await.unwrap();
    assert_eq!(second.len(), 2);
    a.restart(&second[0]).await.unwrap(); // ... and the machine dies here, mid-batch.
    assert!(a.flush_mirror(Duration::from_secs(5)).await);
    drop(guard);
    drop(a);

    let asked_b = Arc::new(Mutex::new(Vec::new()));
    let b =
        KubePlatform::new(c.client.clone(), options("bob@desk")).with_disruptor(counting(&asked_b));
    let _g = b
        .lock(&holder("run-r", "bob@desk"))
        .await
        .expect("take over the expired lease");
    let state = b
        .rollout_state()
        .expect("rollout state adopted from the cluster");
    assert_eq!(state.evicted.len(), 3);
    assert_eq!(b.next_batch(2).await.unwrap(), vec![second[1].clone()]);
    // The engine lists replicas by their names now (replacements have new names) and
    // restarts every one it has not restarted: only the untouched original is evicted.
    let restarted: BTreeSet<String> = first.iter().chain(&second[..1]).cloned().collect();
    let todo: Vec<String> = b
        .replicas()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .filter(|r| !restarted.contains(r))
        .collect();
    assert!(
        todo.len() > 1,
        "the resumed engine lists replacements too: {todo:?}"
    );
    for batch in todo.chunks(2) {
        for pod in batch {
            b.restart(pod).await.unwrap();
        }
        b.wait_ready(batch, Duration::from_secs(20)).await.unwrap();
    }
    assert_eq!(asked_b.lock().unwrap().clone(), vec![second[1].clone()]);
    let uids = c.evicted_uids();
    let unique: BTreeSet<&String> = uids.iter().collect();
    assert_eq!((uids.len(), unique.len()), (4, 4), "no pod evicted twice");
    assert!(c.evictions().iter().all(|n| n.contains("-old")));
    assert_eq!(ready_new(&c).await, 4);
}
