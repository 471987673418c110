//! Helpers shared by the `serve_*` tests: a plain HTTP/1.1 client over hyper (in test
//! builds reqwest has no TLS provider installed; loopback needs no TLS) and fixtures.
#![allow(dead_code)] // each test binary uses a different subset

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use serde_json::Value;
use std::time::Duration;

pub fn fixture(name: &str) -> Vec<u8> {
    let p = format!(
        "{}/tests/fixtures/alertmanager/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

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

impl Http {
    /// Send a request; returns the status and the body as text. Bounded at 10 s.
    pub async fn send(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<(u16, String), String> {
        let mut req = axum::http::Request::builder().method(method).uri(url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let fut = async {
            let resp = self.inner.request(req).await.map_err(|e| e.to_string())?;
            let status = resp.status().as_u16();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
        };
        tokio::time::timeout(Duration::from_secs(10), fut)
            .await
            .map_err(|_| format!("{method} {url}: no answer in 10 s"))?
    }

    /// POST and parse the JSON reply (Null if it is not JSON).
    pub async fn post_json(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> (u16, Value) {
        let (s, text) = self.send("POST", url, headers, body).await.unwrap();
        (s, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub async fn get_json(&self, url: &str) -> Value {
        let (_, text) = self.send("GET", url, &[], vec![]).await.unwrap();
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {url}: {e}: {text}"))
    }

    pub async fn get_text(&self, url: &str) -> String {
        self.send("GET", url, &[], vec![]).await.unwrap().1
    }
}
