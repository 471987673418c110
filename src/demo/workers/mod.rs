//! `recover demo workers`: the clients of the demo config service. N pollers in one
//! process, each polling on its own phase of the interval and retrying failures by a
//! policy. With the default policy (fixed 1 s, forever, no budget) a short outage puts
//! the whole fleet into a retry loop that keeps the service overloaded.

mod metrics;
mod phases;
pub mod poller;

pub use crate::retry::{RetryBudget, RetryPolicy};
pub use phases::{encode_ladder, EDGE_LABEL};
pub use poller::AttemptHeader;

use super::defaults;
use axum::routing::get;
use axum::Router;
use metrics::WorkerMetrics;
use poller::{phase, run_poller, Fleet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Everything `run` needs.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkersConfig {
    /// What to poll. A URL without a path (or `/`) polls `/config` on it.
    pub target: String,
    /// Number of pollers (N).
    pub count: usize,
    /// Each worker polls once per interval.
    pub interval: Duration,
    /// Client timeout per attempt.
    pub timeout: Duration,
    pub retry: RetryPolicy,
    /// Attempts per poll, first included; 0 = retry forever.
    pub max_attempts: u32,
    /// Retries allowed as a fraction of successful attempts (token bucket); None = no budget.
    pub retry_budget: Option<f64>,
    /// Where to serve `/metrics`; None = not served.
    pub metrics_listen: Option<SocketAddr>,
    /// Stop after this long; None = until `shutdown`.
    pub duration: Option<Duration>,
    /// How each attempt says which attempt it is (`none`: as most real clients, not at all).
    pub attempt_header: AttemptHeader,
    /// Send an `Idempotency-Key`, the same for a poll and its retries.
    pub idempotency_key: bool,
}

impl WorkersConfig {
    /// The laptop scenario of [`super::defaults`] against `target`.
    pub fn new(target: impl Into<String>) -> Self {
        WorkersConfig {
            target: target.into(),
            count: defaults::WORKERS,
            interval: defaults::POLL_INTERVAL,
            timeout: defaults::CLIENT_TIMEOUT,
            retry: RetryPolicy::fixed(defaults::RETRY_DELAY),
            max_attempts: 0,
            retry_budget: None,
            metrics_listen: None,
            duration: None,
            attempt_header: AttemptHeader::XAttempt,
            idempotency_key: false,
        }
    }

    /// The URL each attempt requests.
    pub fn url(&self) -> Result<http::Uri, WorkersError> {
        let bad = |why: String| WorkersError::Invalid(format!("--target {:?}: {why}", self.target));
        let uri: http::Uri = self.target.parse().map_err(|e| bad(format!("{e}")))?;
        if uri.scheme_str() != Some("http") {
            return Err(bad(
                "write an http:// URL, like http://127.0.0.1:8080".into()
            ));
        }
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| bad("no host:port".into()))?;
        let path = match uri.path_and_query().map(|p| p.as_str()) {
            None | Some("") | Some("/") => "/config",
            Some(p) => p,
        };
        http::Uri::builder()
            .scheme("http")
            .authority(authority)
            .path_and_query(path)
            .build()
            .map_err(|e| bad(format!("{e}")))
    }

    pub fn validate(&self) -> Result<http::Uri, WorkersError> {
        let bad = |s: &str| Err(WorkersError::Invalid(s.to_string()));
        if self.count == 0 {
            return bad("--count: must be at least 1");
        }
        if self.interval.is_zero() {
            return bad("--interval: must be more than 0");
        }
        if self.timeout.is_zero() {
            return bad("--timeout: must be more than 0");
        }
        if let Some(b) = self.retry_budget {
            if !(b.is_finite() && b >= 0.0) {
                return bad("--retry-budget: must be a fraction >= 0, like 0.1");
            }
        }
        self.url()
    }
}

/// Why the fleet could not run.
#[derive(Debug, thiserror::Error)]
pub enum WorkersError {
    #[error("invalid configuration: {0}")]
    Invalid(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Run the fleet until `shutdown` is cancelled or `duration` has passed.
pub async fn run(cfg: WorkersConfig, shutdown: CancellationToken) -> Result<(), WorkersError> {
    let url = cfg.validate()?;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build_http();
    let budget = cfg.retry_budget.map(|ratio| {
        // Holds (and starts with) what one round of successful polls earns, so a burst of
        // failures spends a bounded number of retries and then the fleet stops retrying.
        Mutex::new(RetryBudget::new(ratio, ratio * cfg.count as f64))
    });
    let fleet = Arc::new(Fleet {
        client,
        url,
        interval: cfg.interval,
        timeout: cfg.timeout,
        policy: cfg.retry,
        max_attempts: cfg.max_attempts,
        budget,
        metrics: WorkerMetrics::new(cfg.timeout, cfg.count),
        attempt_header: cfg.attempt_header,
        idempotency_key: cfg.idempotency_key,
    });
    let stop = shutdown.child_token();

    if let Some(addr) = cfg.metrics_listen {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| WorkersError::Bind { addr, source })?;
        let f = fleet.clone();
        let app = Router::new()
            .route(
                "/metrics",
                get(move |headers: axum::http::HeaderMap| async move {
                    crate::util::text_format::respond(&headers, &f.metrics.encode())
                }),
            )
            .route("/healthz", get(|| async { "ok" }));
        let s = stop.clone();
        tokio::spawn(async move {
            let timeouts = crate::util::http_server::Timeouts::default();
            let _ =
                crate::util::http_server::serve(listener, app, timeouts, s.cancelled_owned()).await;
        });
        tracing::info!(%addr, "workers serving /metrics");
    }

    let start = Instant::now();
    let mut tasks = Vec::with_capacity(cfg.count);
    for i in 0..cfg.count {
        let first = start + phase(i, cfg.count, cfg.interval);
        tasks.push(tokio::spawn(run_poller(
            fleet.clone(),
            i,
            first,
            stop.clone(),
        )));
    }
    fleet.metrics.count.set(cfg.count as i64);
    tracing::info!(count = cfg.count, target = %fleet.url, policy = %cfg.retry, "workers polling");

    match cfg.duration {
        Some(d) => {
            tokio::select! {
                _ = tokio::time::sleep(d) => {}
                _ = shutdown.cancelled() => {}
            }
        }
        None => shutdown.cancelled().await,
    }
    stop.cancel();
    for t in tasks {
        let _ = t.await;
    }
    fleet.metrics.count.set(0);
    Ok(())
}
