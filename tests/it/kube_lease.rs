//! The per-target Lease and the Events, against the fake API server: a held lease refuses
//! naming its holder, expires by *our* clock only after we watched it stay unchanged for a
//! whole lease, and a holder that loses it learns so at once. Events name their object
//! with its UID, for a Deployment and for a StatefulSet found by selector.

use crate::kube_platform::{holder, options};
use crate::support::eventually;
use crate::support::kube::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use recover::platform::kube::{KubePlatform, Workload};
use recover::platform::{Platform, PlatformError, StepEvent};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const LEASE: &str = "recover-recover-demo-config-service";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lease_refuses_naming_its_holder_and_is_taken_over_only_after_a_crash() {
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
    guard.release().await.expect("release");
    let g = b
        .lock(&holder("run-b", "bob@desk"))
        .await
        .expect("free after release");
    // Bob crashes (guard dropped without release): Alice takes over once she has watched
    // the lease stay unchanged for its duration (1 s here), not before.
    drop(g);
    let started = Instant::now();
    let _g = a
        .lock(&holder("run-c", "alice@laptop"))
        .await
        .expect("taken over after expiry");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "taken over before a whole lease"
    );
    let leases: Api<Lease> = Api::namespaced(c.fake.clone(), NS);
    let spec = leases.get(LEASE).await.unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("alice@laptop"));
    assert!(spec.lease_transitions.unwrap_or(0) >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_lease_is_taken_learns_it_at_once() {
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    let mut o = options("alice@laptop");
    o.lease_duration = Duration::from_secs(3);
    let a = KubePlatform::new(c.client.clone(), o);
    let guard = a.lock(&holder("run-a", "alice@laptop")).await.unwrap();
    let lost = guard.lost();
    assert!(!lost.is_cancelled());
    // Another controller, wrongly or after a partition, writes itself in.
    let leases: Api<Lease> = Api::namespaced(c.fake.clone(), NS);
    let mut l = leases.get(LEASE).await.unwrap();
    l.spec.as_mut().unwrap().holder_identity = Some("mallory".into());
    leases
        .replace(LEASE, &PostParams::default(), &l)
        .await
        .unwrap();
    let noticed = eventually(Duration::from_secs(3), || async { lost.is_cancelled() }).await;
    assert!(noticed, "the guard never reported the lost lease");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_events_name_the_deployment_by_uid() {
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
    assert!(p.flush_events(Duration::from_secs(10)).await);
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(c.fake.clone(), NS);
    let uid = deployments.get(DEPLOY).await.unwrap().metadata.uid.unwrap();
    let events: Api<Event> = Api::namespaced(c.fake.clone(), NS);
    let evs = events.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(evs.len(), 3);
    for e in &evs {
        assert_eq!(e.involved_object.kind.as_deref(), Some("Deployment"));
        assert_eq!(e.involved_object.name.as_deref(), Some(DEPLOY));
        assert_eq!(e.involved_object.uid.as_deref(), Some(uid.as_str()));
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
    // The summary outlives the events' TTL: it is in the journal mirror.
    assert!(p.flush_mirror(Duration::from_secs(5)).await);
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(c.fake.clone(), NS);
    let data = cms.get("recover-journal").await.unwrap().data.unwrap();
    let summary = &data["run-ev.summary.json"];
    assert!(
        summary.contains("\"phase\":\"failed\"") && summary.contains("restart failed"),
        "{summary}"
    );
}

/// A StatefulSet `web` with two ready pods, found by selector.
async fn statefulset(c: &FakeCluster) -> String {
    let sts: k8s_openapi::api::apps::v1::StatefulSet = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"serviceName": "web", "selector": {"matchLabels": {"app.kubernetes.io/name": "web"}},
            "template": {"metadata": {"labels": {"app.kubernetes.io/name": "web"}},
                "spec": {"containers": [{"name": "c", "image": "recover:0.1.0"}]}}}
    }))
    .unwrap();
    let api: Api<k8s_openapi::api::apps::v1::StatefulSet> = Api::namespaced(c.fake.clone(), NS);
    let uid = api
        .create(&PostParams::default(), &sts)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    for i in 0..2 {
        c.add_pod(web_pod(i, &uid, true)).await;
    }
    uid
}

fn web_pod(i: usize, owner_uid: &str, ready: bool) -> k8s_openapi::api::core::v1::Pod {
    let mut p = pod("x", "y", "z", "web", ready);
    p.metadata.name = Some(format!("web-{i}"));
    p.metadata.labels = Some([("app.kubernetes.io/name".to_string(), "web".to_string())].into());
    p.metadata.owner_references = Some(vec![serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": owner_uid, "controller": true
    }))
    .unwrap()]);
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statefulset_by_selector_restarts_each_pod_once_though_names_come_back() {
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    let owner_uid = statefulset(&c).await;
    // The shipped Role names the demo target's lease only: this target's is added, as
    // docs/guide/kubernetes.md tells an operator to.
    c.grant(OPERATOR, "coordination.k8s.io", "leases", "get");
    c.grant(OPERATOR, "coordination.k8s.io", "leases", "update");
    let mut o = options("alice");
    o.workload = Workload::Selector("app.kubernetes.io/name=web".into());
    let p = KubePlatform::new(c.client.clone(), o);
    let _g = p.lock(&holder("run-sts", "alice")).await.unwrap();
    let batch = p.next_batch(1).await.unwrap();
    assert_eq!(batch, vec!["web-0"]);
    p.restart("web-0").await.unwrap();
    // The StatefulSet controller brings web-0 back: same name, new UID, not ready yet.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.fake.clone(), NS);
    let back = eventually(Duration::from_secs(5), || async {
        pods.get_opt("web-0").await.unwrap().is_none()
    })
    .await;
    assert!(back, "web-0 never finished terminating");
    c.add_pod(web_pod(0, &owner_uid, false)).await;
    assert!(
        p.wait_ready(&batch, Duration::from_millis(500))
            .await
            .is_err(),
        "new web-0 is not ready"
    );
    assert_eq!(
        p.next_batch(1).await.unwrap(),
        vec!["web-1"],
        "the new web-0 is not picked again"
    );
    p.restart("web-0")
        .await
        .expect("a replacement: nothing to do");
    assert_eq!(c.evictions(), vec!["web-0"]);
    p.record_event(&StepEvent {
        run_id: "run-sts".into(),
        step: "restart".into(),
        phase: "done".into(),
        message: "m".into(),
    })
    .await
    .unwrap();
    assert!(p.flush_events(Duration::from_secs(10)).await);
    let events: Api<Event> = Api::namespaced(c.fake.clone(), NS);
    let e = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .remove(0);
    assert_eq!(e.involved_object.kind.as_deref(), Some("StatefulSet"));
    assert_eq!(e.involved_object.uid.as_deref(), Some(owner_uid.as_str()));
}
