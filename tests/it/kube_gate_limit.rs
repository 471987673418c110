//! The gate limit on Kubernetes, both ends: the controller patches the ConfigMap and waits
//! until every gate pod reports the new resourceVersion in `/metrics`; each "gate pod" here
//! runs the real `ConfigMapLimitSource` against the fake API and serves its applied version
//! over real HTTP on 127.0.0.1, reached through the (emulated) pod proxy.

use crate::support::kube::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use recover::gate::limit::Limit;
use recover::gate::limit_source::{LimitSource, VersionedLimit};
use recover::platform::kube::{ConfigMapLimitSource, KubeOptions, KubePlatform, Workload};
use recover::platform::{Platform, PlatformError};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const GATES: [&str; 2] = ["recover-gate-55aa-g0", "recover-gate-55aa-g1"];

/// A stand-in gate pod: applies limits from the ConfigMap source, reports the version.
async fn gate_pod(
    c: &FakeCluster,
    pod: &str,
    stop: CancellationToken,
) -> Arc<Mutex<Option<VersionedLimit>>> {
    let metrics = Arc::new(Mutex::new(String::new()));
    let applied = Arc::new(Mutex::new(None));
    let addr = serve_pod(metrics.clone(), Arc::default(), stop.clone()).await;
    c.set_backend(pod, addr);
    let (tx, mut rx) = mpsc::channel(8);
    let source = ConfigMapLimitSource::new(c.fake.clone(), NS, "recover-gate-limit")
        .with_poll_interval(Duration::from_millis(50));
    tokio::spawn(Box::new(source).run(tx, stop.clone()));
    let a = applied.clone();
    tokio::spawn(async move {
        while let Some(v) = rx.recv().await {
            *metrics.lock().unwrap() = format!(
                "# TYPE recover_gate_limit_applied_info gauge\nrecover_gate_limit_applied_info{{version=\"{}\"}} 1\n",
                v.version
            );
            *a.lock().unwrap() = Some(v);
        }
    });
    applied
}

fn limit(rate: f64) -> Limit {
    Limit {
        rate_per_s: Some(rate),
        burst: 5,
        max_in_flight: Some(40),
        note: Some("shedding: run-x".to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_limit_patches_the_configmap_and_waits_for_every_gate_pod() {
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    let stop = CancellationToken::new();
    let g0 = gate_pod(&c, GATES[0], stop.clone()).await;
    let g1 = gate_pod(&c, GATES[1], stop.clone()).await;
    let mut o = KubeOptions::new(NS, Workload::Deployment(DEPLOY.to_string()));
    o.gate_apply_timeout = Duration::from_secs(10);
    let p = KubePlatform::new(c.client.clone(), o);
    let gate = p.gate();

    gate.set_limit(&limit(50.0))
        .await
        .expect("applied everywhere");
    let cms: Api<ConfigMap> = Api::namespaced(c.fake.clone(), NS);
    let cm = cms.get("recover-gate-limit").await.unwrap();
    let rv = cm.metadata.resource_version.clone().unwrap();
    let stored: Limit = serde_json::from_str(&cm.data.unwrap()["limit.json"]).unwrap();
    assert_eq!(stored, limit(50.0));
    // set_limit returned only after both gates applied exactly this version.
    for g in [&g0, &g1] {
        let v = g.lock().unwrap().clone().expect("applied");
        assert_eq!(
            (v.version.as_str(), v.limit.clone()),
            (rv.as_str(), limit(50.0))
        );
    }
    assert_eq!(gate.get_limit().await.unwrap(), limit(50.0));

    // One gate stops following: the next change is not "set" and the error names it.
    stop.cancel();
    let stop2 = CancellationToken::new();
    let _g0 = gate_pod(&c, GATES[0], stop2.clone()).await;
    let mut o = KubeOptions::new(NS, Workload::Deployment(DEPLOY.to_string()));
    o.gate_apply_timeout = Duration::from_millis(800);
    let p = KubePlatform::new(c.client.clone(), o);
    match p.gate().set_limit(&limit(80.0)).await {
        Err(PlatformError::Timeout { what, .. }) => {
            assert!(
                what.contains(GATES[1]) && !what.contains(GATES[0]),
                "{what}"
            )
        }
        other => panic!("expected a timeout naming the lagging gate, got {other:?}"),
    }
    stop2.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configmap_source_pushes_each_version_and_keeps_the_last_good_limit() {
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    let stop = CancellationToken::new();
    let (tx, mut rx) = mpsc::channel(8);
    let source = ConfigMapLimitSource::new(c.fake.clone(), NS, "recover-gate-limit")
        .with_poll_interval(Duration::from_millis(50));
    let task = tokio::spawn(Box::new(source).run(tx, stop.clone()));
    let first = next(&mut rx).await.expect("current limit first").unwrap();
    assert_eq!(first.limit, Limit::unlimited());

    let cms: Api<ConfigMap> = Api::namespaced(c.fake.clone(), NS);
    let set = |text: String| {
        let cms = cms.clone();
        async move {
            let patch = serde_json::json!({"data": {"limit.json": text}});
            cms.patch(
                "recover-gate-limit",
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .unwrap()
            .metadata
            .resource_version
            .unwrap()
        }
    };
    let v2 = set(serde_json::to_string(&limit(25.0)).unwrap()).await;
    let got = next(&mut rx).await.expect("pushed").unwrap();
    assert_eq!((got.version, got.limit), (v2, limit(25.0)));

    // A typo is not pushed: the gate keeps 25/s rather than falling open.
    set(r#"{"rate_per_s": 10, "burst": 1, "max_inflight": 3}"#.to_string()).await;
    assert!(tokio::time::timeout(Duration::from_millis(600), rx.recv())
        .await
        .is_err());
    let v4 = set(serde_json::to_string(&limit(10.0)).unwrap()).await;
    let got = next(&mut rx).await.expect("pushed").unwrap();
    assert_eq!((got.version, got.limit), (v4, limit(10.0)));
    stop.cancel();
    task.await.unwrap().unwrap();
}

async fn next(
    rx: &mut mpsc::Receiver<VersionedLimit>,
) -> Result<Option<VersionedLimit>, tokio::time::error::Elapsed> {
    tokio::time::timeout(Duration::from_secs(5), rx.recv()).await
}

#[test]
fn invalid_limits_name_the_field() {
    use recover::platform::kube::limit_source::parse_limit;
    let e = parse_limit(r#"{"rate_per_s": 10, "burst": 1, "max_inflight": 3}"#).unwrap_err();
    assert!(e.contains("max_inflight"), "{e}");
    let e = parse_limit(r#"{"rate_per_s": -1, "burst": 1, "max_in_flight": null}"#).unwrap_err();
    assert!(e.contains("rate_per_s"), "{e}");
    let e = parse_limit(r#"{"rate_per_s": 5, "burst": 0, "max_in_flight": null}"#).unwrap_err();
    assert!(e.contains("burst"), "{e}");
}
