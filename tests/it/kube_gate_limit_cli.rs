//! `recover gate limit set|get|lift --target kube --namespace NS`, the command a run's
//! summary prints on Kubernetes, run as a person would: the binary, a kubeconfig, and the
//! operator's account held to the manifests' laptop Roles. It writes the limit ConfigMap
//! every gate follows and returns only once the real gates behind it report the new version.

use crate::support::gate::{admin_limit, upstream};
use crate::support::kube::gates::real_gate;
use crate::support::kube::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use recover::gate::limit::Limit;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

/// `recover gate limit ARGS --target kube --namespace NS` as the operator.
async fn gate_limit(kubeconfig: &Path, args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let kubeconfig = kubeconfig.to_path_buf();
    tokio::task::spawn_blocking(move || {
        crate::support::bin()
            .args(["gate", "limit"])
            .args(&args)
            .args(["--target", "kube", "--namespace", NS])
            .env("KUBECONFIG", kubeconfig)
            .env("RECOVER_KUBE_REACH", "proxy")
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn said(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The limit ConfigMap's `limit.json` and its resourceVersion.
async fn stored(c: &FakeCluster) -> (Limit, String) {
    let cm = Api::<ConfigMap>::namespaced(c.fake.clone(), NS)
        .get("recover-gate-limit")
        .await
        .unwrap();
    let limit = serde_json::from_str(&cm.data.unwrap()["limit.json"]).unwrap();
    (limit, cm.metadata.resource_version.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_get_and_lift_write_the_limit_configmap_that_every_gate_applies() {
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    let up = upstream(Duration::ZERO).await;
    let a = real_gate(&c, &format!("{GATE}-{GATE_HASH}-g0"), &up.url()).await;
    let b = real_gate(&c, &format!("{GATE}-{GATE_HASH}-g1"), &up.url()).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = c.kubeconfig_as(OPERATOR, dir.path()).await;

    let set = gate_limit(
        &kubeconfig,
        &[
            "set",
            "--rate",
            "30",
            "--max-in-flight",
            "10",
            "--note",
            "paging",
            "--output",
            "json",
        ],
    )
    .await;
    assert_eq!(set.status.code(), Some(0), "{}", said(&set));
    let printed: Limit = serde_json::from_slice(&set.stdout).expect("the limit as JSON");
    let (limit, version) = stored(&c).await;
    assert_eq!(
        printed, limit,
        "what set prints is what the ConfigMap holds"
    );
    assert_eq!(
        (
            limit.rate_per_s,
            limit.burst,
            limit.max_in_flight,
            limit.shadow
        ),
        (Some(30.0), 15, Some(10), false)
    );
    let note = limit.note.clone().unwrap_or_default();
    assert!(
        note.starts_with("set by hand (recover gate limit)") && note.ends_with(": paging"),
        "{note}"
    );
    // In force on every gate before the command returned: each reports the ConfigMap's
    // version and its half of the total.
    for g in [&a, &b] {
        let j = admin_limit(g.admin).await;
        assert_eq!(j["version"], version.as_str(), "{j}");
        assert_eq!(j["peers"], 2, "{j}");
        assert_eq!(j["share"]["rate_per_s"], 15.0, "{j}");
        assert_eq!(j["share"]["max_in_flight"], 5, "{j}");
    }
    let writes: Vec<_> = c
        .recorded()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.path.ends_with("/recover-gate-limit"))
        .collect();
    assert!(
        !writes.is_empty()
            && writes.iter().all(|r| r.who == OPERATOR
                && !r.denied
                && r.query.contains("fieldManager=recover")),
        "written by the operator under the laptop Roles, as field manager recover: {:?}",
        writes
            .iter()
            .map(|r| (&r.who, r.denied, &r.query))
            .collect::<Vec<_>>()
    );

    let get = gate_limit(&kubeconfig, &["get"]).await;
    assert_eq!(get.status.code(), Some(0), "{}", said(&get));
    let text = String::from_utf8_lossy(&get.stdout);
    assert!(
        text.starts_with(
            "limit: 30 req/s (burst 15), at most 10 in flight\nshadow: off\nnote: set by hand"
        ),
        "{text}"
    );

    let lift = gate_limit(&kubeconfig, &["lift", "--output", "json"]).await;
    assert_eq!(lift.status.code(), Some(0), "{}", said(&lift));
    let printed: Limit = serde_json::from_slice(&lift.stdout).expect("the limit as JSON");
    let (limit, version) = stored(&c).await;
    assert_eq!(printed, limit);
    assert_eq!(
        (limit.rate_per_s, limit.max_in_flight),
        (None, None),
        "{limit:?}"
    );
    assert!(
        limit.note.unwrap_or_default().starts_with("lifted by hand"),
        "the note says who lifted it"
    );
    for g in [&a, &b] {
        let j = admin_limit(g.admin).await;
        assert_eq!(j["version"], version.as_str(), "{j}");
        assert_eq!(j["limit"]["rate_per_s"], serde_json::Value::Null, "{j}");
    }
}

#[test]
fn kube_without_a_namespace_is_bad_usage() {
    let out = crate::support::bin()
        .args(["gate", "limit", "lift", "--target", "kube"])
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--target kube needs --namespace NS"),
        "{}",
        said(&out)
    );
}
