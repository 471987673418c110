//! Loopback helpers: waiting for a service to answer (ports: `util::ports`).

use std::time::{Duration, Instant};

/// How often [`wait_http_ok`] asks again: it sees an endpoint become ready up to this late.
const WAIT_POLL: Duration = Duration::from_millis(50);

/// Poll `url` with GET until it answers 2xx or `timeout` passes.
pub async fn wait_http_ok(url: &str, timeout: Duration) -> Result<(), String> {
    wait_http_ok_every(url, timeout, WAIT_POLL).await
}

/// [`wait_http_ok`], asking again every `poll` (it sees the endpoint ready up to `poll`
/// late, plus one request).
pub async fn wait_http_ok_every(
    url: &str,
    timeout: Duration,
    poll: Duration,
) -> Result<(), String> {
    crate::util::http::ensure_tls_provider();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut last = String::from("no attempt");
    while start.elapsed() < timeout {
        match client.get(url).send().await {
            Ok(r) if r.status().is_success() => return Ok(()),
            Ok(r) => last = format!("HTTP {}", r.status()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(poll).await;
    }
    Err(format!("{url} not ready after {timeout:?}: {last}"))
}
