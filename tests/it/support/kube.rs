//! A small in-memory cluster for the kube platform tests: kube-fake-client for the
//! object store, plus what it lacks, emulated at the HTTP layer so the platform's real
//! API code runs unchanged:
//! - the Eviction subresource with a PodDisruptionBudget (`maxUnavailable`), answering
//!   429 while the budget is spent;
//! - the pod proxy, forwarded to real HTTP servers on 127.0.0.1 (one per pod);
//! - a ReplicaSet controller that replaces deleted pods, ready after a delay.
//!
//! Every request the platform sends is recorded, for the RBAC drift test.

use axum::body::Body as AxumBody;
use axum::extract::{Request, State};
use axum::response::Response;
use axum::Router;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube_fake_client::ClientBuilder;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

pub const NS: &str = "recover-demo";
pub const DEPLOY: &str = "config-service";
pub const HASH: &str = "7d9f8c";

/// A pod of `deployment` as its ReplicaSet would create it.
pub fn pod(deployment: &str, hash: &str, suffix: &str, app: &str, ready: bool) -> Pod {
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
        "status": {"conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
    }))
    .expect("static pod json")
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

/// One recorded API request: method and path.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
}

#[derive(Clone)]
struct Shared {
    fake: kube::Client,
    log: Arc<Mutex<Vec<Recorded>>>,
    /// Pod name -> local HTTP server standing in for the pod.
    backends: Arc<Mutex<HashMap<String, SocketAddr>>>,
    /// PodDisruptionBudget of the target: at most this many pods unavailable.
    max_unavailable: Arc<Mutex<usize>>,
    desired: usize,
    evictions: Arc<Mutex<Vec<String>>>,
    refusals: Arc<Mutex<usize>>,
}

pub struct FakeCluster {
    /// The client the platform uses (records, emulates eviction and proxy).
    pub client: kube::Client,
    /// The bare fake client (test setup and checks; not recorded).
    pub fake: kube::Client,
    shared: Shared,
    pub stop: CancellationToken,
}

impl Drop for FakeCluster {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl FakeCluster {
    /// `replicas` ready pods of the target Deployment, two gate pods, the limit and journal
    /// ConfigMaps; replacements become ready `ready_after` after they appear.
    pub async fn start(replicas: usize, ready_after: Duration) -> FakeCluster {
        let mut builder = ClientBuilder::new();
        for i in 0..replicas {
            builder = builder.with_object(pod(DEPLOY, HASH, &format!("old{i}"), DEPLOY, true));
        }
        for i in 0..2 {
            builder = builder.with_object(pod(
                "recover-gate",
                "55aa",
                &format!("g{i}"),
                "recover-gate",
                true,
            ));
        }
        builder = builder
            .with_object(configmap(
                "recover-gate-limit",
                &[(
                    "limit.json",
                    r#"{"rate_per_s": null, "burst": 1, "max_in_flight": null}"#,
                )],
            ))
            .with_object(configmap("recover-journal", &[]));
        let fake = builder.build().await.expect("fake client");
        let shared = Shared {
            fake: fake.clone(),
            log: Arc::default(),
            backends: Arc::default(),
            max_unavailable: Arc::new(Mutex::new(1)),
            desired: replicas,
            evictions: Arc::default(),
            refusals: Arc::default(),
        };
        let router = Router::new().fallback(route).with_state(shared.clone());
        let client = kube::Client::new(router, NS);
        let stop = CancellationToken::new();
        tokio::spawn(replicaset_controller(
            fake.clone(),
            replicas,
            ready_after,
            stop.clone(),
        ));
        FakeCluster {
            client,
            fake,
            shared,
            stop,
        }
    }

    pub fn recorded(&self) -> Vec<Recorded> {
        self.shared.log.lock().unwrap().clone()
    }

    pub fn evictions(&self) -> Vec<String> {
        self.shared.evictions.lock().unwrap().clone()
    }

    pub fn refusals(&self) -> usize {
        *self.shared.refusals.lock().unwrap()
    }

    pub fn set_max_unavailable(&self, n: usize) {
        *self.shared.max_unavailable.lock().unwrap() = n;
    }

    /// Route the pod proxy for `pod` to a local server.
    pub fn set_backend(&self, pod: &str, addr: SocketAddr) {
        self.shared
            .backends
            .lock()
            .unwrap()
            .insert(pod.to_string(), addr);
    }

    pub async fn target_pods(&self) -> Vec<Pod> {
        let api: Api<Pod> = Api::namespaced(self.fake.clone(), NS);
        let lp = ListParams::default().labels(&format!("app.kubernetes.io/name={DEPLOY}"));
        api.list(&lp).await.expect("list").items
    }
}

fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// What a ReplicaSet does: keep `desired` pods, new ones ready after a delay.
async fn replicaset_controller(
    fake: kube::Client,
    desired: usize,
    ready_after: Duration,
    stop: CancellationToken,
) {
    let api: Api<Pod> = Api::namespaced(fake, NS);
    let mut born: HashMap<String, Instant> = HashMap::new();
    let mut seq = 0u32;
    let lp = ListParams::default().labels(&format!("app.kubernetes.io/name={DEPLOY}"));
    while !stop.is_cancelled() {
        if let Ok(list) = api.list(&lp).await {
            for _ in list.items.len()..desired {
                seq += 1;
                let p = pod(DEPLOY, HASH, &format!("new{seq}"), DEPLOY, false);
                born.insert(p.metadata.name.clone().unwrap_or_default(), Instant::now());
                let _ = api.create(&PostParams::default(), &p).await;
            }
            for p in list.items.iter().filter(|p| !is_ready(p)) {
                let name = p.metadata.name.clone().unwrap_or_default();
                if born.get(&name).is_some_and(|t| t.elapsed() >= ready_after) {
                    let mut p = p.clone();
                    p.status = pod(DEPLOY, HASH, "x", DEPLOY, true).status;
                    let _ = api.replace_status(&name, &PostParams::default(), &p).await;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = serde_json::json!({"kind": "Status", "apiVersion": "v1",
        "status": if code < 300 {"Success"} else {"Failure"},
        "reason": reason, "message": message, "code": code});
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(AxumBody::from(body.to_string()))
        .expect("response")
}

async fn route(State(s): State<Shared>, req: Request) -> Response {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    s.log.lock().unwrap().push(Recorded {
        method: method.clone(),
        path: path.clone(),
    });
    if method == "POST" && path.ends_with("/eviction") {
        return evict(&s, &path).await;
    }
    if path.contains("/proxy/") || path.ends_with("/proxy") {
        return proxy(&s, req).await;
    }
    forward(&s.fake, req).await
}

async fn evict(s: &Shared, path: &str) -> Response {
    let parts: Vec<&str> = path.split('/').collect();
    let name = parts[parts.len() - 2].to_string();
    let api: Api<Pod> = Api::namespaced(s.fake.clone(), NS);
    let Ok(Some(_)) = api.get_opt(&name).await else {
        return status(404, "NotFound", &format!("pods \"{name}\" not found"));
    };
    let lp = ListParams::default().labels(&format!("app.kubernetes.io/name={DEPLOY}"));
    let ready = api
        .list(&lp)
        .await
        .map(|l| l.items.iter().filter(|p| is_ready(p)).count())
        .unwrap_or(0);
    let unavailable = s.desired.saturating_sub(ready);
    if unavailable >= *s.max_unavailable.lock().unwrap() {
        *s.refusals.lock().unwrap() += 1;
        return status(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
        );
    }
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => {
            s.evictions.lock().unwrap().push(name);
            status(201, "", "")
        }
        Err(e) => status(500, "InternalError", &e.to_string()),
    }
}

async fn proxy(s: &Shared, req: Request) -> Response {
    let path = req.uri().path().to_string();
    let after = path.split("/pods/").nth(1).unwrap_or_default();
    let (pod_port, rest) = after.split_once("/proxy").unwrap_or((after, "/"));
    let pod = pod_port.split(':').next().unwrap_or_default();
    let Some(addr) = s.backends.lock().unwrap().get(pod).copied() else {
        return status(
            503,
            "ServiceUnavailable",
            &format!("no endpoint for pod {pod}"),
        );
    };
    let uri = format!("http://{addr}{rest}");
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let Ok(out) = http::Request::builder()
        .method(req.method().clone())
        .uri(&uri)
        .body(http_body_util::Full::new(bytes::Bytes::new()))
    else {
        return status(500, "InternalError", "bad proxy request");
    };
    match client.request(out).await {
        Ok(r) => {
            let code = r.status().as_u16();
            let body = r
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            Response::builder()
                .status(code)
                .body(AxumBody::from(body))
                .expect("response")
        }
        Err(e) => status(503, "ServiceUnavailable", &e.to_string()),
    }
}

async fn forward(fake: &kube::Client, req: Request) -> Response {
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

/// A local HTTP server standing in for a pod: `/metrics` returns `metrics()`, POST
/// `/admin/drain` counts calls.
pub async fn serve_pod(
    metrics: Arc<Mutex<String>>,
    drains: Arc<Mutex<u32>>,
    stop: CancellationToken,
) -> SocketAddr {
    use axum::routing::{get, post};
    let app = Router::new()
        .route(
            "/metrics",
            get(move || {
                let m = metrics.clone();
                async move { m.lock().unwrap().clone() }
            }),
        )
        .route(
            "/admin/drain",
            post(move || {
                let d = drains.clone();
                async move {
                    let mut n = d.lock().unwrap();
                    *n += 1;
                    axum::Json(serde_json::json!({"drained": 7 * *n}))
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
    });
    addr
}
