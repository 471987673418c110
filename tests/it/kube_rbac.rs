//! RBAC from the other side: drive every platform operation through a client that records
//! each request, map each onto the permission table, and require that every request is
//! allowed by `rbac::REQUIRED` (or by `rbac::OPTIONAL` exactly when opted in) and that every
//! entry of `REQUIRED` is really used. Together with `kube_manifests`, the Role equals
//! what the code calls.

use crate::support::kube::*;
use recover::platform::kube::rbac::{self, Permission};
use recover::platform::kube::{KubeOptions, KubePlatform, Workload};
use recover::platform::{AdminOp, LockHolder, Platform, StepEvent};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn matching(perms: &[Permission], r: &Recorded) -> Option<Permission> {
    let (g, res, verb, name) = rbac::classify(&r.method, &r.path)?;
    perms
        .iter()
        .copied()
        .find(|p| rbac::allows(p, g, &res, verb, name.as_deref()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_the_platform_sends_is_in_the_table_and_every_entry_is_used() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    let stop = CancellationToken::new();
    // Every pod answers /metrics (gates report the version the ConfigMap has after a patch
    // we make below) and /admin/drain.
    let metrics = Arc::new(Mutex::new(String::new()));
    let drains = Arc::new(Mutex::new(0));
    let addr = serve_pod(metrics.clone(), drains.clone(), stop.clone()).await;
    for p in c.target_pods().await {
        c.set_backend(p.metadata.name.as_deref().unwrap(), addr);
    }
    for g in ["recover-gate-55aa-g0", "recover-gate-55aa-g1"] {
        c.set_backend(g, addr);
    }
    let mut o = KubeOptions::new(NS, Workload::Deployment(DEPLOY.to_string()));
    o.poll = Duration::from_millis(50);
    o.gate_apply_timeout = Duration::from_secs(5);
    o.clients_selector = None;
    let p = KubePlatform::new(c.client.clone(), o);

    let guard = p
        .lock(&LockHolder {
            run_id: "run-rbac".into(),
            identity: "ci".into(),
        })
        .await
        .unwrap();
    let reply = p
        .admin(&p.replicas().await.unwrap()[0].id, AdminOp::Drain)
        .await
        .unwrap();
    assert_eq!(reply["drained"], 7);
    for ep in p.scrape_endpoints().await.unwrap() {
        p.scrape(&ep).await.unwrap();
    }
    // The gates "apply" whatever version the next write produces.
    let (cms, m) = (
        kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(c.fake.clone(), NS),
        metrics.clone(),
    );
    let follower = tokio::spawn(async move {
        loop {
            if let Ok(cm) = cms.get("recover-gate-limit").await {
                *m.lock().unwrap() = format!(
                    "recover_gate_limit_applied_info{{version=\"{}\"}} 1\n",
                    cm.metadata.resource_version.unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let gate = p.gate();
    let mut limit = gate.get_limit().await.unwrap();
    limit.rate_per_s = Some(30.0);
    gate.set_limit(&limit).await.unwrap();
    follower.abort();
    let batch = p.next_batch(1).await.unwrap();
    p.restart(&batch[0]).await.unwrap();
    p.wait_ready(&batch, Duration::from_secs(10)).await.unwrap();
    p.record_event(&StepEvent {
        run_id: "run-rbac".into(),
        step: "s".into(),
        phase: "done".into(),
        message: "m".into(),
    })
    .await
    .unwrap();
    p.mirror_journal("run-rbac", "{}\n").await.unwrap();
    p.fetch_journal("run-rbac").await.unwrap();
    guard.release().await.unwrap();
    stop.cancel();

    let recorded = c.recorded();
    let mut used = BTreeSet::new();
    for r in &recorded {
        let perm = matching(rbac::REQUIRED, r)
            .unwrap_or_else(|| panic!("{} {} is not allowed by rbac::REQUIRED", r.method, r.path));
        used.insert(perm);
    }
    let unused: Vec<_> = rbac::REQUIRED
        .iter()
        .filter(|p| !used.contains(p))
        .collect();
    assert!(unused.is_empty(), "granted but never called: {unused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delete_fallback_is_the_only_optional_call_and_only_when_allowed() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    c.set_max_unavailable(0);
    let mut o = KubeOptions::new(NS, Workload::Deployment(DEPLOY.to_string()));
    o.evict_timeout = Duration::from_millis(300);
    o.evict_retry = Duration::from_millis(100);
    o.allow_delete_fallback = true;
    let p = KubePlatform::new(c.client.clone(), o);
    let pod = p.next_batch(1).await.unwrap().remove(0);
    p.restart(&pod).await.unwrap();
    let outside: Vec<_> = c
        .recorded()
        .into_iter()
        .filter(|r| matching(rbac::REQUIRED, r).is_none())
        .collect();
    assert!(!outside.is_empty());
    for r in outside {
        assert_eq!(
            matching(rbac::OPTIONAL, &r),
            Some(rbac::PODS_DELETE),
            "{} {}",
            r.method,
            r.path
        );
    }
}
