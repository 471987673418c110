//! The Kubernetes permissions `recover` uses, one constant per kind of call.
//!
//! Every API call site names its permission here, so a 403 says which Role rule is missing
//! instead of only "forbidden". The Roles themselves live in `manifests/`; the test suite
//! runs every call the controller, the gate and serve make against a fake API server that
//! enforces exactly those Roles, and fails on a denied call or a rule nothing used.
//! [`classify`] reads a request the way the API server's authorizer does, for that fake and
//! for the 403 hint.

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
/// Name of the ConfigMap holding `recover serve`'s budgets, breakers and dedupe keys.
pub const SERVE_STATE_CONFIGMAP: &str = "recover-serve-state";
/// The field manager every write names, so server-side apply and GitOps tools see which
/// fields `recover` owns instead of fighting over them.
pub const FIELD_MANAGER: &str = "recover";

const NAMED_CONFIGMAPS: &[&str] = &[LIMIT_CONFIGMAP, JOURNAL_CONFIGMAP];
const GATE_CONFIGMAP: &[&str] = &[LIMIT_CONFIGMAP];
const SERVE_CONFIGMAP: &[&str] = &[SERVE_STATE_CONFIGMAP];

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

// The controller (`recover --target kube`, the runbook Job, `recover serve`).

/// List the target's pods (replicas, readiness, gate and worker pods for scrapes).
pub const PODS_LIST: Permission = p("", "pods", "list", &[]);
/// Read one pod (is the evicted pod gone yet).
pub const PODS_GET: Permission = p("", "pods", "get", &[]);
/// The pod cache's watch (scrape targets without a LIST per round).
pub const PODS_WATCH: Permission = p("", "pods", "watch", &[]);
/// Fallback when the caller allows it and eviction stays blocked: delete the pod.
pub const PODS_DELETE: Permission = p("", "pods", "delete", &[]);
/// Evict a pod through the Eviction API (honours PodDisruptionBudgets).
pub const PODS_EVICT: Permission = p("", "pods/eviction", "create", &[]);
/// GET through the API server's pod proxy: `/metrics` scrapes from outside the cluster.
pub const PODS_PROXY_GET: Permission = p("", "pods/proxy", "get", &[]);
/// POST through the pod proxy: `/admin/drain`, `/admin/warm` from outside the cluster.
pub const PODS_PROXY_POST: Permission = p("", "pods/proxy", "create", &[]);
/// Read the gate limit and the journal ConfigMaps.
pub const CONFIGMAPS_GET: Permission = p("", "configmaps", "get", NAMED_CONFIGMAPS);
/// Set the gate limit; mirror the journal.
pub const CONFIGMAPS_PATCH: Permission = p("", "configmaps", "patch", NAMED_CONFIGMAPS);
/// A Kubernetes Event on the target's Deployment or StatefulSet for each step.
pub const EVENTS_CREATE: Permission = p("", "events", "create", &[]);
/// The target's owner, for its UID: an Event without it is not shown by `kubectl describe`.
pub const DEPLOYMENTS_GET: Permission = p("apps", "deployments", "get", &[]);
pub const STATEFULSETS_GET: Permission = p("apps", "statefulsets", "get", &[]);
/// Autoscalers that would fight a restart (preflight).
pub const HPAS_LIST: Permission = p("autoscaling", "horizontalpodautoscalers", "list", &[]);
/// The per-target lock.
pub const LEASES_GET: Permission = p("coordination.k8s.io", "leases", "get", &[]);
pub const LEASES_CREATE: Permission = p("coordination.k8s.io", "leases", "create", &[]);
pub const LEASES_UPDATE: Permission = p("coordination.k8s.io", "leases", "update", &[]);

// The gate (`recover gate --limit-configmap --peers-service`).

/// Follow the limit ConfigMap: list and watch it by name (a field selector on
/// metadata.name, which RBAC matches against resourceNames).
pub const GATE_LIMIT_LIST: Permission = p("", "configmaps", "list", GATE_CONFIGMAP);
pub const GATE_LIMIT_WATCH: Permission = p("", "configmaps", "watch", GATE_CONFIGMAP);
/// Follow the gate Service's EndpointSlices: how many gate replicas share the limit.
pub const ENDPOINTSLICES_LIST: Permission = p("discovery.k8s.io", "endpointslices", "list", &[]);
pub const ENDPOINTSLICES_WATCH: Permission = p("discovery.k8s.io", "endpointslices", "watch", &[]);

// `recover serve`'s own state.

pub const SERVE_STATE_GET: Permission = p("", "configmaps", "get", SERVE_CONFIGMAP);
pub const SERVE_STATE_PATCH: Permission = p("", "configmaps", "patch", SERVE_CONFIGMAP);

/// An API request as the authorizer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub api_group: String,
    pub resource: String,
    pub verb: String,
    /// The object's name; for a list or watch, the name a `metadata.name=` field selector
    /// pins it to (so a rule with resourceNames can allow it).
    pub name: Option<String>,
    pub namespace: Option<String>,
}

/// Read `(method, path?query)` as the API server's authorizer does: verb from the method
/// (GET with `watch=true` is `watch`, a GET without a name `list`), subresource after the
/// name, the pod proxy's `name:port` as the pod's name. `None` for paths outside the
/// resource API (discovery, version).
pub fn classify(method: &str, uri: &str) -> Option<Request> {
    let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, rest): (String, &[&str]) = match parts.as_slice() {
        ["api", "v1", rest @ ..] => (String::new(), rest),
        ["apis", group, _version, rest @ ..] => (group.to_string(), rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        rest => (None, rest),
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
    let param = |key: &str| {
        query.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            (k == key).then(|| percent_decode(v))
        })
    };
    let watching = param("watch").is_some_and(|v| v == "true" || v == "1");
    let verb = match (method, name.is_some()) {
        ("GET", _) if watching => "watch",
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
    let mut name = name.map(|n| n.split(':').next().unwrap_or_default().to_string());
    if name.is_none() && matches!(verb, "list" | "watch") {
        name = param("fieldSelector").and_then(|fs| {
            fs.split(',')
                .find_map(|r| r.strip_prefix("metadata.name=").map(str::to_string))
        });
    }
    Some(Request {
        api_group: group,
        resource,
        verb: verb.to_string(),
        name,
        namespace,
    })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// True when `perm` allows `req`.
pub fn allows(perm: &Permission, req: &Request) -> bool {
    perm.api_group == req.api_group
        && perm.resource == req.resource
        && perm.verb == req.verb
        && (perm.resource_names.is_empty()
            || req
                .name
                .as_deref()
                .is_some_and(|n| perm.resource_names.contains(&n)))
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
    fn classifies_subresources_proxy_ports_and_watches() {
        let c = classify("POST", "/api/v1/namespaces/shop/pods/web-1/eviction").unwrap();
        assert_eq!(
            (c.api_group.as_str(), c.resource.as_str(), c.verb.as_str()),
            ("", "pods/eviction", "create")
        );
        let c = classify(
            "GET",
            "/api/v1/namespaces/shop/pods/web-1:9001/proxy/metrics",
        )
        .unwrap();
        assert_eq!(
            (c.resource.as_str(), c.verb.as_str(), c.name.as_deref()),
            ("pods/proxy", "get", Some("web-1"))
        );
        let c = classify(
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/shop/leases/x",
        )
        .unwrap();
        assert_eq!(
            (c.api_group.as_str(), c.resource.as_str(), c.verb.as_str()),
            ("coordination.k8s.io", "leases", "update")
        );
        let c = classify(
            "GET",
            "/api/v1/namespaces/shop/configmaps?fieldSelector=metadata.name%3Drecover-gate-limit&watch=true&resourceVersion=5",
        )
        .unwrap();
        assert_eq!(
            (c.verb.as_str(), c.name.as_deref()),
            ("watch", Some(LIMIT_CONFIGMAP))
        );
        assert!(allows(&GATE_LIMIT_WATCH, &c));
        let c = classify("GET", "/api/v1/namespaces/shop/configmaps").unwrap();
        assert!(!allows(&GATE_LIMIT_LIST, &c), "a list of every ConfigMap");
        let c = classify(
            "GET",
            "/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Drecover-gate",
        )
        .unwrap();
        assert!(allows(&ENDPOINTSLICES_LIST, &c));
        let c = classify("PATCH", "/api/v1/namespaces/shop/configmaps/other").unwrap();
        assert!(!allows(&CONFIGMAPS_PATCH, &c));
        assert!(classify("GET", "/version").is_none());
    }
}
