//! The gate limit on Kubernetes, both ends: the controller patches the ConfigMap (field
//! manager "recover") and waits until every *ready* gate pod reports the new
//! resourceVersion with the same peer count; each gate is a real gate following the
//! ConfigMap and the EndpointSlices with its own Role, reached through the pod proxy.

use crate::support::gate::{admin_limit, upstream};
use crate::support::kube::gates::real_gate;
use crate::support::kube::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use recover::gate::limit::Limit;
use recover::gate::limit_source::{LimitSource, Meaning, VersionedLimit};
use recover::platform::kube::{ConfigMapLimitSource, KubeOptions, KubePlatform, Reach, Workload};
use recover::platform::{Platform, PlatformError};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn gates() -> [String; 2] {
    [0, 1].map(|i| format!("{GATE}-{GATE_HASH}-g{i}"))
}

fn limit(rate: f64) -> Limit {
    Limit {
        rate_per_s: Some(rate),
        burst: 6,
        max_in_flight: Some(40),
        note: Some("shedding: run-x".to_string()),
        shadow: false,
    }
}

fn platform(c: &FakeCluster, apply_timeout: Duration) -> KubePlatform {
    let mut o = KubeOptions::new(NS, Workload::Deployment(DEPLOY.to_string()));
    o.reach = Reach::ApiProxy;
    o.gate_apply_timeout = apply_timeout;
    KubePlatform::new(c.client.clone(), o)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_limit_waits_for_every_ready_gate_to_apply_its_share() {
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    let up = upstream(Duration::ZERO).await;
    let [g0, g1] = gates();
    let a = real_gate(&c, &g0, &up.url()).await;
    let b = real_gate(&c, &g1, &up.url()).await;
    // A rollout's surge pod that never got scheduled: no traffic, nothing to wait for.
    c.add_pod(with_phase(
        pod(GATE, GATE_HASH, "surge", GATE, false),
        "Pending",
    ))
    .await;
    let p = platform(&c, Duration::from_secs(10));
    let gate = p.gate();
    assert_eq!(
        gate.get_limit().await.unwrap(),
        Limit::unlimited(),
        "no key yet"
    );

    gate.set_limit(&limit(50.0))
        .await
        .expect("applied everywhere");
    let cms: Api<ConfigMap> = Api::namespaced(c.fake.clone(), NS);
    let cm = cms.get("recover-gate-limit").await.unwrap();
    let stored: Limit = serde_json::from_str(&cm.data.unwrap()["limit.json"]).unwrap();
    assert_eq!(stored, limit(50.0), "the ConfigMap holds the total");
    let patches: Vec<String> = c
        .recorded()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.path.ends_with("/recover-gate-limit"))
        .map(|r| r.query)
        .collect();
    assert!(
        !patches.is_empty() && patches.iter().all(|q| q.contains("fieldManager=recover")),
        "every write names its field manager: {patches:?}"
    );
    for (g, rank) in [(&a, 0), (&b, 1)] {
        let j = admin_limit(g.admin).await;
        assert_eq!(j["version"], cm.metadata.resource_version.clone().unwrap());
        assert_eq!(j["peers"], 2);
        assert_eq!(j["limit"]["rate_per_s"], 50.0);
        assert_eq!(j["share"]["rate_per_s"], 25.0);
        assert_eq!(j["share"]["max_in_flight"], 20);
        assert_eq!(j["share"]["burst"], 3, "rank {rank}");
    }
    assert_eq!(gate.get_limit().await.unwrap(), limit(50.0));

    // One gate stops following: the next change is not "set" and the error names it.
    drop(b);
    let p = platform(&c, Duration::from_millis(1500));
    match p.gate().set_limit(&limit(80.0)).await {
        Err(PlatformError::Timeout { what, .. }) => {
            assert!(
                what.contains(&g1) && !what.contains(&format!("{g0} ")),
                "{what}"
            )
        }
        other => panic!("expected a timeout naming the lagging gate, got {other:?}"),
    }
    drop(a);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configmap_source_follows_each_version_and_keeps_the_last_good_limit() {
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    let stop = CancellationToken::new();
    let (tx, mut rx) = mpsc::channel(8);
    let source = ConfigMapLimitSource::new(c.client_as(GATE_SA), NS, "recover-gate-limit")
        .with_backstop(Duration::from_secs(30));
    let task = tokio::spawn(Box::new(source).run(tx, stop.clone()));
    // No key yet: nobody set a limit. Pushed as a fallback (unlimited), which a gate
    // puts in force only if it knows no limit (a state file's stays).
    let got = next(&mut rx).await.expect("pushed").unwrap();
    assert_eq!(
        (got.meaning, got.limit),
        (Meaning::Fallback, Limit::unlimited())
    );

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
    let got = next_new(&mut rx).await.expect("pushed").unwrap();
    assert_eq!((got.version, got.limit), (v2, limit(25.0)));

    // A typo is not pushed: the gate keeps 25/s rather than falling open.
    set(r#"{"rate_per_s": 10, "burst": 1, "max_inflight": 3}"#.to_string()).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(600), next_new(&mut rx))
            .await
            .is_err()
    );
    let v4 = set(serde_json::to_string(&limit(10.0)).unwrap()).await;
    let got = next_new(&mut rx).await.expect("pushed").unwrap();
    assert_eq!((got.version, got.limit), (v4, limit(10.0)));
    stop.cancel();
    task.await.unwrap().unwrap();
    // Followed by a watch, not polled: a handful of lists, not four a second.
    let lists = c
        .recorded()
        .iter()
        .filter(|r| r.who == GATE_SA && r.method == "GET" && !r.query.contains("watch=true"))
        .count();
    assert!(lists <= 3, "{lists} lists of the ConfigMap");
}

/// `kubectl kustomize manifests` as text.
fn rendered() -> String {
    let out = std::process::Command::new("kubectl")
        .args([
            "kustomize",
            concat!(env!("CARGO_MANIFEST_DIR"), "/manifests"),
        ])
        .output()
        .expect("kubectl (needed to render the manifests; scripts/test.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applying_the_manifests_again_does_not_touch_the_limit() {
    use serde::Deserialize;
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    let text = rendered();
    let applied: ConfigMap = serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_yaml::Value::deserialize(d).unwrap())
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "recover-gate-limit")
        .map(|d| serde_yaml::from_value(d).unwrap())
        .expect("the limit ConfigMap is in the manifests");
    assert!(
        applied
            .data
            .as_ref()
            .is_none_or(|d| !d.contains_key("limit.json")),
        "the manifests must not carry a limit: applying them would reset it"
    );

    let up = upstream(Duration::ZERO).await;
    let _a = real_gate(&c, &gates()[0], &up.url()).await;
    let _b = real_gate(&c, &gates()[1], &up.url()).await;
    let p = platform(&c, Duration::from_secs(10));
    p.gate().set_limit(&limit(40.0)).await.unwrap();
    // `kubectl apply --server-side -k manifests/` mid-incident:
    let cms: Api<ConfigMap> = Api::namespaced(c.admin.clone(), NS);
    cms.patch(
        "recover-gate-limit",
        &PatchParams::apply("kubectl").force(),
        &Patch::Apply(&applied),
    )
    .await
    .unwrap();
    assert_eq!(p.gate().get_limit().await.unwrap(), limit(40.0));
}

async fn next(
    rx: &mut mpsc::Receiver<VersionedLimit>,
) -> Result<Option<VersionedLimit>, tokio::time::error::Elapsed> {
    tokio::time::timeout(Duration::from_secs(5), rx.recv()).await
}

/// The next new limit, past confirmations of the one in force.
async fn next_new(
    rx: &mut mpsc::Receiver<VersionedLimit>,
) -> Result<Option<VersionedLimit>, tokio::time::error::Elapsed> {
    loop {
        match next(rx).await? {
            Some(v) if v.meaning != Meaning::New => continue,
            other => return Ok(other),
        }
    }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_binary_follows_its_configmap_and_peers_as_its_service_account() {
    use crate::support::gate::{metrics, sample};
    use recover::util::child::{spawn_guarded, GuardOptions};
    use recover::util::net::wait_http_ok;
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = c.kubeconfig_as(GATE_SA, dir.path()).await;
    std::fs::write(dir.path().join("token"), "a-gate-token-for-this-test\n").unwrap();
    let up = upstream(Duration::ZERO).await;
    let (proxy, admin) = (
        crate::support::ports::loopback_addr(),
        crate::support::ports::loopback_addr(),
    );
    let mut cmd = crate::support::bin();
    cmd.args([
        "gate",
        "--listen",
        &proxy.to_string(),
        "--admin-listen",
        &admin.to_string(),
    ])
    .args([
        "--upstream",
        &up.url(),
        "--admin-read-only",
        "--admin-token-file",
    ])
    .arg(dir.path().join("token"))
    .args(["--limit-configmap", &format!("{NS}/recover-gate-limit")])
    .args(["--peers-service", &format!("{NS}/{GATE}")])
    .args(["--peer-name", &gates()[0]])
    .env("KUBECONFIG", &kubeconfig)
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null());
    let _gate = spawn_guarded("gate", cmd, GuardOptions::default()).unwrap();
    wait_http_ok(&format!("http://{admin}/readyz"), Duration::from_secs(20))
        .await
        .expect("ready once it knows its peers");
    assert_eq!(
        sample(&metrics(admin).await, "recover_gate_limit_peers"),
        Some(2.0)
    );
    let cms: Api<ConfigMap> = Api::namespaced(c.fake.clone(), NS);
    let patch =
        serde_json::json!({"data": {"limit.json": serde_json::to_string(&limit(50.0)).unwrap()}});
    cms.patch(
        "recover-gate-limit",
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .unwrap();
    let followed = crate::support::eventually(Duration::from_secs(5), || async {
        sample(&metrics(admin).await, "recover_gate_limit_rate_per_second") == Some(25.0)
    })
    .await;
    assert!(
        followed,
        "the gate never took its half of the ConfigMap's limit"
    );
    let denied: Vec<_> = c
        .recorded()
        .into_iter()
        .filter(|r| r.who == GATE_SA && r.denied)
        .collect();
    assert!(denied.is_empty(), "{denied:?}");
}
