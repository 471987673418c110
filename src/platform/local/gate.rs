//! The gate as the local platform reaches it: its admin API over HTTP with the bearer
//! token from a file. `set_limit` PUTs, then GETs to confirm the limit is in force.

use crate::gate::limit::Limit;
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
        let what = format!("PUT {}", self.url());
        let r = self
            .client
            .put(self.url())
            .bearer_auth(self.token()?)
            .json(limit)
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
        let now = self.get_limit().await?;
        if !same(&now, limit) {
            return Err(call(
                &what,
                format!(
                    "the gate reports {} after the PUT, not the limit sent",
                    serde_json::to_string(&now).unwrap_or_default()
                ),
            ));
        }
        Ok(())
    }
}
