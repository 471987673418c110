//! The one table of Kubernetes permissions the controller uses.
//!
//! Every API call site names its entry here, the Role in `manifests/controller-rbac.yaml`
//! is compared against this table in a test, and a recording test maps every request the
//! platform really sends back onto it. That way the Role cannot drift from the code in
//! either direction: no call the Role forbids, no grant nothing uses.

/// One verb on one (sub)resource in the target namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Permission {
    /// API group: "" for the core group.
    pub api_group: &'static str,
    /// Resource, with a subresource after a slash (`pods/eviction`).
    pub resource: &'static str,
    pub verb: &'static str,
    /// When not empty, the Role grants the verb only on these object names.
    pub resource_names: &'static [&'static str],
}

/// Name of the ConfigMap holding the gate's limit (key [`LIMIT_KEY`]).
pub const LIMIT_CONFIGMAP: &str = "recover-gate-limit";
/// Key in [`LIMIT_CONFIGMAP`] holding the limit JSON.
pub const LIMIT_KEY: &str = "limit.json";
/// Name of the ConfigMap holding mirrored journals and rollout state.
pub const JOURNAL_CONFIGMAP: &str = "recover-journal";

const NAMED_CONFIGMAPS: &[&str] = &[LIMIT_CONFIGMAP, JOURNAL_CONFIGMAP];

const fn p(
    api_group: &'static str,
    resource: &'static str,
    verb: &'static str,
    resource_names: &'static [&'static str],
) -> Permission {
    Permission {
        api_group,
        resource,
        verb,
        resource_names,
    }
}

/// List the target's pods (replicas, readiness, gate and worker pods for scrapes).
pub const PODS_LIST: Permission = p("", "pods", "list", &[]);
/// Read one pod (is the evicted pod gone yet).
pub const PODS_GET: Permission = p("", "pods", "get", &[]);
/// Fallback when the caller allows it and eviction stays blocked: delete the pod.
pub const PODS_DELETE: Permission = p("", "pods", "delete", &[]);
/// Evict a pod through the Eviction API (honours PodDisruptionBudgets).
pub const PODS_EVICT: Permission = p("", "pods/eviction", "create", &[]);
/// GET through the API server's pod proxy: `/metrics` scrapes.
pub const PODS_PROXY_GET: Permission = p("", "pods/proxy", "get", &[]);
/// POST through the pod proxy: `/admin/drain`, `/admin/warm`.
pub const PODS_PROXY_POST: Permission = p("", "pods/proxy", "create", &[]);
/// Read the gate limit and the journal ConfigMaps.
pub const CONFIGMAPS_GET: Permission = p("", "configmaps", "get", NAMED_CONFIGMAPS);
/// Set the gate limit; mirror the journal.
pub const CONFIGMAPS_PATCH: Permission = p("", "configmaps", "patch", NAMED_CONFIGMAPS);
/// A Kubernetes Event on the target Deployment for each step.
pub const EVENTS_CREATE: Permission = p("", "events", "create", &[]);
/// The per-target lock.
pub const LEASES_GET: Permission = p("coordination.k8s.io", "leases", "get", &[]);
pub const LEASES_CREATE: Permission = p("coordination.k8s.io", "leases", "create", &[]);
pub const LEASES_UPDATE: Permission = p("coordination.k8s.io", "leases", "update", &[]);

/// Everything the controller (`recover --target kube`) calls by default. The Role in
/// `manifests/controller-rbac.yaml` must equal this.
pub const REQUIRED: &[Permission] = &[
    PODS_LIST,
    PODS_GET,
    PODS_EVICT,
    PODS_PROXY_GET,
    PODS_PROXY_POST,
    CONFIGMAPS_GET,
    CONFIGMAPS_PATCH,
    EVENTS_CREATE,
    LEASES_GET,
    LEASES_CREATE,
    LEASES_UPDATE,
];

/// Calls made only when the caller opts in (`allow_delete_fallback`). Not in the shipped
/// Role on purpose: deleting past a PodDisruptionBudget is a decision a human grants.
pub const OPTIONAL: &[Permission] = &[PODS_DELETE];

/// What the gate's own ServiceAccount needs to read its limit ([`super::limit_source`]).
pub const GATE_LIMIT_GET: Permission = p("", "configmaps", "get", &[LIMIT_CONFIGMAP]);
pub const GATE_REQUIRED: &[Permission] = &[GATE_LIMIT_GET];

/// The permission an HTTP request to the API server needs, if it is one this crate
/// knows how to classify: `(method, path)` as sent, e.g.
/// `("POST", "/api/v1/namespaces/shop/pods/a/eviction")`. Used by the drift test and to
/// explain a 403.
pub fn classify(
    method: &str,
    path: &str,
) -> Option<(&'static str, String, &'static str, Option<String>)> {
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, rest): (&'static str, &[&str]) = match parts.as_slice() {
        ["api", "v1", rest @ ..] => ("", rest),
        ["apis", "coordination.k8s.io", "v1", rest @ ..] => ("coordination.k8s.io", rest),
        ["apis", "events.k8s.io", "v1", rest @ ..] => ("events.k8s.io", rest),
        _ => return None,
    };
    let rest = match rest {
        ["namespaces", _ns, rest @ ..] => rest,
        _ => return None,
    };
    let (resource, name, sub) = match rest {
        [res] => (res.to_string(), None, None),
        [res, name] => (res.to_string(), Some(name.to_string()), None),
        [res, name, sub, ..] => (res.to_string(), Some(name.to_string()), Some(*sub)),
        [] => return None,
    };
    let resource = match sub {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource,
    };
    let verb = match (method, name.is_some()) {
        ("GET", false) => "list",
        ("GET", true) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => return None,
    };
    // The pod proxy names the port after the pod (`name:port`); RBAC sees the pod name.
    let name = name.map(|n| n.split(':').next().unwrap_or_default().to_string());
    Some((group, resource, verb, name))
}

/// True when `perm` (from [`REQUIRED`]) allows the classified request.
pub fn allows(
    perm: &Permission,
    group: &str,
    resource: &str,
    verb: &str,
    name: Option<&str>,
) -> bool {
    perm.api_group == group
        && perm.resource == resource
        && perm.verb == verb
        && (perm.resource_names.is_empty()
            || name.is_some_and(|n| perm.resource_names.contains(&n)))
}

/// A human hint for a 403: which Role rule is missing.
pub fn describe(perm: &Permission) -> String {
    let group = if perm.api_group.is_empty() {
        "core".to_string()
    } else {
        perm.api_group.to_string()
    };
    let names = if perm.resource_names.is_empty() {
        String::new()
    } else {
        format!(" (resourceNames {})", perm.resource_names.join(", "))
    };
    format!(
        "{} {} in API group {group}{names}",
        perm.verb, perm.resource
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_subresources_and_proxy_ports() {
        let c = classify("POST", "/api/v1/namespaces/shop/pods/web-1/eviction").unwrap();
        assert_eq!((c.0, c.1.as_str(), c.2), ("", "pods/eviction", "create"));
        let c = classify(
            "GET",
            "/api/v1/namespaces/shop/pods/web-1:9001/proxy/metrics",
        )
        .unwrap();
        assert_eq!(
            (c.1.as_str(), c.2, c.3.as_deref()),
            ("pods/proxy", "get", Some("web-1"))
        );
        let c = classify(
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/shop/leases/x",
        )
        .unwrap();
        assert_eq!(
            (c.0, c.1.as_str(), c.2),
            ("coordination.k8s.io", "leases", "update")
        );
        assert!(allows(
            &CONFIGMAPS_PATCH,
            "",
            "configmaps",
            "patch",
            Some(LIMIT_CONFIGMAP)
        ));
        assert!(!allows(
            &CONFIGMAPS_PATCH,
            "",
            "configmaps",
            "patch",
            Some("other")
        ));
    }
}
