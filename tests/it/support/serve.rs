//! Helpers shared by the `serve_*` tests: JSON and text calls over the tests' loopback
//! HTTP client, and fixtures.
#![allow(dead_code)] // each test binary uses a different subset

use serde_json::Value;

#[path = "../loopback_http/mod.rs"]
mod loopback_http;
pub use loopback_http::Http;

pub fn fixture(name: &str) -> Vec<u8> {
    let p = format!(
        "{}/tests/fixtures/alertmanager/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// Every sample line must be on the `/metrics` page; the whole page is shown when one is
/// missing, since the neighbouring series usually say why.
pub fn assert_exposes(metrics: &str, samples: &[&str]) {
    for sample in samples {
        assert!(metrics.contains(sample), "no `{sample}` in:\n{metrics}");
    }
}

impl Http {
    /// POST and parse the JSON reply (Null if it is not JSON).
    pub async fn post_json(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> (u16, Value) {
        let r = self.send("POST", url, headers, body).await.unwrap();
        (r.status, r.json())
    }

    pub async fn get_json(&self, url: &str) -> Value {
        let text = self.send("GET", url, &[], "").await.unwrap().body;
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {url}: {e}: {text}"))
    }

    pub async fn get_text(&self, url: &str) -> String {
        self.send("GET", url, &[], "").await.unwrap().body
    }
}
