//! Talking HTTP to a pod, two ways:
//! - [`ApiProxy`]: through the API server's pod proxy
//!   (`/api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH`), so a run from a laptop needs
//!   nothing but a kubeconfig (RBAC: `pods/proxy` get and create, which reaches every pod
//!   and port in the namespace);
//! - [`Direct`]: to the pod's IP, for a run inside the cluster (no `pods/proxy` grant; the
//!   NetworkPolicies let the controller in).
//!
//! Every call has a deadline, its body included ([`super::call::PROXY_GET`],
//! [`super::call::PROXY_POST`]): the pod proxy is a long-running request for the API server,
//! which never cuts it, so a pod that accepts a connection and never answers would
//! otherwise hold a scrape or an admin call for ever. Neither is retried: a scrape that
//! misses is missing data for that round, and `POST /admin/drain` drops queued work.

use super::api::call_error;
use super::call::{self, CallPolicy};
use super::decide::PodView;
use super::rbac::{self, Permission};
use crate::platform::PlatformError;
use crate::util::http_body::{read_body, read_response_text, BodyCaps};
use std::time::Instant;

/// One HTTP endpoint of one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locator {
    pub pod: String,
    pub ip: Option<String>,
    pub port: u16,
    pub path: String,
}

impl Locator {
    pub fn of(p: &PodView, port: u16, path: &str) -> Locator {
        Locator {
            pod: p.name.clone(),
            ip: p.ip.clone(),
            port,
            path: path.to_string(),
        }
    }
}

/// How the platform reaches pods over HTTP.
#[async_trait::async_trait]
pub trait PodReach: Send + Sync {
    /// The string a scrape endpoint carries for `loc` (read back by [`parse_address`]).
    fn address(&self, loc: &Locator) -> String;
    async fn get(&self, loc: &Locator) -> Result<String, PlatformError>;
    async fn post(&self, loc: &Locator) -> Result<String, PlatformError>;
}

/// The proxy path for one pod's port, relative to the API server root.
pub fn proxy_path(namespace: &str, pod: &str, port: u16, path: &str) -> String {
    format!(
        "/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy/{}",
        path.trim_start_matches('/')
    )
}

/// The inverse of [`PodReach::address`] for both ways.
pub fn parse_address(address: &str) -> Option<Locator> {
    if let Some(rest) = address.strip_prefix("http://") {
        let (hostport, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (ip, port) = hostport.rsplit_once(':')?;
        return Some(Locator {
            pod: String::new(),
            ip: Some(ip.trim_start_matches('[').trim_end_matches(']').to_string()),
            port: port.parse().ok()?,
            path: format!("/{path}"),
        });
    }
    let rest = address.strip_prefix("/api/v1/namespaces/")?;
    let (_ns, rest) = rest.split_once("/pods/")?;
    let (pod_port, path) = rest.split_once("/proxy")?;
    let (pod, port) = pod_port.split_once(':')?;
    Some(Locator {
        pod: pod.to_string(),
        ip: None,
        port: port.parse().ok()?,
        path: if path.is_empty() {
            "/".to_string()
        } else {
            path.to_string()
        },
    })
}

/// Answer caps: a `/metrics` page or an admin answer, read within the call's deadline.
fn caps(policy: &CallPolicy) -> BodyCaps {
    BodyCaps::metrics_page(policy.timeout)
}

/// The deadlines of a scrape (GET) and an admin call (POST).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    pub get: std::time::Duration,
    pub post: std::time::Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            get: call::PROXY_GET.timeout,
            post: call::PROXY_POST.timeout,
        }
    }
}

impl Deadlines {
    fn policy(&self, method: &http::Method) -> (CallPolicy, &'static Permission) {
        if method == http::Method::POST {
            (
                CallPolicy {
                    timeout: self.post,
                    ..call::PROXY_POST
                },
                &rbac::PODS_PROXY_POST,
            )
        } else {
            (
                CallPolicy {
                    timeout: self.get,
                    ..call::PROXY_GET
                },
                &rbac::PODS_PROXY_GET,
            )
        }
    }
}

/// Through the API server's pod proxy.
pub struct ApiProxy {
    client: kube::Client,
    namespace: String,
    deadlines: Deadlines,
}

impl ApiProxy {
    pub fn new(client: kube::Client, namespace: &str, deadlines: Deadlines) -> Self {
        ApiProxy {
            client,
            namespace: namespace.to_string(),
            deadlines,
        }
    }

    async fn send(&self, method: http::Method, loc: &Locator) -> Result<String, PlatformError> {
        let uri = proxy_path(&self.namespace, &loc.pod, loc.port, &loc.path);
        let (policy, perm) = self.deadlines.policy(&method);
        let policy = &policy;
        let what = format!("{method} {uri}");
        let started = Instant::now();
        let exchange = async {
            let body = if method == http::Method::POST {
                b"{}".to_vec()
            } else {
                Vec::new()
            };
            let req = http::Request::builder()
                .method(method.clone())
                .uri(&uri)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(kube::client::Body::from(body))
                .map_err(|e| PlatformError::Other(format!("building {uri}: {e}")))?;
            let resp = self
                .client
                .send(req)
                .await
                .map_err(|e| call_error(perm, what.clone(), e))?;
            let status = resp.status();
            let body = read_body(resp.into_body(), caps(policy))
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
                return Err(call_error(
                    perm,
                    what.clone(),
                    kube::Error::Api(api.boxed()),
                ));
            }
            Ok(text)
        };
        match tokio::time::timeout(policy.timeout, exchange).await {
            Ok(r) => r,
            Err(_) => Err(PlatformError::Timeout {
                what: format!("{what} to answer"),
                after: started.elapsed(),
            }),
        }
    }
}

#[async_trait::async_trait]
impl PodReach for ApiProxy {
    fn address(&self, loc: &Locator) -> String {
        proxy_path(&self.namespace, &loc.pod, loc.port, &loc.path)
    }

    async fn get(&self, loc: &Locator) -> Result<String, PlatformError> {
        self.send(http::Method::GET, loc).await
    }

    async fn post(&self, loc: &Locator) -> Result<String, PlatformError> {
        self.send(http::Method::POST, loc).await
    }
}

/// Straight to the pod's IP (in the cluster).
pub struct Direct {
    client: reqwest::Client,
    deadlines: Deadlines,
}

impl Direct {
    pub fn new(deadlines: Deadlines) -> Self {
        crate::util::http::ensure_tls_provider();
        Direct {
            client: reqwest::Client::builder()
                .connect_timeout(std::time::Duration::from_secs(2))
                .build()
                .unwrap_or_default(),
            deadlines,
        }
    }
}

impl Direct {
    fn url(loc: &Locator) -> Result<String, PlatformError> {
        let ip = loc.ip.as_deref().ok_or_else(|| {
            PlatformError::Other(format!("pod {} has no IP (not running yet)", loc.pod))
        })?;
        let host = if ip.contains(':') {
            format!("[{ip}]")
        } else {
            ip.to_string()
        };
        Ok(format!("http://{host}:{}{}", loc.port, loc.path))
    }

    async fn send(&self, method: http::Method, loc: &Locator) -> Result<String, PlatformError> {
        let url = Self::url(loc)?;
        let (policy, _) = self.deadlines.policy(&method);
        let policy = &policy;
        let what = format!("{method} {url} (pod {})", loc.pod);
        let started = Instant::now();
        let exchange = async {
            let req = if method == http::Method::POST {
                self.client.post(&url).body("{}")
            } else {
                self.client.get(&url)
            };
            let call = |e: crate::platform::CallCause| PlatformError::Call {
                what: what.clone(),
                source: e,
            };
            let r = req.send().await.map_err(|e| call(e.into()))?;
            let status = r.status();
            let text = read_response_text(r, caps(policy))
                .await
                .map_err(|e| call(e.into()))?;
            if !status.is_success() {
                return Err(call(format!("HTTP {status}: {text}").into()));
            }
            Ok(text)
        };
        match tokio::time::timeout(policy.timeout, exchange).await {
            Ok(r) => r,
            Err(_) => Err(PlatformError::Timeout {
                what: format!("{what} to answer"),
                after: started.elapsed(),
            }),
        }
    }
}

#[async_trait::async_trait]
impl PodReach for Direct {
    fn address(&self, loc: &Locator) -> String {
        Self::url(loc).unwrap_or_default()
    }

    async fn get(&self, loc: &Locator) -> Result<String, PlatformError> {
        self.send(http::Method::GET, loc).await
    }

    async fn post(&self, loc: &Locator) -> Result<String, PlatformError> {
        self.send(http::Method::POST, loc).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_read_back_both_ways() {
        let loc = parse_address("/api/v1/namespaces/ns/pods/web-1:9001/proxy/metrics").unwrap();
        assert_eq!(
            (loc.pod.as_str(), loc.port, loc.path.as_str()),
            ("web-1", 9001, "/metrics")
        );
        let loc = parse_address("http://10.1.2.3:8081/metrics").unwrap();
        assert_eq!(
            (loc.ip.as_deref(), loc.port, loc.path.as_str()),
            (Some("10.1.2.3"), 8081, "/metrics")
        );
        let d = Direct::new(Deadlines::default());
        assert_eq!(
            d.address(&Locator {
                pod: "p".into(),
                ip: Some("fd00::1".into()),
                port: 80,
                path: "/metrics".into()
            }),
            "http://[fd00::1]:80/metrics"
        );
    }

    #[test]
    fn a_query_travels_whole_both_ways() {
        let path = crate::platform::AdminOp::Drain(crate::platform::DrainKeep::Answerable).path();
        let proxied = proxy_path("ns", "web-1", 8080, path);
        assert_eq!(
            proxied,
            "/api/v1/namespaces/ns/pods/web-1:8080/proxy/admin/drain?keep=answerable"
        );
        assert_eq!(parse_address(&proxied).unwrap().path, path);
        let direct = Direct::url(&Locator {
            pod: "web-1".into(),
            ip: Some("10.1.2.3".into()),
            port: 8080,
            path: path.into(),
        })
        .unwrap();
        assert_eq!(direct, "http://10.1.2.3:8080/admin/drain?keep=answerable");
        assert_eq!(parse_address(&direct).unwrap().path, path);
    }
}
