//! The API objects the fake cluster starts with and the tests add: pods as their
//! ReplicaSet makes them, Deployments, budgets, ConfigMaps.

use super::NS;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};

/// A pod of `deployment` as its ReplicaSet would create it: Running with its own IP, Ready
/// or not.
pub fn pod(deployment: &str, hash: &str, suffix: &str, app: &str, ready: bool) -> Pod {
    static NEXT_IP: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    let n = NEXT_IP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let ip = format!("10.{}.{}.{}", n / 65536 % 256, n / 256 % 256, n % 256);
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("{deployment}-{hash}-{suffix}"),
            "namespace": NS,
            "labels": {"app.kubernetes.io/name": app, "pod-template-hash": hash},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": format!("{deployment}-{hash}"), "uid": format!("uid-{deployment}"),
                "controller": true}]
        },
        "spec": {"containers": [{"name": "c", "image": "recover:dev"}]},
        "status": {"phase": "Running", "podIP": ip,
            "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
    }))
    .expect("static pod json")
}

/// The same pod in another phase (`Pending` has no IP; `Failed` as node pressure leaves it).
pub fn with_phase(mut p: Pod, phase: &str) -> Pod {
    let status = p.status.get_or_insert_with(Default::default);
    status.phase = Some(phase.to_string());
    if phase == "Pending" {
        status.pod_ip = None;
    }
    if phase != "Running" {
        status.conditions = Some(vec![serde_json::from_value(
            serde_json::json!({"type": "Ready", "status": "False"}),
        )
        .unwrap()]);
    }
    p
}

/// A Deployment at rest: its controller has observed its spec and every pod is updated
/// (the status a rollout in progress differs from).
pub fn deployment(name: &str, replicas: usize) -> k8s_openapi::api::apps::v1::Deployment {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS, "generation": 1},
        "spec": {"replicas": replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {"metadata": {"labels": {"app.kubernetes.io/name": name}},
                "spec": {"containers": [{"name": "c", "image": "recover:dev"}]}}},
        "status": {"observedGeneration": 1, "replicas": replicas, "updatedReplicas": replicas,
            "readyReplicas": replicas, "availableReplicas": replicas}
    }))
    .expect("static deployment json")
}

/// A PodDisruptionBudget over `app`'s pods.
pub fn pdb(
    name: &str,
    app: &str,
    max_unavailable: i32,
    always_allow: bool,
) -> k8s_openapi::api::policy::v1::PodDisruptionBudget {
    let mut spec = serde_json::json!({
        "maxUnavailable": max_unavailable,
        "selector": {"matchLabels": {"app.kubernetes.io/name": app}}
    });
    if always_allow {
        spec["unhealthyPodEvictionPolicy"] = "AlwaysAllow".into();
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": NS}, "spec": spec
    }))
    .expect("static pdb json")
}

pub fn configmap(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(NS.to_string()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}
