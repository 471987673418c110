//! The manifests as an operator deploys them: every document parses into its k8s-openapi
//! type (unknown fields refused), `kubectl kustomize manifests` renders what
//! `kubernetes-validate --strict` accepts, every pod meets Pod Security "restricted" with
//! a read-only root filesystem, the NetworkPolicies let only the right pods in, the
//! workloads with several replicas have budgets that let not-ready pods go, images are
//! pinned, and no secret value is committed. (The Roles are checked against what the code
//! calls in `kube_rbac`.)

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, PodSpec, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests")
}

/// Parse into `T`, rejecting any field `T` does not know (a typo would otherwise vanish).
fn strict<T: DeserializeOwned + serde::Serialize>(doc: &serde_yaml::Value, at: &str) -> T {
    let v: T = serde_path_to_error::deserialize(doc.clone())
        .unwrap_or_else(|e| panic!("{at}: field {}: {}", e.path(), e.inner()));
    let back = serde_yaml::to_value(&v).unwrap();
    let mut lost = Vec::new();
    unknown_fields(doc, &back, String::new(), &mut lost);
    assert!(lost.is_empty(), "{at}: unknown fields {lost:?}");
    v
}

fn unknown_fields(
    orig: &serde_yaml::Value,
    back: &serde_yaml::Value,
    at: String,
    out: &mut Vec<String>,
) {
    use serde_yaml::Value;
    match (orig, back) {
        (Value::Mapping(o), Value::Mapping(b)) => {
            for (k, v) in o {
                let key = format!("{at}.{}", k.as_str().unwrap_or("?"));
                match b.get(k) {
                    Some(bv) => unknown_fields(v, bv, key, out),
                    None if matches!(v, Value::Mapping(m) if m.is_empty()) => {}
                    None => out.push(key),
                }
            }
        }
        (Value::Sequence(o), Value::Sequence(b)) => {
            for (i, (ov, bv)) in o.iter().zip(b).enumerate() {
                unknown_fields(ov, bv, format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn docs(text: &str) -> Vec<serde_yaml::Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| serde_yaml::Value::deserialize(d).unwrap())
        .filter(|d| !d.is_null())
        .collect()
}

/// `kubectl kustomize manifests`, plus the per-run Job template: everything deployed.
fn rendered() -> Vec<serde_yaml::Value> {
    let out = Command::new("kubectl")
        .args(["kustomize"])
        .arg(manifests_dir())
        .output()
        .expect("kubectl (scripts/test.sh installs it) renders the manifests");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut all = docs(&String::from_utf8(out.stdout).unwrap());
    all.extend(docs(
        &std::fs::read_to_string(manifests_dir().join("job-runbook.yaml")).unwrap(),
    ));
    all
}

fn name(d: &serde_yaml::Value) -> String {
    format!(
        "{}/{}",
        d["kind"].as_str().unwrap_or("?"),
        d["metadata"]["name"].as_str().unwrap_or("?")
    )
}

#[test]
fn every_manifest_parses_into_its_kubernetes_type() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(manifests_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut kinds = Vec::new();
    for f in files {
        let file = f.file_name().unwrap().to_string_lossy().to_string();
        for (i, doc) in docs(&std::fs::read_to_string(&f).unwrap())
            .iter()
            .enumerate()
        {
            let at = format!("{file} document {i}");
            let kind = doc["kind"]
                .as_str()
                .unwrap_or_else(|| panic!("{at}: no kind"))
                .to_string();
            match kind.as_str() {
                "Namespace" => drop(strict::<Namespace>(doc, &at)),
                "Deployment" => drop(strict::<Deployment>(doc, &at)),
                "Service" => drop(strict::<Service>(doc, &at)),
                "PodDisruptionBudget" => drop(strict::<PodDisruptionBudget>(doc, &at)),
                "ConfigMap" => drop(strict::<ConfigMap>(doc, &at)),
                "Secret" => drop(strict::<Secret>(doc, &at)),
                "ServiceAccount" => drop(strict::<ServiceAccount>(doc, &at)),
                "Role" => drop(strict::<Role>(doc, &at)),
                "RoleBinding" => drop(strict::<RoleBinding>(doc, &at)),
                "NetworkPolicy" => drop(strict::<NetworkPolicy>(doc, &at)),
                "Job" => drop(strict::<Job>(doc, &at)),
                "Kustomization" => {}
                other => panic!("{at}: kind {other} has no parser in this test"),
            }
            if !matches!(kind.as_str(), "Namespace" | "Kustomization") {
                assert_eq!(
                    doc["metadata"]["namespace"].as_str(),
                    Some("recover-demo"),
                    "{at} ({kind})"
                );
            }
            kinds.push(kind);
        }
    }
    for k in [
        "Namespace",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "ConfigMap",
        "Role",
        "RoleBinding",
        "ServiceAccount",
        "NetworkPolicy",
        "Job",
    ] {
        assert!(kinds.iter().any(|x| x == k), "no {k} in manifests/");
    }
    for r in docs(&std::fs::read_to_string(manifests_dir().join("kustomization.yaml")).unwrap())[0]
        ["resources"]
        .as_sequence()
        .unwrap()
    {
        assert!(
            manifests_dir().join(r.as_str().unwrap()).exists(),
            "kustomization lists {r:?}"
        );
    }
}

/// (name, pod spec) of every pod template.
fn pod_specs(all: &[serde_yaml::Value]) -> Vec<(String, PodSpec)> {
    all.iter()
        .filter(|d| {
            matches!(
                d["kind"].as_str(),
                Some("Deployment" | "Job" | "StatefulSet" | "DaemonSet")
            )
        })
        .map(|d| {
            (
                name(d),
                serde_yaml::from_value(d["spec"]["template"]["spec"].clone()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn every_pod_meets_pod_security_restricted_with_a_read_only_root() {
    let all = rendered();
    let ns = all.iter().find(|d| d["kind"] == "Namespace").unwrap();
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "restricted"
    );
    let specs = pod_specs(&all);
    assert!(
        specs.len() >= 5,
        "{:?}",
        specs.iter().map(|s| &s.0).collect::<Vec<_>>()
    );
    let allowed_volumes = [
        "configMap",
        "secret",
        "emptyDir",
        "projected",
        "downwardAPI",
        "persistentVolumeClaim",
        "ephemeral",
        "csi",
    ];
    for (what, spec) in specs {
        let psc = spec.security_context.clone().unwrap_or_default();
        assert!(
            !spec.host_network.unwrap_or(false)
                && !spec.host_pid.unwrap_or(false)
                && !spec.host_ipc.unwrap_or(false),
            "{what}: host namespaces"
        );
        for v in spec.volumes.iter().flatten() {
            let j = serde_json::to_value(v).unwrap();
            let kind = j
                .as_object()
                .unwrap()
                .keys()
                .find(|k| *k != "name")
                .cloned()
                .unwrap_or_default();
            assert!(
                allowed_volumes.contains(&kind.as_str()),
                "{what}: volume type {kind}"
            );
        }
        for c in spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
        {
            let at = format!("{what} container {}", c.name);
            let sc = c.security_context.clone().unwrap_or_default();
            let non_root = sc.run_as_non_root.or(psc.run_as_non_root);
            assert_eq!(non_root, Some(true), "{at}: runAsNonRoot");
            assert_ne!(
                sc.run_as_user.or(psc.run_as_user),
                Some(0),
                "{at}: runAsUser 0"
            );
            let seccomp = sc
                .seccomp_profile
                .clone()
                .or(psc.seccomp_profile.clone())
                .map(|s| s.type_);
            assert!(
                matches!(seccomp.as_deref(), Some("RuntimeDefault" | "Localhost")),
                "{at}: seccompProfile {seccomp:?}"
            );
            assert_eq!(
                sc.allow_privilege_escalation,
                Some(false),
                "{at}: allowPrivilegeEscalation"
            );
            assert_ne!(sc.privileged, Some(true), "{at}: privileged");
            let caps = sc.capabilities.clone().unwrap_or_default();
            assert!(
                caps.drop.unwrap_or_default().iter().any(|d| d == "ALL"),
                "{at}: capabilities drop ALL"
            );
            assert!(
                caps.add
                    .unwrap_or_default()
                    .iter()
                    .all(|a| a == "NET_BIND_SERVICE"),
                "{at}: capabilities add"
            );
            assert_eq!(
                sc.read_only_root_filesystem,
                Some(true),
                "{at}: readOnlyRootFilesystem"
            );
            for p in c.ports.iter().flatten() {
                assert!(p.host_port.is_none(), "{at}: hostPort");
            }
            let image = c.image.clone().unwrap_or_default();
            let pinned = image.contains("@sha256:")
                || image
                    .rsplit_once(':')
                    .is_some_and(|(_, tag)| tag == env!("CARGO_PKG_VERSION"));
            assert!(
                pinned,
                "{at}: image {image} is not pinned to the release ({})",
                env!("CARGO_PKG_VERSION")
            );
            assert_ne!(c.image_pull_policy.as_deref(), Some("Always"), "{at}");
        }
    }
}

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
            "{}: Secrets are created by the operator (README)",
            name(&d)
        );
    }
    let published: Vec<&str> = recover::util::secret::WELL_KNOWN
        .iter()
        .copied()
        .filter(|w| w.contains('-'))
        .collect();
    let mut files: Vec<PathBuf> = vec![
        Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile"),
    ];
    for dir in ["manifests", "scripts", "docs"] {
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

#[test]
fn rendered_manifests_pass_kubernetes_validate_strict() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rendered.yaml");
    let text: Vec<String> = rendered()
        .iter()
        .map(|d| serde_yaml::to_string(d).unwrap())
        .collect();
    std::fs::write(&file, text.join("---\n")).unwrap();
    for version in ["1.31.0", "1.37.0"] {
        let out = Command::new("python3")
            .args(["-m", "kubernetes_validate", "--strict", "--quiet", "-k", version])
            .arg(&file)
            .output()
            .expect("kubernetes-validate (pip install kubernetes-validate; scripts/test.sh installs it)");
        assert!(
            out.status.success(),
            "kubernetes-validate --strict -k {version}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_image_runs_as_the_manifests_non_root_user_in_a_directory_it_owns() {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile")).unwrap();
    let last_stage = text.rsplit("\nFROM ").next().unwrap();
    let user = last_stage
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER in the final stage");
    assert_eq!(
        user.trim(),
        "10001:10001",
        "numeric, non-root, so runAsNonRoot can check it"
    );
    let workdir = last_stage
        .lines()
        .find_map(|l| l.strip_prefix("WORKDIR "))
        .expect("a WORKDIR");
    assert!(
        last_stage.contains(&format!(
            "install -d -o 10001 -g 10001 -m 0750 {}",
            workdir.trim()
        )),
        "the working directory is created owned by the user"
    );
    for (what, spec) in pod_specs(&rendered()) {
        let uid = spec.security_context.and_then(|s| s.run_as_user);
        assert_eq!(uid, Some(10001), "{what}: runAsUser matches the image");
    }
}
