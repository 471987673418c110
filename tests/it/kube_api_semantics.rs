//! The calls as a real API server answers them (the fake answers the same way, each
//! behaviour's source named in `support::kube`): an eviction carries the pod's UID, a 429
//! from API Priority and Fairness is waited out and never blamed on a budget, a restart
//! returns once the pod is gone rather than marked, Events never hold up a step, a journal
//! value over the object cap never wedges the mirror, and the preflight refuses on what
//! makes a restart unsafe (an autoscaler, a rollout) but not on pods that are Running and
//! NotReady under the overload.

use crate::kube_platform::{holder, options};
use crate::support::fixture_path;
use crate::support::kube::*;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, PostParams};
use recover::platform::kube::decide::{EvictOutcome, PodRef};
use recover::platform::kube::disrupt::{ApiDisruptor, Disruptor};
use recover::platform::kube::KubePlatform;
use recover::platform::{Platform, StepEvent};
use std::time::Duration;

async fn first_pod(c: &FakeCluster) -> Pod {
    c.target_pods().await.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eviction_carries_the_pods_uid_and_never_takes_down_a_pod_that_took_its_name() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    let name = first_pod(&c).await.metadata.name.unwrap();
    let d = ApiDisruptor::new(c.client.clone(), NS);
    let stale = PodRef {
        name: name.clone(),
        uid: "the-uid-of-a-pod-long-gone".into(),
    };
    assert_eq!(d.evict(&stale).await.unwrap(), EvictOutcome::Gone);
    assert!(
        c.evictions().is_empty(),
        "the pod under that name was evicted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_eviction_is_waited_out_and_never_blamed_on_a_budget() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    let mut o = options("alice");
    o.evict_timeout = Duration::from_millis(2500);
    c.throttle_evictions(1000);
    let p = KubePlatform::new(c.client.clone(), o.clone());
    let name = p.next_batch(1).await.unwrap().remove(0);
    let e = p.restart(&name).await.unwrap_err().to_string();
    assert!(
        !e.contains("PodDisruptionBudget"),
        "blamed on a budget: {e}"
    );
    assert!(e.contains("Too many requests"), "{e}");
    // Throttled twice, then through: the server's Retry-After honoured, no budget refusal.
    c.throttle_evictions(2);
    o.evict_timeout = Duration::from_secs(20);
    let p = KubePlatform::new(c.client.clone(), o);
    p.restart(&name)
        .await
        .expect("evicted once the server lets it");
    assert_eq!(c.evictions(), vec![name]);
    assert_eq!(c.refusals(), 0, "no budget ever refused it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_returns_once_the_pod_is_gone_not_when_it_is_marked() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    c.set_grace(Duration::from_millis(1500));
    let p = KubePlatform::new(c.client.clone(), options("alice"));
    let pod = first_pod(&c).await;
    let name = pod.metadata.name.clone().unwrap();
    p.restart(&name).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(c.admin.clone(), NS);
    let now = pods.get_opt(&name).await.unwrap();
    assert!(
        now.is_none_or(|p| p.metadata.uid != pod.metadata.uid),
        "restart returned while the pod was still terminating"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_never_hold_up_a_step() {
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    c.stall("/events");
    let p = KubePlatform::new(c.client.clone(), options("alice"));
    let e = StepEvent {
        run_id: "run-ev".into(),
        step: "gate".into(),
        phase: "started".into(),
        message: "m".into(),
    };
    let quick = tokio::time::timeout(Duration::from_secs(2), p.record_event(&e)).await;
    assert!(
        matches!(quick, Ok(Ok(()))),
        "an Event the API server does not answer held up the step: {quick:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_value_over_the_cap_is_cut_and_never_wedges_the_mirror() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    let p = KubePlatform::new(c.client.clone(), options("alice"));
    let _g = p.lock(&holder("run-big", "alice")).await.unwrap();
    let line = format!(
        "{{\"event\":\"info\",\"message\":\"{}\"}}\n",
        "x".repeat(200)
    );
    let big = format!("{{\"event\":\"run_started\"}}\n{}", line.repeat(3000));
    assert!(big.len() > 512 * 1024);
    p.mirror_journal("run-big", &big)
        .await
        .expect("cut to fit, not refused");
    // The rollout's progress is mirrored after it, as always.
    p.next_batch(1).await.unwrap();
    assert!(
        p.flush_mirror(Duration::from_secs(10)).await,
        "the mirror is wedged"
    );
    let cms: Api<ConfigMap> = Api::namespaced(c.fake.clone(), NS);
    let data = cms.get("recover-journal").await.unwrap().data.unwrap();
    assert!(
        data.contains_key("run-big.rollout.json"),
        "{:?}",
        data.keys()
    );
    assert!(data["run-big.jsonl"].len() <= 512 * 1024);
    assert!(data["run-big.jsonl"].starts_with("{\"event\":\"run_started\"}"));
    // A cut journal is not resumed from: its middle is missing.
    let e = p.fetch_journal("run-big").await.unwrap_err().to_string();
    assert!(e.contains("cut to fit"), "{e}");
}

fn restart_runbook() -> recover::runbook::Runbook {
    recover::runbook::find(&fixture_path("runbooks/kube-restart.yaml"), &[])
        .unwrap()
        .runbook
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_pods_that_are_not_ready_under_load_do_not_refuse_the_run() {
    let c = FakeCluster::start(3, Duration::from_millis(100)).await;
    c.overload().await;
    let p = KubePlatform::new(c.client.clone(), options("alice"));
    let replicas = p.replicas().await.unwrap();
    assert!(replicas.iter().all(|r| !r.ready), "the overload shows");
    recover::engine::preflight::run(&restart_runbook(), &p, &[])
        .await
        .expect("NotReady under load is the thing to fix, not a reason to refuse");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_autoscaler_that_would_fight_the_restart_refuses_it_saying_how_to_pin_it() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    let hpa: k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler =
        serde_json::from_value(serde_json::json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "config-service", "namespace": NS},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": DEPLOY},
                "minReplicas": 2, "maxReplicas": 10}
        }))
        .unwrap();
    Api::namespaced(c.fake.clone(), NS)
        .create(&PostParams::default(), &hpa)
        .await
        .unwrap();
    let p = KubePlatform::new(c.client.clone(), options("alice"));
    let e = recover::engine::preflight::run(&restart_runbook(), &p, &[])
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("HorizontalPodAutoscaler config-service"), "{e}");
    assert!(
        e.contains("kubectl -n recover-demo patch hpa config-service"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrape_rounds_read_the_pods_from_a_watch_not_three_lists_each() {
    let c = FakeCluster::start(2, Duration::from_millis(100)).await;
    let p = KubePlatform::new(c.client.clone(), options("alice"));
    for _ in 0..6 {
        p.scrape_endpoints().await.unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    // The run's own requests (the fake's controllers list pods too).
    let lists = c
        .recorded()
        .iter()
        .filter(|r| r.who == OPERATOR && r.method == "GET")
        .filter(|r| r.path.ends_with("/pods") && !r.query.contains("watch="))
        .count();
    // The first round lists (target, gates, clients) while the watch starts; after that
    // the rounds read the watched pods.
    assert!(lists <= 4, "{lists} pod LISTs for 6 scrape rounds");
}
