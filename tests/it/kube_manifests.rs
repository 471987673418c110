//! The manifests as an operator deploys them: every document parses into its k8s-openapi
//! type (unknown fields refused), `kubectl kustomize manifests` renders what
//! `kubernetes-validate --strict` accepts, every pod meets Pod Security "restricted" with
//! a read-only root filesystem, images are pinned and the image's user is the pods' user.
//! (NetworkPolicies, budgets and secrets: `kube_manifest_policies`; the Roles against what
//! the code calls: `kube_rbac`.)

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, PodSpec, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn manifests_dir() -> PathBuf {
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

pub fn docs(text: &str) -> Vec<serde_yaml::Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| serde_yaml::Value::deserialize(d).unwrap())
        .filter(|d| !d.is_null())
        .collect()
}

/// `kubectl kustomize manifests`, plus the per-run Job template: everything deployed.
pub fn rendered() -> Vec<serde_yaml::Value> {
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

pub fn name(d: &serde_yaml::Value) -> String {
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
pub fn pod_specs(all: &[serde_yaml::Value]) -> Vec<(String, PodSpec)> {
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
