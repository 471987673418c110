//! What the rendered manifests let happen: the NetworkPolicies let only the controller
//! and serve reach the gate's admin port and only the gate (plus the controller and serve)
//! the service; every workload with several replicas has one budget that lets not-ready
//! pods go, and probes; no secret value is committed anywhere.

use crate::kube_manifests::{name, rendered};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A pod as a NetworkPolicy peer sees it: its labels.
fn labels(app: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app.kubernetes.io/name".to_string(), app.to_string())])
}

fn selects(
    sel: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    l: &BTreeMap<String, String>,
) -> bool {
    let labels_ok = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| l.get(k) == Some(v));
    let exprs_ok = sel.match_expressions.iter().flatten().all(|e| {
        let vals = e.values.clone().unwrap_or_default();
        match e.operator.as_str() {
            "In" => l.get(&e.key).is_some_and(|v| vals.contains(v)),
            "NotIn" => l.get(&e.key).is_none_or(|v| !vals.contains(v)),
            "Exists" => l.contains_key(&e.key),
            _ => !l.contains_key(&e.key),
        }
    });
    labels_ok && exprs_ok
}

/// Would the rendered policies let a pod of `from` reach `to` on `port`? (In-namespace
/// peers; a policy selecting `to` with no matching rule denies.)
fn reaches(policies: &[NetworkPolicy], from: &str, to: &str, port: i32) -> bool {
    let (src, dst) = (labels(from), labels(to));
    let selecting: Vec<&NetworkPolicy> = policies
        .iter()
        .filter(|p| {
            p.spec
                .as_ref()
                .is_some_and(|s| s.pod_selector.as_ref().is_none_or(|ps| selects(ps, &dst)))
        })
        .collect();
    if selecting.is_empty() {
        return true;
    }
    selecting.iter().any(|p| {
        p.spec
            .as_ref()
            .unwrap()
            .ingress
            .iter()
            .flatten()
            .any(|rule| {
                let port_ok = rule.ports.as_ref().is_none_or(|ps| {
                    ps.iter().any(|pp| match &pp.port {
                        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n)) => {
                            *n == port
                        }
                        None => true,
                        _ => false,
                    })
                });
                let from_ok = rule.from.as_ref().is_none_or(|peers| {
                    peers
                        .iter()
                        .any(|peer| peer.pod_selector.as_ref().is_some_and(|s| selects(s, &src)))
                });
                port_ok && from_ok
            })
    })
}

#[test]
fn network_policies_let_only_the_controller_and_serve_change_the_gate_and_only_the_gate_reach_the_service(
) {
    let policies: Vec<NetworkPolicy> = rendered()
        .into_iter()
        .filter(|d| d["kind"] == "NetworkPolicy")
        .map(|d| serde_yaml::from_value(d).unwrap())
        .collect();
    let cases = [
        ("workers", "recover-gate", 8080, true),
        ("workers", "recover-gate", 8081, false),
        ("config-service", "recover-gate", 8081, false),
        ("recover-controller", "recover-gate", 8081, true),
        ("recover-serve", "recover-gate", 8081, true),
        ("workers", "config-service", 9001, false),
        ("some-other-app", "config-service", 9001, false),
        ("recover-gate", "config-service", 9001, true),
        ("recover-controller", "config-service", 9001, true),
        ("recover-controller", "workers", 9100, true),
        ("config-service", "workers", 9100, false),
        ("some-other-app", "recover-serve", 9095, true),
        ("workers", "recover-controller", 80, false),
    ];
    for (from, to, port, want) in cases {
        assert_eq!(
            reaches(&policies, from, to, port),
            want,
            "{from} -> {to}:{port}"
        );
    }
}

#[test]
fn workloads_with_several_replicas_have_budgets_that_let_not_ready_pods_go() {
    let all = rendered();
    let budgets: Vec<PodDisruptionBudget> = all
        .iter()
        .filter(|d| d["kind"] == "PodDisruptionBudget")
        .map(|d| serde_yaml::from_value(d.clone()).unwrap())
        .collect();
    for b in &budgets {
        let spec = b.spec.as_ref().unwrap();
        assert_eq!(
            spec.unhealthy_pod_eviction_policy.as_deref(),
            Some("AlwaysAllow"),
            "{:?}",
            b.metadata.name
        );
    }
    for d in all.iter().filter(|d| d["kind"] == "Deployment") {
        let dep: Deployment = serde_yaml::from_value(d.clone()).unwrap();
        let spec = dep.spec.unwrap();
        if spec.replicas.unwrap_or(1) < 2 {
            continue;
        }
        let pod_labels = spec.template.metadata.unwrap().labels.unwrap();
        let covered = budgets
            .iter()
            .filter(|b| {
                selects(
                    b.spec.as_ref().unwrap().selector.as_ref().unwrap(),
                    &pod_labels,
                )
            })
            .count();
        assert_eq!(covered, 1, "{}: budgets covering it", name(d));
        let probes = &spec.template.spec.unwrap().containers[0];
        assert!(
            probes.liveness_probe.is_some() && probes.readiness_probe.is_some(),
            "{}: probes",
            name(d)
        );
    }
}

#[test]
fn no_secret_value_is_committed() {
    for d in rendered() {
        assert_ne!(
            d["kind"],
            "Secret",
            "{}: Secrets are created by the operator (docs/guide/kubernetes.md)",
            name(&d)
        );
    }
    let published: Vec<&str> = recover::util::secret::WELL_KNOWN
        .iter()
        .copied()
        .filter(|w| w.contains('-'))
        .collect();
    // Every documentation page (README.md, ARCHITECTURE.md, docs/ at any depth).
    let mut files: Vec<PathBuf> = crate::support::docs::files()
        .into_iter()
        .map(|f| crate::support::docs::root().join(f))
        .collect();
    files.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile"));
    for dir in ["manifests", "scripts"] {
        if let Ok(rd) = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)) {
            files.extend(rd.map(|e| e.unwrap().path()).filter(|p| p.is_file()));
        }
    }
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        for w in &published {
            assert!(
                !text.contains(w),
                "{} contains the published token {w:?}",
                f.display()
            );
        }
        for line in text.lines() {
            let l = line.trim();
            assert!(
                !(l.starts_with("token:")
                    || l.starts_with("admin-token:")
                    || l.contains("--from-literal=token=") && !l.contains("$(")),
                "{}: a literal token: {l}",
                f.display()
            );
        }
    }
}
