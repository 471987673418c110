//! Helpers shared by the `serve_*` tests: JSON and text calls over the tests' loopback
//! HTTP client.

use serde_json::Value;

pub use super::loopback_http::Http;

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
        body: impl AsRef<[u8]>,
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
