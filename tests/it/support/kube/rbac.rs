//! The fake API server's authorizer: the Roles and RoleBindings of `manifests/`, as
//! `kubectl kustomize` renders them, decide every request a service account makes, the way the API server's RBAC
//! authorizer does (verb from method and `watch=true`, subresource after the name, a
//! `metadata.name=` field selector counting as the name of a list or watch). Independent
//! of the crate's own permission table on purpose: the Roles are checked against what the
//! code really sends.

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// A request as the authorizer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attrs {
    pub group: String,
    pub resource: String,
    pub verb: String,
    pub name: Option<String>,
}

/// One rule of one Role, by its place: `(role, rule index)`.
pub type RuleId = (String, usize);

/// Every service account's rules.
#[derive(Debug, Default, Clone)]
pub struct Roles {
    pub by_account: BTreeMap<String, Vec<(RuleId, PolicyRule)>>,
}

fn decode(s: &str) -> String {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Read a request; `None` for non-resource paths (discovery, version), which RBAC does not
/// gate in this fake.
pub fn attrs(method: &str, path: &str, query: &str) -> Option<Attrs> {
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, rest) = match parts.as_slice() {
        ["api", "v1", rest @ ..] => (String::new(), rest),
        ["apis", g, _v, rest @ ..] => (g.to_string(), rest),
        _ => return None,
    };
    let rest = match rest {
        ["namespaces", _ns, rest @ ..] if !rest.is_empty() => rest,
        r => r,
    };
    let (resource, name) = match rest {
        [r] => (r.to_string(), None),
        [r, n] => (r.to_string(), Some(n.to_string())),
        [r, n, sub, ..] => (format!("{r}/{sub}"), Some(n.to_string())),
        [] => return None,
    };
    let q: BTreeMap<String, String> = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), decode(v)))
        .collect();
    let watch = q.get("watch").is_some_and(|v| v == "true" || v == "1");
    let verb = match (method, name.is_some(), watch) {
        ("GET", _, true) => "watch",
        ("GET", false, _) => "list",
        ("GET", true, _) => "get",
        ("POST", _, _) => "create",
        ("PUT", _, _) => "update",
        ("PATCH", _, _) => "patch",
        ("DELETE", true, _) => "delete",
        ("DELETE", false, _) => "deletecollection",
        _ => return None,
    };
    let mut name = name.map(|n| n.split(':').next().unwrap_or_default().to_string());
    if name.is_none() {
        name = q.get("fieldSelector").and_then(|fs| {
            fs.split(',')
                .find_map(|r| r.strip_prefix("metadata.name=").map(str::to_string))
        });
    }
    Some(Attrs {
        group,
        resource,
        verb: verb.to_string(),
        name,
    })
}

fn rule_allows(rule: &PolicyRule, a: &Attrs) -> bool {
    let has = |list: &Option<Vec<String>>, v: &str| {
        list.as_ref()
            .is_some_and(|l| l.iter().any(|x| x == v || x == "*"))
    };
    let names_ok = match &rule.resource_names {
        None => true,
        Some(n) if n.is_empty() => true,
        Some(n) => a.name.as_ref().is_some_and(|name| n.contains(name)),
    };
    has(&rule.api_groups, &a.group)
        && has(&rule.resources, &a.resource)
        && rule.verbs.iter().any(|v| v == &a.verb || v == "*")
        && names_ok
}

impl Roles {
    /// Every Role and RoleBinding of the manifests as `kubectl kustomize` renders them
    /// (what `kubectl apply -k` sends), plus the per-run Job's file.
    pub fn from_manifests(dir: &Path) -> Roles {
        let mut roles: BTreeMap<String, Vec<PolicyRule>> = BTreeMap::new();
        let mut bindings: Vec<RoleBinding> = Vec::new();
        let out = std::process::Command::new("kubectl")
            .arg("kustomize")
            .arg(dir)
            .output()
            .expect("kubectl (scripts/test.sh installs it) renders the manifests");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut texts = vec![String::from_utf8(out.stdout).unwrap()];
        texts.push(std::fs::read_to_string(dir.join("job-runbook.yaml")).unwrap_or_default());
        for text in texts {
            for de in serde_yaml::Deserializer::from_str(&text) {
                let doc = serde_yaml::Value::deserialize(de).unwrap();
                match doc["kind"].as_str() {
                    Some("Role") => {
                        let r: Role = serde_yaml::from_value(doc).unwrap();
                        roles.insert(r.metadata.name.unwrap(), r.rules.unwrap_or_default());
                    }
                    Some("RoleBinding") => bindings.push(serde_yaml::from_value(doc).unwrap()),
                    _ => {}
                }
            }
        }
        let mut out = Roles::default();
        // The person running recover from a laptop, bound to the two Roles as
        // laptop-rbac.yaml tells them to.
        for role in ["recover-controller", "recover-laptop"] {
            let entry = out
                .by_account
                .entry(super::OPERATOR.to_string())
                .or_default();
            for (i, r) in roles
                .get(role)
                .cloned()
                .unwrap_or_default()
                .iter()
                .enumerate()
            {
                entry.push(((role.to_string(), i), r.clone()));
            }
        }
        for b in bindings {
            let rules = roles.get(&b.role_ref.name).cloned().unwrap_or_default();
            for s in b.subjects.unwrap_or_default() {
                if s.kind != "ServiceAccount" {
                    continue;
                }
                let entry = out.by_account.entry(s.name.clone()).or_default();
                for (i, r) in rules.iter().enumerate() {
                    entry.push(((b.role_ref.name.clone(), i), r.clone()));
                }
            }
        }
        out
    }

    /// The rules of `account` that allow `a` (empty: denied).
    pub fn allowing(&self, account: &str, a: &Attrs) -> Vec<RuleId> {
        self.by_account
            .get(account)
            .into_iter()
            .flatten()
            .filter(|(_, r)| rule_allows(r, a))
            .map(|(id, _)| id.clone())
            .collect()
    }
}
