//! An in-memory cluster that behaves like a real API server where the platform depends on
//! it: kube-fake-client keeps the objects; what it lacks is emulated at the HTTP layer, so
//! the platform's real API code runs unchanged:
//! - RBAC: each service account's client is held to the Roles in `manifests/`
//!   ([`rbac`]), 403 with the API server's message otherwise;
//! - the Eviction subresource with PodDisruptionBudget semantics ([`pods`]): 429 with the
//!   budget named in the causes, Retry-After while the disruption controller catches up,
//!   `unhealthyPodEvictionPolicy`, 500 for a pod under two budgets, terminal and Pending
//!   pods bypassing the budget;
//! - graceful termination: an evicted or deleted pod is terminating (deletionTimestamp) for
//!   its grace period, then gone;
//! - a ReplicaSet controller whose replacements go Pending -> Running -> Ready, or stay
//!   Pending, or crash-loop; an EndpointSlice controller for the gate Service ([`controllers`]);
//! - the pod proxy, to real HTTP servers on 127.0.0.1, or hanging, or refusing ([`proxy`]);
//! - watches, for any list ([`watch`]);
//! - optimistic concurrency: a merge patch carrying `metadata.resourceVersion` that is not
//!   the object's answers 409 Conflict (the apiserver's patch handler applies the patch to
//!   the stored object and its update checks the resourceVersion precondition:
//!   k8s.io/apiserver endpoints/handlers/patch.go, registry/generic/registry/store.go);
//! - API Priority and Fairness: on demand, requests answered 429 as plain text with a
//!   Retry-After header, no Status (k8s.io/apiserver server/filters `tooManyRequests`);
//! - a stalled API server for one account's Lease calls (they never answer), to show the
//!   renew deadline is kept on a timer of its own.
//!
//! Every request is recorded with who sent it and which Role rules allowed it.

pub mod controllers;
pub mod gates;
pub mod objects;
pub mod pod_server;
pub mod pods;
pub mod proxy;
pub mod rbac;
pub mod watch;

use axum::body::Body as AxumBody;
use axum::extract::{Request, State};
use axum::response::Response;
use axum::Router;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube_fake_client::ClientBuilder;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

pub use controllers::Replacement;
pub use objects::*;
pub use pod_server::serve_pod;
pub use proxy::Backend;

pub const NS: &str = "recover-demo";
pub const DEPLOY: &str = "config-service";
pub const HASH: &str = "7d9f8c";
pub const GATE: &str = "recover-gate";
pub const GATE_HASH: &str = "55aa";
/// The service accounts of `manifests/`.
pub const CONTROLLER: &str = "recover-controller";
pub const GATE_SA: &str = "recover-gate";
pub const SERVE_SA: &str = "recover-serve";
/// Someone running recover from a laptop, bound to the recover-controller and
/// recover-laptop Roles (laptop-rbac.yaml): the pod proxy is theirs, not the accounts'.
pub const OPERATOR: &str = "operator";

/// One recorded API request.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The service account, or "admin" for the test's own unrestricted client.
    pub who: String,
    pub method: String,
    pub path: String,
    pub query: String,
    /// The Role rules that allowed it (empty and `denied` for a 403).
    pub rules: Vec<rbac::RuleId>,
    pub denied: bool,
}

/// A pod on its way out: gone at `until`.
#[derive(Debug, Clone)]
pub struct Terminating {
    pub uid: String,
    pub until: Instant,
    pub since: String,
}

/// What every route shares.
pub struct Shared {
    pub fake: kube::Client,
    pub roles: Mutex<rbac::Roles>,
    pub log: Mutex<Vec<Recorded>>,
    pub backends: Mutex<HashMap<String, Backend>>,
    /// For pods without a backend of their own (replacements).
    pub default_backend: Mutex<Option<Backend>>,
    pub terminating: Mutex<HashMap<String, Terminating>>,
    pub grace: Mutex<Duration>,
    /// Accepted evictions: (pod name, uid).
    pub evictions: Mutex<Vec<(String, String)>>,
    pub refusals: Mutex<usize>,
    /// Until when, and with which Retry-After, budgets are "still being processed".
    pub catching_up: Mutex<Option<(Instant, u32)>>,
    pub replacement: Mutex<Replacement>,
    pub desired: usize,
    pub stop: CancellationToken,
    /// Calls of non-admin clients to a path containing one of these never answer.
    pub stalled: Mutex<Vec<String>>,
    /// Accounts whose every call is answered 503, as an API server that is down.
    pub refused: Mutex<Vec<String>>,
    /// The next this many evictions are refused by API Priority and Fairness.
    pub apf_evictions: Mutex<u32>,
}

pub struct FakeCluster {
    /// The client of a run from a laptop (RBAC: the recover-controller and recover-laptop
    /// Roles), reaching pods through the API server's pod proxy.
    pub client: kube::Client,
    /// Routed, unrestricted: the test's own reads see what a client sees (terminating pods).
    pub admin: kube::Client,
    /// The bare store: test setup only.
    pub fake: kube::Client,
    pub shared: Arc<Shared>,
    pub stop: CancellationToken,
}

impl Drop for FakeCluster {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn routed(shared: &Arc<Shared>, who: Option<&str>) -> kube::Client {
    let router = Router::new()
        .fallback(route)
        .with_state((shared.clone(), who.map(str::to_string)));
    kube::Client::new(router, NS)
}

impl FakeCluster {
    /// `replicas` ready pods of the config-service Deployment (budget: maxUnavailable 1,
    /// unhealthy pods always evictable, as in `manifests/`), two ready gate pods and
    /// their EndpointSlice, the limit ConfigMap without a limit (as applied) and the journal
    /// ConfigMap; replacements become ready `ready_after` after they appear.
    pub async fn start(replicas: usize, ready_after: Duration) -> FakeCluster {
        let mut builder = ClientBuilder::new()
            .with_object(deployment(DEPLOY, replicas))
            .with_object(deployment(GATE, 2))
            .with_object(pdb(DEPLOY, DEPLOY, 1, true))
            .with_object(configmap("recover-gate-limit", &[]))
            .with_object(configmap("recover-journal", &[]))
            .with_object(configmap("recover-serve-state", &[]));
        for i in 0..replicas {
            builder = builder.with_object(pod(DEPLOY, HASH, &format!("old{i}"), DEPLOY, true));
        }
        for i in 0..2 {
            builder = builder.with_object(pod(GATE, GATE_HASH, &format!("g{i}"), GATE, true));
        }
        let fake = builder.build().await.expect("fake client");
        let stop = CancellationToken::new();
        let shared = Arc::new(Shared {
            fake: fake.clone(),
            roles: Mutex::new(rbac::Roles::from_manifests(
                &Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests"),
            )),
            log: Mutex::default(),
            backends: Mutex::default(),
            default_backend: Mutex::default(),
            terminating: Mutex::default(),
            grace: Mutex::new(Duration::from_millis(100)),
            evictions: Mutex::default(),
            refusals: Mutex::default(),
            catching_up: Mutex::default(),
            replacement: Mutex::new(Replacement::Ready(ready_after)),
            desired: replicas,
            stop: stop.clone(),
            stalled: Mutex::default(),
            refused: Mutex::default(),
            apf_evictions: Mutex::new(0),
        });
        let admin = routed(&shared, None);
        tokio::spawn(controllers::run(shared.clone(), admin.clone()));
        FakeCluster {
            client: routed(&shared, Some(OPERATOR)),
            admin,
            fake,
            shared,
            stop,
        }
    }

    /// Grant `account` one more rule, as an operator would with an extra Role.
    pub fn grant(&self, account: &str, group: &str, resource: &str, verb: &str) {
        let rule: k8s_openapi::api::rbac::v1::PolicyRule =
            serde_json::from_value(serde_json::json!({
                "apiGroups": [group], "resources": [resource], "verbs": [verb]
            }))
            .unwrap();
        let mut roles = self.shared.roles.lock().unwrap();
        let rules = roles.by_account.entry(account.to_string()).or_default();
        let id = ("granted-in-test".to_string(), rules.len());
        rules.push((id, rule));
    }

    /// Serve the API as `account` over real HTTP on 127.0.0.1 and write a kubeconfig for
    /// it, so a `recover` process can be pointed at the fake cluster (`KUBECONFIG=...`).
    pub async fn kubeconfig_as(&self, account: &str, dir: &Path) -> std::path::PathBuf {
        let router = Router::new()
            .fallback(route)
            .with_state((self.shared.clone(), Some(account.to_string())));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let stop = self.stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
        });
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster: {{server: 'http://{addr}'}}\nusers:\n- name: {account}\n  user: {{token: fake}}\ncontexts:\n- name: fake\n  context: {{cluster: fake, user: {account}, namespace: {NS}}}\ncurrent-context: fake\n"
            ),
        )
        .expect("kubeconfig");
        path
    }

    /// A client acting as `account` (held to its Roles).
    pub fn client_as(&self, account: &str) -> kube::Client {
        routed(&self.shared, Some(account))
    }

    pub fn recorded(&self) -> Vec<Recorded> {
        self.shared.log.lock().unwrap().clone()
    }

    /// Names of the pods evicted so far, in order (one entry per accepted eviction).
    pub fn evictions(&self) -> Vec<String> {
        self.shared
            .evictions
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.0.clone())
            .collect()
    }

    /// UIDs of the pods evicted so far (a pod evicted twice appears twice).
    pub fn evicted_uids(&self) -> Vec<String> {
        self.shared
            .evictions
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.1.clone())
            .collect()
    }

    pub fn refusals(&self) -> usize {
        *self.shared.refusals.lock().unwrap()
    }

    /// From now on, every Lease call of a non-admin client hangs (never answers).
    pub fn stall_leases(&self) {
        self.stall("/leases");
    }

    /// From now on, every call `account` makes is answered 503 (the API server is
    /// unavailable to it).
    pub fn refuse(&self, account: &str) {
        self.shared
            .refused
            .lock()
            .unwrap()
            .push(account.to_string());
    }

    /// From now on, every call of a non-admin client to a path containing `part` hangs.
    pub fn stall(&self, part: &str) {
        self.shared.stalled.lock().unwrap().push(part.to_string());
    }

    /// The stuck overload as the kubelet shows it: every target pod still Running, its
    /// readiness probe timing out, so Ready=False (the kubelet's prober sets the Ready
    /// condition from the readiness probe: docs, "Pod Lifecycle", container probes).
    pub async fn overload(&self) {
        let api: Api<Pod> = Api::namespaced(self.fake.clone(), NS);
        for mut p in self.target_pods().await {
            let name = p.metadata.name.clone().unwrap();
            let status = p.status.get_or_insert_with(Default::default);
            status.conditions = Some(vec![serde_json::from_value(
                serde_json::json!({"type": "Ready", "status": "False", "reason": "ReadinessProbeFailed"}),
            )
            .unwrap()]);
            p.metadata.resource_version = None;
            api.replace_status(&name, &Default::default(), &p)
                .await
                .expect("pod status");
        }
    }

    /// The next `n` evictions are refused by API Priority and Fairness (429, plain text,
    /// Retry-After: 1).
    pub fn throttle_evictions(&self, n: u32) {
        *self.shared.apf_evictions.lock().unwrap() = n;
    }

    /// Replace the config-service budget.
    pub async fn set_pdb(&self, max_unavailable: i32, always_allow: bool) {
        let api: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
            Api::namespaced(self.fake.clone(), NS);
        let mut p = pdb(DEPLOY, DEPLOY, max_unavailable, always_allow);
        let cur = api.get(DEPLOY).await.unwrap();
        p.metadata.resource_version = cur.metadata.resource_version;
        api.replace(DEPLOY, &Default::default(), &p).await.unwrap();
    }

    /// For `how_long`, every budget answers "still being processed" with this Retry-After.
    pub fn pdb_catching_up(&self, how_long: Duration, retry_after_s: u32) {
        *self.shared.catching_up.lock().unwrap() = Some((Instant::now() + how_long, retry_after_s));
    }

    pub fn set_replacements(&self, r: Replacement) {
        *self.shared.replacement.lock().unwrap() = r;
    }

    pub fn set_grace(&self, d: Duration) {
        *self.shared.grace.lock().unwrap() = d;
    }

    /// Route the pod proxy for `pod` to a local server.
    pub fn set_backend(&self, pod: &str, addr: SocketAddr) {
        self.set_backend_to(pod, Backend::Serve(addr));
    }

    /// What stands behind every pod that has no backend of its own.
    pub fn set_default_backend(&self, b: Backend) {
        *self.shared.default_backend.lock().unwrap() = Some(b);
    }

    pub fn set_backend_to(&self, pod: &str, b: Backend) {
        self.shared
            .backends
            .lock()
            .unwrap()
            .insert(pod.to_string(), b);
    }

    /// The target's pods as a client sees them (terminating ones marked).
    pub async fn target_pods(&self) -> Vec<Pod> {
        let api: Api<Pod> = Api::namespaced(self.admin.clone(), NS);
        let lp = ListParams::default().labels(&format!("app.kubernetes.io/name={DEPLOY}"));
        api.list(&lp).await.expect("list").items
    }

    /// Add a pod to the store (setup).
    pub async fn add_pod(&self, p: Pod) {
        let api: Api<Pod> = Api::namespaced(self.fake.clone(), NS);
        api.create(&Default::default(), &p)
            .await
            .expect("create pod");
    }
}

pub fn status(code: u16, reason: &str, message: &str) -> Response {
    status_with(code, reason, message, serde_json::json!({}))
}

pub fn status_with(code: u16, reason: &str, message: &str, details: serde_json::Value) -> Response {
    let body = serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": if code < 300 {"Success"} else {"Failure"},
        "reason": reason, "message": message, "code": code, "details": details});
    let mut b = Response::builder()
        .status(code)
        .header("content-type", "application/json");
    if let Some(s) = details.get("retryAfterSeconds").and_then(|v| v.as_u64()) {
        b = b.header("retry-after", s.to_string());
    }
    b.body(AxumBody::from(body.to_string())).expect("response")
}

async fn route(State((s, who)): State<(Arc<Shared>, Option<String>)>, req: Request) -> Response {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let attrs = rbac::attrs(&method, &path, &query);
    let (rules, denied) = match (&who, &attrs) {
        (Some(account), Some(a)) => {
            let rules = s.roles.lock().unwrap().allowing(account, a);
            let denied = rules.is_empty();
            (rules, denied)
        }
        _ => (Vec::new(), false),
    };
    s.log.lock().unwrap().push(Recorded {
        who: who.clone().unwrap_or_else(|| "admin".into()),
        method: method.clone(),
        path: path.clone(),
        query: query.clone(),
        rules,
        denied,
    });
    if denied {
        let a = attrs.expect("classified");
        let account = who.unwrap_or_default();
        return status(
            403,
            "Forbidden",
            &format!(
                "{}{} is forbidden: User \"system:serviceaccount:{NS}:{account}\" cannot {} resource \"{}\" in API group \"{}\" in the namespace \"{NS}\"",
                a.resource,
                a.name.map(|n| format!(" \"{n}\"")).unwrap_or_default(),
                a.verb,
                a.resource,
                a.group
            ),
        );
    }
    let watching = query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    if who
        .as_ref()
        .is_some_and(|w| s.refused.lock().unwrap().contains(w))
    {
        return status(
            503,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        );
    }
    let stalled = s
        .stalled
        .lock()
        .unwrap()
        .iter()
        .any(|p| path.contains(p.as_str()));
    if who.is_some() && stalled {
        std::future::pending::<()>().await;
    }
    if method == "POST" && path.ends_with("/eviction") {
        {
            let mut apf = s.apf_evictions.lock().unwrap();
            if *apf > 0 {
                *apf -= 1;
                return too_many_requests(1);
            }
        }
        let body = req
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        return pods::evict(&s, &path, &body).await;
    }
    if method == "PATCH" {
        let (parts, body) = req.into_parts();
        let bytes = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        if let Some(conflict) = stale_patch(&s.fake, &path, &bytes).await {
            return conflict;
        }
        return forward(&s.fake, Request::from_parts(parts, AxumBody::from(bytes))).await;
    }
    if path.contains("/proxy/") || path.ends_with("/proxy") {
        return proxy::proxy(&s, req).await;
    }
    if watching {
        return watch::watch(s.clone(), &path, &query).await;
    }
    if method == "DELETE" && path.contains("/pods/") {
        return pods::delete(&s, &path).await;
    }
    let response = forward(&s.fake, req).await;
    if method == "GET" && (path.ends_with("/pods") || path.contains("/pods/")) {
        return pods::overlay(&s, response).await;
    }
    response
}

/// API Priority and Fairness's refusal: plain text, not a Status, the wait in a header
/// (k8s.io/apiserver/pkg/server/filters, `tooManyRequests`).
pub fn too_many_requests(retry_after_s: u32) -> Response {
    Response::builder()
        .status(429)
        .header("content-type", "text/plain; charset=utf-8")
        .header("retry-after", retry_after_s.to_string())
        .body(AxumBody::from(
            "Too many requests, please try again later.\n",
        ))
        .expect("response")
}

/// 409 for a patch whose `metadata.resourceVersion` is not the stored object's, as the
/// apiserver answers it (`the object has been modified`); `None` to go ahead.
async fn stale_patch(fake: &kube::Client, path: &str, body: &[u8]) -> Option<Response> {
    let patch: serde_json::Value = serde_json::from_slice(body).ok()?;
    let want = patch["metadata"]["resourceVersion"].as_str()?.to_string();
    let req = http::Request::get(path)
        .body(kube::client::Body::from(Vec::new()))
        .ok()?;
    let res = fake.send(req).await.ok()?;
    let bytes = res.into_body().collect().await.ok()?.to_bytes();
    let current: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let have = current["metadata"]["resourceVersion"].as_str()?;
    if have == want {
        return None;
    }
    let parts: Vec<&str> = path.split('/').collect();
    let (resource, name) = (parts[parts.len() - 2], parts[parts.len() - 1]);
    Some(status(
        409,
        "Conflict",
        &format!("Operation cannot be fulfilled on {resource} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"),
    ))
}

pub async fn forward(fake: &kube::Client, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let req = http::Request::from_parts(parts, kube::client::Body::from(bytes.to_vec()));
    match fake.send(req).await {
        Ok(res) => {
            let (parts, body) = res.into_parts();
            let bytes = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            Response::from_parts(parts, AxumBody::from(bytes))
        }
        Err(e) => status(500, "InternalError", &e.to_string()),
    }
}
