//! The gate as the local platform reaches it: its admin API over HTTP with the bearer
//! token from a file. `set_limit` PUTs and checks the limit the gate answers it put in
//! force (and, for a change that asked its bucket full, that the gate filled it).

use crate::gate::limit::{Limit, LimitChange};
use crate::platform::{CallCause, GateControl, PlatformError};
use crate::util::http_body::{read_response, read_response_text, BodyCaps};
use std::path::PathBuf;
use std::time::Duration;

/// The admin API answers a limit in a few hundred bytes.
const ANSWER_CAPS: BodyCaps = BodyCaps::small_json(64 * 1024);

pub struct HttpGate {
    admin_url: String,
    token_file: PathBuf,
    client: reqwest::Client,
}

impl HttpGate {
    pub fn new(admin_url: &str, token_file: PathBuf) -> Self {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap_or_default();
        HttpGate {
            admin_url: admin_url.trim_end_matches('/').to_string(),
            token_file,
            client,
        }
    }

    fn token(&self) -> Result<String, PlatformError> {
        std::fs::read_to_string(&self.token_file)
            .map(|t| t.trim().to_string())
            .map_err(|e| {
                PlatformError::Other(format!(
                    "gate token file {}: {e}",
                    self.token_file.display()
                ))
            })
    }

    fn url(&self) -> String {
        format!("{}/admin/limit", self.admin_url)
    }
}

fn call(what: &str, e: impl Into<CallCause>) -> PlatformError {
    PlatformError::Call {
        what: what.to_string(),
        source: e.into(),
    }
}

/// The admin API answers `{"limit": {...}, "version": ".."}`; accept a bare limit too.
fn parse_limit(v: serde_json::Value) -> Result<Limit, serde_json::Error> {
    let inner = v.get("limit").cloned().unwrap_or(v);
    serde_json::from_value(inner)
}

fn same(a: &Limit, b: &Limit) -> bool {
    let close = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) => (x - y).abs() <= 1e-6 * x.abs().max(1.0),
        (None, None) => true,
        _ => false,
    };
    close(a.rate_per_s, b.rate_per_s)
        && a.burst == b.burst
        && a.max_in_flight == b.max_in_flight
        && a.shadow == b.shadow
}

#[async_trait::async_trait]
impl GateControl for HttpGate {
    fn shell_flags(&self) -> Vec<String> {
        vec![format!(
            "--admin {} --token-file {}",
            crate::util::shell::quote(&self.admin_url),
            crate::util::shell::quote(&self.token_file.display().to_string())
        )]
    }

    async fn get_limit(&self) -> Result<Limit, PlatformError> {
        let what = format!("GET {}", self.url());
        let r = self
            .client
            .get(self.url())
            .bearer_auth(self.token()?)
            .send()
            .await
            .map_err(|e| call(&what, e))?;
        let status = r.status();
        let bytes = read_response(r, ANSWER_CAPS)
            .await
            .map_err(|e| call(&what, e))?;
        let body: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| call(&what, format!("not JSON: {e}")))?;
        if !status.is_success() {
            return Err(call(&what, format!("HTTP {status}: {body}")));
        }
        parse_limit(body).map_err(|e| call(&format!("{what}: unexpected reply"), e))
    }

    async fn set_limit(&self, limit: &Limit) -> Result<(), PlatformError> {
        self.change_limit(&LimitChange::carried(limit.clone()))
            .await
    }

    fn fills(&self) -> bool {
        true
    }

    async fn change_limit(&self, change: &LimitChange) -> Result<(), PlatformError> {
        let limit = &change.limit;
        let what = format!("PUT {}", self.url());
        let r = self
            .client
            .put(self.url())
            .bearer_auth(self.token()?)
            .json(change)
            .send()
            .await
            .map_err(|e| call(&what, e))?;
        let status = r.status();
        if !status.is_success() {
            let body = read_response_text(r, ANSWER_CAPS)
                .await
                .unwrap_or_else(|e| format!("({e})"));
            return Err(call(&what, format!("HTTP {status}: {body}")));
        }
        // The answer is the limit the gate put in force: no second request to ask again
        // (each one waits for the gate's admin listener on a saturated machine).
        let bytes = read_response(r, ANSWER_CAPS)
            .await
            .map_err(|e| call(&what, e))?;
        let answer: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| call(&what, format!("not JSON: {e}")))?;
        let filled = answer.get("filled").and_then(|f| f.as_bool()) == Some(true);
        let tokens = answer.get("tokens").and_then(|t| t.as_u64());
        let now = parse_limit(answer).map_err(|e| call(&what, format!("unexpected reply: {e}")))?;
        if !same(&now, limit) {
            return Err(call(
                &what,
                format!(
                    "the gate reports {} after the PUT, not the limit sent",
                    serde_json::to_string(&now).unwrap_or_default()
                ),
            ));
        }
        if let Some(asked) = change.fill.tokens(limit.burst) {
            if !filled {
                return Err(call(
                    &what,
                    "the gate put the limit in force without saying it filled the bucket (a gate too old for \"fill\"?)",
                ));
            }
            // A gate that says how many tokens its bucket started with must say these.
            if tokens.is_some_and(|t| t != u64::from(asked)) {
                return Err(call(
                    &what,
                    format!(
                        "the gate started the bucket with {} tokens, not the {asked} asked",
                        tokens.unwrap_or_default()
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::put;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// An admin API answering every PUT with `answer` (None: the limit sent), counting
    /// every request it gets.
    async fn admin(answer: Option<Limit>) -> (String, Arc<AtomicUsize>) {
        let requests = Arc::new(AtomicUsize::new(0));
        let (on_put, on_get) = (requests.clone(), requests.clone());
        let app = axum::Router::new().route(
            "/admin/limit",
            put(move |axum::Json(sent): axum::Json<Limit>| {
                on_put.fetch_add(1, Ordering::SeqCst);
                let limit = answer.clone().unwrap_or(sent);
                async move { axum::Json(serde_json::json!({"limit": limit, "version": "1"})) }
            })
            .get(move || {
                on_get.fetch_add(1, Ordering::SeqCst);
                async { axum::Json(serde_json::json!({"limit": Limit::unlimited()})) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, requests)
    }

    fn gate(url: &str) -> (HttpGate, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "t0k3n\n").unwrap();
        (HttpGate::new(url, token), dir)
    }

    fn hold() -> Limit {
        Limit {
            rate_per_s: Some(40.0),
            burst: 2000,
            max_in_flight: None,
            note: Some("readmission wave".into()),
            shadow: false,
        }
    }

    /// The PUT's answer is the limit in force: one request, not a second to ask again.
    #[tokio::test]
    async fn set_limit_is_one_request_checked_against_the_answer() {
        crate::util::http::ensure_tls_provider();
        let (url, requests) = admin(None).await;
        let (g, _dir) = gate(&url);
        g.set_limit(&hold()).await.unwrap();
        assert_eq!(requests.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_gate_answering_another_limit_than_the_one_sent_is_an_error() {
        crate::util::http::ensure_tls_provider();
        let (url, _) = admin(Some(Limit::unlimited())).await;
        let (g, _dir) = gate(&url);
        let e = g.set_limit(&hold()).await.unwrap_err().to_string();
        assert!(e.contains("not the limit sent"), "{e}");
    }

    /// An admin API answering every PUT with the limit sent and `said` besides (what it
    /// says of the fill).
    async fn admin_saying(said: serde_json::Value) -> String {
        let app = axum::Router::new().route(
            "/admin/limit",
            put(move |axum::Json(mut sent): axum::Json<serde_json::Value>| {
                sent.as_object_mut().unwrap().remove("fill");
                let mut answer = serde_json::json!({"limit": sent, "version": "1"});
                for (k, v) in said.as_object().unwrap() {
                    answer[k] = v.clone();
                }
                async move { axum::Json(answer) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    /// A change asking a fill holds the gate to it: it must say it filled, and, where it
    /// says how many tokens, the ones asked (never above the burst).
    #[tokio::test]
    async fn a_fill_is_checked_against_what_the_gate_says_it_filled() {
        use crate::gate::limit::Fill;
        crate::util::http::ensure_tls_provider();
        let change = |fill| LimitChange {
            limit: hold(),
            fill,
        };
        let try_with = |said: serde_json::Value, fill| async move {
            let url = admin_saying(said).await;
            let (g, _dir) = gate(&url);
            g.change_limit(&change(fill))
                .await
                .map_err(|e| e.to_string())
        };
        let filled = |n: u32| serde_json::json!({"filled": true, "tokens": n});
        try_with(filled(7), Fill::Tokens(7)).await.unwrap();
        try_with(filled(2000), Fill::Full).await.unwrap();
        try_with(filled(2000), Fill::Tokens(9000)).await.unwrap();
        try_with(serde_json::json!({"filled": true}), Fill::Full)
            .await
            .unwrap();
        let e = try_with(filled(5), Fill::Tokens(7)).await.unwrap_err();
        assert!(e.contains("with 5 tokens, not the 7 asked"), "{e}");
        let e = try_with(serde_json::json!({}), Fill::Tokens(7))
            .await
            .unwrap_err();
        assert!(e.contains("without saying it filled"), "{e}");
        try_with(serde_json::json!({}), Fill::Carried)
            .await
            .unwrap();
    }
}
