//! What a gate is started with. The CLI maps its flags onto [`GateConfig`]; the engine,
//! the rehearsal and the tests build one directly.

use super::balance::BalanceConfig;
use super::error::GateError;
use super::limit::Limit;
use super::limits::ClientLimits;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

/// nginx's keepalive_timeout is 75 s; a minute keeps idle clients without holding
/// connections to a service in trouble for long.
pub const DEFAULT_CLIENT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Everything `recover gate` needs. Listen on port 0 and read the bound addresses from
/// [`super::BoundGate`] when the caller does not care which port it gets.
#[derive(Debug, Clone)]
pub struct GateConfig {
    /// Proxy listener: every path is forwarded to an upstream.
    pub listen: SocketAddr,
    /// Admin listener: `/metrics`, `/healthz`, and `/admin/limit` (bearer token).
    pub admin_listen: SocketAddr,
    /// Upstream replicas, `http://host:port` (no path).
    pub upstreams: Vec<String>,
    /// The limit to start with when the state file has none.
    pub limit: Limit,
    /// How requests are spread over the upstreams, and latency outlier ejection.
    pub balance: BalanceConfig,
    /// How long the gate waits for an upstream's response head (then 504).
    pub upstream_timeout: Duration,
    /// How long a client connection may sit between requests (or inside a request head)
    /// before the gate closes it, with the upstream connections it holds.
    pub client_idle_timeout: Duration,
    /// The request head deadline and the connection caps.
    pub client_limits: ClientLimits,
    /// Bearer token for `/admin/*`; `None` disables the admin API (401 for every call).
    pub admin_token: Option<String>,
    /// Whether `PUT /admin/limit` may change the limit (off where the limit comes from a
    /// ConfigMap only).
    pub admin_writes: bool,
    /// Where the last applied limit is kept; it wins over `limit` at start when present.
    pub state_file: Option<PathBuf>,
    /// Proxy worker threads; `None`: one per core the gate may use.
    pub workers: Option<NonZeroUsize>,
}

impl GateConfig {
    /// A pass-through gate on ephemeral loopback ports in front of `upstreams`.
    pub fn loopback(upstreams: Vec<String>) -> Self {
        GateConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            upstreams,
            limit: Limit::unlimited(),
            balance: BalanceConfig::default(),
            upstream_timeout: Duration::from_secs(2),
            client_idle_timeout: DEFAULT_CLIENT_IDLE_TIMEOUT,
            client_limits: ClientLimits::default(),
            admin_token: None,
            admin_writes: true,
            state_file: None,
            workers: None,
        }
    }
}

/// Check one upstream URL: plain http, a host and port, no path (the gate forwards the
/// client's path as it is). Only the authority is kept: the scheme is always http.
pub fn parse_upstream(url: &str) -> Result<http::uri::Authority, GateError> {
    let bad = |reason: &str| GateError::Upstream {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let uri: http::Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
    if uri.scheme() != Some(&http::uri::Scheme::HTTP) {
        return Err(bad("only http:// upstreams are supported"));
    }
    let authority = uri
        .authority()
        .cloned()
        .ok_or_else(|| bad("needs a host, like http://127.0.0.1:9001"))?;
    if uri.path() != "/" && !uri.path().is_empty() || uri.query().is_some() {
        return Err(bad(
            "must not have a path or query; the client's path is forwarded",
        ));
    }
    Ok(authority)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_urls_are_plain_http_hosts() {
        assert!(parse_upstream("http://127.0.0.1:9001").is_ok());
        assert!(parse_upstream("http://127.0.0.1:9001/").is_ok());
        for bad in ["https://x:1", "127.0.0.1:9001", "http://x:1/api", "::"] {
            let e = parse_upstream(bad).unwrap_err().to_string();
            assert!(e.starts_with("--upstream"), "{e}");
        }
    }
}
