//! Talking HTTP to a pod through the API server's pod proxy
//! (`/api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH`), so the CLI needs nothing but a
//! kubeconfig: no port-forward, no Service exposure, no Prometheus.
//!
//! Behind [`PodProxy`] because kube-fake-client does not serve the proxy subresource.

use super::api::call_error;
use super::rbac;
use crate::platform::PlatformError;
use crate::util::http_body::{read_body, BodyCaps};

/// A pod's `/metrics` page or admin answer, read through the API server: capped like any
/// scrape (an endless page must not take the controller's memory).
const ANSWER_CAPS: BodyCaps = BodyCaps::metrics_page(std::time::Duration::from_secs(30));

#[async_trait::async_trait]
pub trait PodProxy: Send + Sync {
    async fn get(&self, pod: &str, port: u16, path: &str) -> Result<String, PlatformError>;
    async fn post(&self, pod: &str, port: u16, path: &str) -> Result<String, PlatformError>;
}

/// The proxy path for one pod's port, relative to the API server root.
pub fn proxy_path(namespace: &str, pod: &str, port: u16, path: &str) -> String {
    format!(
        "/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy/{}",
        path.trim_start_matches('/')
    )
}

pub struct ApiPodProxy {
    client: kube::Client,
    namespace: String,
}

impl ApiPodProxy {
    pub fn new(client: kube::Client, namespace: &str) -> Self {
        ApiPodProxy {
            client,
            namespace: namespace.to_string(),
        }
    }

    async fn send(
        &self,
        method: http::Method,
        pod: &str,
        port: u16,
        path: &str,
    ) -> Result<String, PlatformError> {
        let uri = proxy_path(&self.namespace, pod, port, path);
        let (perm, body) = if method == http::Method::POST {
            (&rbac::PODS_PROXY_POST, b"{}".to_vec())
        } else {
            (&rbac::PODS_PROXY_GET, Vec::new())
        };
        let req = http::Request::builder()
            .method(method.clone())
            .uri(&uri)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body)
            .map_err(|e| PlatformError::Other(format!("building {uri}: {e}")))?;
        let what = format!("{method} {uri}");
        let resp = self
            .client
            .send(req.map(kube::client::Body::from))
            .await
            .map_err(|e| call_error(perm, what.clone(), e))?;
        let status = resp.status();
        let body = read_body(resp.into_body(), ANSWER_CAPS)
            .await
            .map_err(|e| PlatformError::Call {
                what: what.clone(),
                source: Box::new(e),
            })?;
        let text = String::from_utf8_lossy(&body).into_owned();
        if status.is_client_error() || status.is_server_error() {
            // As kube's own request_text reports it, so a 403 still names the permission.
            let api = serde_json::from_str::<kube::core::Status>(&text).unwrap_or_else(|_| {
                kube::core::Status::failure(&text, "Failed to parse error data")
                    .with_code(status.as_u16())
            });
            return Err(call_error(perm, what, kube::Error::Api(api.boxed())));
        }
        Ok(text)
    }
}

#[async_trait::async_trait]
impl PodProxy for ApiPodProxy {
    async fn get(&self, pod: &str, port: u16, path: &str) -> Result<String, PlatformError> {
        self.send(http::Method::GET, pod, port, path).await
    }

    async fn post(&self, pod: &str, port: u16, path: &str) -> Result<String, PlatformError> {
        self.send(http::Method::POST, pod, port, path).await
    }
}

/// The inverse of [`proxy_path`]: `(pod, port, path)` from a scrape locator.
pub fn parse_locator(locator: &str) -> Option<(String, u16, String)> {
    let rest = locator.strip_prefix("/api/v1/namespaces/")?;
    let (_ns, rest) = rest.split_once("/pods/")?;
    let (pod_port, path) = rest.split_once("/proxy")?;
    let (pod, port) = pod_port.split_once(':')?;
    Some((
        pod.to_string(),
        port.parse().ok()?,
        if path.is_empty() {
            "/".to_string()
        } else {
            path.to_string()
        },
    ))
}
