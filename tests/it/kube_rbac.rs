//! RBAC from the API server's side: every call the controller, the gate and serve make is
//! sent as their service account to a fake API server that enforces exactly the Roles in
//! `manifests/` (`support::kube::rbac`). No call may be denied, and every rule of those
//! Roles must be used by some call, so the Roles cannot drift from the code either way.

use crate::kube_platform::{holder, options};
use crate::support::gate::upstream;
use crate::support::kube::gates::real_gate;
use crate::support::kube::*;
use recover::gate::limit::Limit;
use recover::platform::kube::{KubePlatform, Workload};
use recover::platform::{AdminOp, Platform, StepEvent};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// (account's role, rule index, resource, verb): one grant, expanded.
type Grant = (String, usize, String, String);

fn grants_of(c: &FakeCluster, account: &str) -> BTreeSet<Grant> {
    let roles = c.shared.roles.lock().unwrap();
    let mut out = BTreeSet::new();
    for ((role, i), rule) in roles.by_account.get(account).into_iter().flatten() {
        for res in rule.resources.clone().unwrap_or_default() {
            for verb in &rule.verbs {
                out.insert((role.clone(), *i, res.clone(), verb.clone()));
            }
        }
    }
    out
}

fn used(c: &FakeCluster) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for r in c.recorded() {
        let Some(a) = rbac::attrs(&r.method, &r.path, &r.query) else {
            continue;
        };
        for (role, i) in r.rules {
            out.insert((role, i, a.resource.clone(), a.verb.clone()));
        }
    }
    out
}

async fn statefulset_event(c: &FakeCluster) {
    let sts: k8s_openapi::api::apps::v1::StatefulSet = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web", "namespace": NS},
        "spec": {"serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}
    }))
    .unwrap();
    let api: kube::Api<k8s_openapi::api::apps::v1::StatefulSet> =
        kube::Api::namespaced(c.fake.clone(), NS);
    let uid = api
        .create(&Default::default(), &sts)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let mut p = pod("x", "y", "web-0", "web", true);
    p.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
    p.metadata.owner_references = Some(vec![serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": uid, "controller": true
    }))
    .unwrap()]);
    c.add_pod(p).await;
    let mut o = options("ci");
    o.workload = Workload::Selector("app=web".into());
    let p = KubePlatform::new(c.client.clone(), o);
    p.record_event(&StepEvent {
        run_id: "run-sts".into(),
        step: "s".into(),
        phase: "done".into(),
        message: "m".into(),
    })
    .await
    .unwrap();
    assert!(p.flush_events(Duration::from_secs(10)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_is_allowed_by_the_manifests_roles_and_every_rule_is_used() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    let stop = CancellationToken::new();
    let page = Arc::new(Mutex::new(
        "recover_demo_service_queue_depth 1\n".to_string(),
    ));
    let addr = serve_pod(page, Arc::new(Mutex::new(0)), stop.clone()).await;
    for p in c.target_pods().await {
        c.set_backend(p.metadata.name.as_deref().unwrap(), addr);
    }
    // The gates, with their own service account.
    let up = upstream(Duration::ZERO).await;
    let _g0 = real_gate(&c, &format!("{GATE}-{GATE_HASH}-g0"), &up.url()).await;
    let _g1 = real_gate(&c, &format!("{GATE}-{GATE_HASH}-g1"), &up.url()).await;

    let mut o = options("ci");
    o.clients_selector = None;
    o.gate_apply_timeout = Duration::from_secs(10);
    let p = KubePlatform::new(c.client.clone(), o);
    let guard = p.lock(&holder("run-rbac", "ci")).await.unwrap();
    assert_eq!(p.hazards().await.unwrap(), vec![], "a steady target");
    let first = p.replicas().await.unwrap().remove(0).id;
    assert_eq!(
        p.admin(&first, AdminOp::Drain(recover::platform::DrainKeep::None))
            .await
            .unwrap()
            .drained(),
        Some(7)
    );
    for ep in p.scrape_endpoints().await.unwrap() {
        p.scrape(&ep).await.unwrap();
    }
    let gate = p.gate();
    let mut limit = gate.get_limit().await.unwrap();
    assert_eq!(limit, Limit::unlimited());
    limit.rate_per_s = Some(30.0);
    gate.set_limit(&limit).await.unwrap();
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
    assert!(p.flush_events(Duration::from_secs(10)).await);
    p.mirror_journal("run-rbac", "{}\n").await.unwrap();
    p.fetch_journal("run-rbac").await.unwrap();
    guard.release().await.unwrap();
    statefulset_event(&c).await;
    serve_state(&c).await;
    stop.cancel();

    let denied: Vec<String> = c
        .recorded()
        .iter()
        .filter(|r| r.denied)
        .map(|r| format!("{} {} {}?{}", r.who, r.method, r.path, r.query))
        .collect();
    assert!(
        denied.is_empty(),
        "denied by the manifests' Roles: {denied:#?}"
    );
    let used = used(&c);
    // The in-cluster accounts and the laptop operator: every rule used by some call.
    for account in [CONTROLLER, OPERATOR, GATE_SA, SERVE_SA] {
        let unused: Vec<Grant> = grants_of(&c, account)
            .into_iter()
            .filter(|g| !used.contains(g))
            .collect();
        assert!(
            unused.is_empty(),
            "{account}: granted but never called: {unused:?}"
        );
    }
}

/// serve keeps its state in its ConfigMap, as its service account.
async fn serve_state(c: &FakeCluster) {
    use recover::serve::state::{ConfigMapStore, StateStore};
    let store = ConfigMapStore::new(c.client_as(SERVE_SA), NS, "recover-serve-state");
    let mut book = store.load().await.unwrap();
    book.targets.entry("kube:x/y".into()).or_default().failures = 1;
    store.save(&book).await.unwrap();
    assert_eq!(store.load().await.unwrap(), book);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delete_fallback_needs_a_grant_the_shipped_role_does_not_give() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    c.set_pdb(0, false).await;
    let mut o = options("ci");
    o.evict_timeout = Duration::from_millis(300);
    o.allow_delete_fallback = true;
    let p = KubePlatform::new(c.client.clone(), o.clone());
    let pod = p.next_batch(1).await.unwrap().remove(0);
    let e = p.restart(&pod).await.unwrap_err().to_string();
    assert!(
        e.contains("delete pods"),
        "the 403 names the missing rule: {e}"
    );
    c.grant(OPERATOR, "", "pods", "delete");
    let p = KubePlatform::new(c.client.clone(), o);
    p.restart(&pod).await.expect("deleted once granted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_service_account_has_the_pod_proxy_and_the_lease_is_granted_by_name() {
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    let roles = c.shared.roles.lock().unwrap().clone();
    for account in [CONTROLLER, SERVE_SA, GATE_SA] {
        for (_, rule) in roles.by_account.get(account).into_iter().flatten() {
            let resources = rule.resources.clone().unwrap_or_default();
            assert!(
                !resources.iter().any(|r| r == "pods/proxy"),
                "{account} may go around the NetworkPolicies through the pod proxy"
            );
            if resources.iter().any(|r| r == "leases") {
                let by_name = rule.resource_names.as_ref().is_some_and(|n| !n.is_empty());
                assert!(
                    by_name || rule.verbs == ["create"],
                    "{account}: leases {:?} not limited by name",
                    rule.verbs
                );
            }
        }
    }
    // The laptop path has it, from its own Role.
    assert!(roles.by_account[OPERATOR]
        .iter()
        .any(|(id, r)| id.0 == "recover-laptop"
            && r.resources.clone().unwrap_or_default() == ["pods/proxy"]));
}
