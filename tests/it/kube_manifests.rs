//! Every document in `manifests/` parses into its k8s-openapi type (chosen by kind, with
//! unknown fields refused), the kustomization lists files that exist, and the Roles equal
//! the permission tables in `platform::kube::rbac`, so RBAC cannot drift from the code.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use recover::platform::kube::rbac::{self, Permission};
use serde::de::DeserializeOwned;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests")
}

/// Parse into `T`, rejecting any field `T` does not know (a typo would otherwise vanish).
fn strict<T: DeserializeOwned + serde::Serialize>(
    doc: &serde_yaml::Value,
    file: &str,
    idx: usize,
) -> T {
    let v: T = serde_path_to_error::deserialize(doc.clone())
        .unwrap_or_else(|e| panic!("{file} document {idx}: field {}: {}", e.path(), e.inner()));
    let back = serde_yaml::to_value(&v).unwrap();
    let mut lost = Vec::new();
    unknown_fields(doc, &back, String::new(), &mut lost);
    assert!(
        lost.is_empty(),
        "{file} document {idx}: unknown fields {lost:?}"
    );
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
                    // empty maps/lists may be dropped on the way back; that is not a typo
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

#[derive(Default)]
struct Parsed {
    roles: Vec<Role>,
    deployments: Vec<Deployment>,
    kinds: Vec<String>,
}

fn parse_file(path: &Path, into: &mut Parsed) {
    let file = path.file_name().unwrap().to_string_lossy().to_string();
    let text = std::fs::read_to_string(path).unwrap();
    for (idx, de) in serde_yaml::Deserializer::from_str(&text).enumerate() {
        let doc = serde_yaml::Value::deserialize(de).unwrap_or_else(|e| panic!("{file}: {e}"));
        if doc.is_null() {
            continue;
        }
        let kind = doc["kind"]
            .as_str()
            .unwrap_or_else(|| panic!("{file} document {idx}: no kind"))
            .to_string();
        match kind.as_str() {
            "Namespace" => drop(strict::<Namespace>(&doc, &file, idx)),
            "Deployment" => into.deployments.push(strict(&doc, &file, idx)),
            "Service" => drop(strict::<Service>(&doc, &file, idx)),
            "PodDisruptionBudget" => drop(strict::<PodDisruptionBudget>(&doc, &file, idx)),
            "ConfigMap" => drop(strict::<ConfigMap>(&doc, &file, idx)),
            "Secret" => drop(strict::<Secret>(&doc, &file, idx)),
            "ServiceAccount" => drop(strict::<ServiceAccount>(&doc, &file, idx)),
            "Role" => into.roles.push(strict(&doc, &file, idx)),
            "RoleBinding" => drop(strict::<RoleBinding>(&doc, &file, idx)),
            "Job" => drop(strict::<Job>(&doc, &file, idx)),
            "Kustomization" => {}
            other => panic!("{file} document {idx}: kind {other} has no parser in this test"),
        }
        if !matches!(kind.as_str(), "Namespace" | "Kustomization") {
            assert_eq!(
                doc["metadata"]["namespace"].as_str(),
                Some("recover-demo"),
                "{file} document {idx} ({kind}): everything lives in namespace recover-demo"
            );
        }
        into.kinds.push(kind);
    }
}

use serde::Deserialize;

fn parse_all() -> Parsed {
    let mut parsed = Parsed::default();
    let mut files: Vec<PathBuf> = std::fs::read_dir(manifests_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    for f in files {
        parse_file(&f, &mut parsed);
    }
    parsed
}

#[test]
fn every_manifest_parses_into_its_kubernetes_type() {
    let parsed = parse_all();
    for kind in [
        "Namespace",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "ConfigMap",
        "Role",
        "RoleBinding",
        "ServiceAccount",
        "Job",
    ] {
        assert!(
            parsed.kinds.iter().any(|k| k == kind),
            "no {kind} in manifests/"
        );
    }
    let names: BTreeSet<String> = parsed
        .deployments
        .iter()
        .filter_map(|d| d.metadata.name.clone())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "config-service".into(),
            "recover-gate".into(),
            "recover-serve".into(),
            "workers".into()
        ])
    );
    for d in &parsed.deployments {
        let spec = d.spec.as_ref().unwrap();
        let sel = spec.selector.match_labels.clone().unwrap();
        let labels = spec
            .template
            .metadata
            .as_ref()
            .unwrap()
            .labels
            .clone()
            .unwrap();
        assert!(
            sel.iter().all(|(k, v)| labels.get(k) == Some(v)),
            "{:?}: selector does not match its template",
            d.metadata.name
        );
    }
}

#[test]
fn kustomization_lists_existing_files() {
    let text = std::fs::read_to_string(manifests_dir().join("kustomization.yaml")).unwrap();
    let k: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let resources = k["resources"].as_sequence().expect("resources");
    assert!(!resources.is_empty());
    for r in resources {
        let f = r.as_str().unwrap();
        assert!(
            manifests_dir().join(f).exists(),
            "kustomization lists missing file {f}"
        );
    }
}

/// (group, resource, verb, resourceNames) for every grant in a Role.
fn grants(role: &Role) -> BTreeSet<(String, String, String, Vec<String>)> {
    let mut out = BTreeSet::new();
    for rule in role.rules.clone().unwrap_or_default() {
        let mut names = rule.resource_names.clone().unwrap_or_default();
        names.sort();
        for g in rule.api_groups.clone().unwrap_or_default() {
            for r in rule.resources.clone().unwrap_or_default() {
                for v in &rule.verbs {
                    assert_ne!(v, "*", "no wildcard verbs");
                    assert_ne!(r, "*", "no wildcard resources");
                    out.insert((g.clone(), r.clone(), v.clone(), names.clone()));
                }
            }
        }
    }
    out
}

fn table(perms: &[Permission]) -> BTreeSet<(String, String, String, Vec<String>)> {
    perms
        .iter()
        .map(|p| {
            let mut names: Vec<String> = p.resource_names.iter().map(|s| s.to_string()).collect();
            names.sort();
            (
                p.api_group.to_string(),
                p.resource.to_string(),
                p.verb.to_string(),
                names,
            )
        })
        .collect()
}

fn role(parsed: &Parsed, name: &str) -> Role {
    parsed
        .roles
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no Role {name}"))
        .clone()
}

#[test]
fn the_controller_role_is_exactly_the_code_table() {
    let parsed = parse_all();
    let granted = grants(&role(&parsed, "recover-controller"));
    let needed = table(rbac::REQUIRED);
    let missing: Vec<_> = needed.difference(&granted).collect();
    let extra: Vec<_> = granted.difference(&needed).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "Role drifted from rbac::REQUIRED: missing {missing:?}, extra {extra:?}"
    );
    for opt in table(rbac::OPTIONAL) {
        assert!(
            !granted.contains(&opt),
            "opt-in permission {opt:?} must not be granted by default"
        );
    }
    let gate = grants(&role(&parsed, "recover-gate"));
    assert_eq!(gate, table(rbac::GATE_REQUIRED));
}
