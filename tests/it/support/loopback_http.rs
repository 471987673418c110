//! The one HTTP client of the integration tests' support modules (`gate`, `serve` and
//! `demo` build on it): plain HTTP/1.1 over hyper, because reqwest in test builds has no
//! TLS provider installed and loopback needs no TLS.
//! Every exchange is bounded so a hung server fails the test instead of stalling the suite.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use std::time::Duration;

/// How long one exchange may take before it counts as no answer.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct Http {
    inner: Client<HttpConnector, Full<Bytes>>,
}

impl Default for Http {
    fn default() -> Self {
        Http {
            inner: Client::builder(hyper_util::rt::TokioExecutor::new()).build_http(),
        }
    }
}

/// A response read whole.
pub struct Reply {
    pub status: u16,
    pub headers: axum::http::HeaderMap,
    pub body: String,
}

impl Reply {
    /// The body as JSON (Null if it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

impl Http {
    /// Send one request and read the whole answer, or say why there is none.
    pub async fn send(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: impl AsRef<[u8]>,
    ) -> Result<Reply, String> {
        self.send_within(EXCHANGE_TIMEOUT, method, url, headers, body)
            .await
    }

    /// `send` with its own bound, for an exchange whose work grows with its input (a 20 MB
    /// body through a debug build on a loaded machine), where 10 s would fail a test that
    /// asserts nothing about time.
    pub async fn send_within(
        &self,
        within: Duration,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: impl AsRef<[u8]>,
    ) -> Result<Reply, String> {
        let mut req = axum::http::Request::builder().method(method).uri(url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req
            .body(Full::new(Bytes::copy_from_slice(body.as_ref())))
            .map_err(|e| e.to_string())?;
        let exchange = async {
            let resp = self.inner.request(req).await.map_err(|e| e.to_string())?;
            let (parts, body) = resp.into_parts();
            let bytes = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
            Ok(Reply {
                status: parts.status.as_u16(),
                headers: parts.headers,
                body: String::from_utf8_lossy(&bytes).into_owned(),
            })
        };
        tokio::time::timeout(within, exchange)
            .await
            .map_err(|_| format!("{method} {url}: no answer in {} s", within.as_secs()))?
    }
}
