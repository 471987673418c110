//! The API server's pod proxy: to a real HTTP server on 127.0.0.1 standing in for the pod,
//! or to a pod that accepts the connection and never answers, or one that refuses it. A
//! pod that is not Running with an IP cannot be reached at all, as on a real cluster.

use super::pods::phase;
use super::{status, Shared, NS};
use axum::body::Body as AxumBody;
use axum::extract::Request;
use axum::response::Response;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use std::net::SocketAddr;

/// What stands behind a pod's ports.
#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Serve(SocketAddr),
    /// Accepts and never answers.
    Hang,
    /// Connection refused.
    Refuse,
}

pub async fn proxy(s: &Shared, req: Request) -> Response {
    let path = req.uri().path().to_string();
    let after = path.split("/pods/").nth(1).unwrap_or_default();
    let (pod_port, rest) = after.split_once("/proxy").unwrap_or((after, "/"));
    let (pod, port) = pod_port.split_once(':').unwrap_or((pod_port, "80"));
    let pods: Api<Pod> = Api::namespaced(s.fake.clone(), NS);
    let reachable = match pods.get_opt(pod).await {
        Ok(Some(p)) => {
            phase(&p) == "Running" && p.status.as_ref().and_then(|st| st.pod_ip.clone()).is_some()
        }
        _ => return status(404, "NotFound", &format!("pods \"{pod}\" not found")),
    };
    if !reachable {
        return status(
            503,
            "ServiceUnavailable",
            &format!("error trying to reach service: pod {pod} has no IP"),
        );
    }
    let own = s.backends.lock().unwrap().get(pod).copied();
    let backend = own.or(*s.default_backend.lock().unwrap());
    let addr = match backend {
        Some(Backend::Serve(a)) => a,
        Some(Backend::Hang) => {
            s.stop.cancelled().await;
            return status(503, "ServiceUnavailable", "stopped");
        }
        Some(Backend::Refuse) | None => {
            return status(
                503,
                "ServiceUnavailable",
                &format!(
                "error trying to reach service: dial tcp {pod}:{port}: connect: connection refused"
            ),
            )
        }
    };
    let query = req
        .uri()
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let uri = format!("http://{addr}{rest}{query}");
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let Ok(out) = http::Request::builder()
        .method(parts.method.clone())
        .uri(&uri)
        .body(http_body_util::Full::new(body))
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
