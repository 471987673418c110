//! One worker: polls on its own fixed schedule (its phase within the interval), and on a
//! failed attempt follows the retry policy until success, `--max-attempts`, or an empty
//! retry budget.

use super::metrics::{OutcomeLabel, WorkerMetrics};
use crate::retry::{RetryBudget, RetryPolicy};
use crate::util::http_body::{read_body, BodyCaps};
use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;

/// The config a worker fetches is a few hundred bytes; a body past this is an error.
const MAX_BODY: usize = 1024 * 1024;

/// The next poll slot strictly after `now`, for a worker whose slots are
/// `first + m * interval`. A poll that outlived its slot (a long retry loop) skips the
/// slots it missed: a worker has one poll outstanding at most, and polls keep the phases
/// they started with instead of bunching up after an outage.
pub fn next_slot(first: Instant, interval: Duration, now: Instant) -> Instant {
    if now < first || interval.is_zero() {
        return first.max(now);
    }
    let elapsed = now - first;
    let n = (elapsed.as_nanos() / interval.as_nanos()) as u32 + 1;
    first + interval * n
}

/// The phase of worker `index` of `count`: spread evenly over the interval.
pub fn phase(index: usize, count: usize, interval: Duration) -> Duration {
    if count == 0 {
        return Duration::ZERO;
    }
    interval.mul_f64(index as f64 / count as f64)
}

/// Plain HTTP/1 client (hyper): the demo speaks http:// on loopback only, and a TLS-capable
/// client would drag in a crypto provider for nothing.
pub type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// How an attempt says which attempt it is: the header real clients of each kind send.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum AttemptHeader {
    /// No attempt header at all, like most clients.
    None,
    /// `x-attempt: N` (1 for the first attempt).
    #[default]
    XAttempt,
    /// Envoy's `x-envoy-attempt-count: N`.
    XEnvoyAttemptCount,
    /// gRPC's `grpc-previous-rpc-attempts: N - 1`.
    GrpcPreviousRpcAttempts,
    /// The AWS SDKs' `amz-sdk-request: attempt=N; max=M`.
    AmzSdkRequest,
}

impl AttemptHeader {
    /// The header for attempt `n` (1-based), if any.
    pub fn header(self, n: u32) -> Option<(&'static str, String)> {
        match self {
            AttemptHeader::None => None,
            AttemptHeader::XAttempt => Some(("x-attempt", n.to_string())),
            AttemptHeader::XEnvoyAttemptCount => Some(("x-envoy-attempt-count", n.to_string())),
            AttemptHeader::GrpcPreviousRpcAttempts => Some((
                "grpc-previous-rpc-attempts",
                n.saturating_sub(1).to_string(),
            )),
            AttemptHeader::AmzSdkRequest => {
                Some(("amz-sdk-request", format!("attempt={n}; max=0")))
            }
        }
    }

    /// As the `--attempt-header` flag spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptHeader::None => "none",
            AttemptHeader::XAttempt => "x-attempt",
            AttemptHeader::XEnvoyAttemptCount => "x-envoy-attempt-count",
            AttemptHeader::GrpcPreviousRpcAttempts => "grpc-previous-rpc-attempts",
            AttemptHeader::AmzSdkRequest => "amz-sdk-request",
        }
    }
}

/// What every poller shares.
pub struct Fleet {
    pub client: HttpClient,
    pub url: http::Uri,
    pub interval: Duration,
    pub timeout: Duration,
    pub policy: RetryPolicy,
    pub max_attempts: u32,
    pub budget: Option<Mutex<RetryBudget>>,
    pub metrics: WorkerMetrics,
    pub attempt_header: AttemptHeader,
    pub idempotency_key: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    Ok,
    Error,
    Timeout,
}

impl Attempt {
    fn label(self) -> &'static str {
        match self {
            Attempt::Ok => "ok",
            Attempt::Error => "error",
            Attempt::Timeout => "timeout",
        }
    }
}

/// Run one worker until `shutdown`.
pub async fn run_poller(fleet: Arc<Fleet>, first: Instant, shutdown: CancellationToken) {
    let mut slot = first;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(slot.into()) => {}
            _ = shutdown.cancelled() => return,
        }
        let Some(ok) = poll(&fleet, &shutdown).await else {
            return;
        };
        let outcome = if ok { "ok" } else { "given_up" };
        fleet
            .metrics
            .polls
            .get_or_create(&OutcomeLabel { outcome })
            .inc();
        slot = next_slot(first, fleet.interval, Instant::now());
    }
}

/// Counts the worker in `in_retry_loop` for as long as it lives (also on shutdown).
struct InRetryLoop<'a>(&'a WorkerMetrics);

impl Drop for InRetryLoop<'_> {
    fn drop(&mut self) {
        self.0.in_retry_loop.dec();
    }
}

/// One demanded poll with its retries. `Some(true)` ok, `Some(false)` given up, `None`
/// shut down.
async fn poll(fleet: &Fleet, shutdown: &CancellationToken) -> Option<bool> {
    let mut attempt_no: u32 = 1;
    let mut in_loop: Option<InRetryLoop<'_>> = None;
    // One key per demanded poll, repeated by its retries, as an idempotent client does.
    let key = fleet
        .idempotency_key
        .then(|| format!("{:016x}", rand::random::<u64>()));
    loop {
        let sending = in_loop.as_ref().map(|_| RetryInFlight::new(&fleet.metrics));
        let outcome = tokio::select! {
            o = attempt(fleet, attempt_no, key.as_deref()) => o,
            _ = shutdown.cancelled() => return None,
        };
        drop(sending);
        fleet
            .metrics
            .attempts
            .get_or_create(&OutcomeLabel {
                outcome: outcome.label(),
            })
            .inc();
        if outcome == Attempt::Ok {
            if let Some(b) = &fleet.budget {
                lock(b).on_success();
            }
            return Some(true);
        }
        if fleet.max_attempts != 0 && attempt_no >= fleet.max_attempts {
            return Some(false);
        }
        if let Some(b) = &fleet.budget {
            if !lock(b).try_spend() {
                return Some(false);
            }
        }
        if in_loop.is_none() {
            fleet.metrics.in_retry_loop.inc();
            in_loop = Some(InRetryLoop(&fleet.metrics));
        }
        fleet.metrics.retries.inc();
        let delay = fleet.policy.delay(attempt_no, rand::random::<f64>);
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.cancelled() => return None,
        }
        attempt_no += 1;
    }
}

/// Counts a retry in `retrying_in_flight` while its attempt is out (also on shutdown).
struct RetryInFlight<'a>(&'a WorkerMetrics);

impl<'a> RetryInFlight<'a> {
    fn new(m: &'a WorkerMetrics) -> Self {
        m.retrying_in_flight.inc();
        RetryInFlight(m)
    }
}

impl Drop for RetryInFlight<'_> {
    fn drop(&mut self) {
        self.0.retrying_in_flight.dec();
    }
}

fn lock(b: &Mutex<RetryBudget>) -> std::sync::MutexGuard<'_, RetryBudget> {
    b.lock().unwrap_or_else(|p| p.into_inner())
}

/// One HTTP attempt, bounded by the client timeout.
async fn attempt(fleet: &Fleet, attempt_no: u32, key: Option<&str>) -> Attempt {
    let deadline = SystemTime::now() + fleet.timeout;
    let deadline_ms = deadline
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let started = Instant::now();
    let mut request = http::Request::get(fleet.url.clone());
    if let Some((name, value)) = fleet.attempt_header.header(attempt_no) {
        request = request.header(name, value);
    }
    if let Some(k) = key {
        request = request.header("idempotency-key", k);
    }
    let request = request
        .header("x-deadline-ms", deadline_ms.to_string())
        .body(Empty::new());
    let Ok(request) = request else {
        return Attempt::Error;
    };
    // The body is part of the answer: read it within the same timeout. Dropping the future
    // on timeout closes the connection, as a client that gives up does.
    let exchange = async {
        let resp = fleet.client.request(request).await.map_err(|_| ())?;
        let ok = resp.status().is_success();
        let caps = BodyCaps::new(MAX_BODY, fleet.timeout);
        read_body(resp.into_body(), caps).await.map_err(|_| ())?;
        Ok::<bool, ()>(ok)
    };
    let outcome = match tokio::time::timeout(fleet.timeout, exchange).await {
        Ok(Ok(true)) => Attempt::Ok,
        Ok(Ok(false)) | Ok(Err(())) => Attempt::Error,
        Err(_) => Attempt::Timeout,
    };
    fleet
        .metrics
        .observe_latency(started.elapsed().as_secs_f64());
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_keep_their_phase_and_skip_missed_ones() {
        let t0 = Instant::now();
        let i = Duration::from_secs(10);
        let first = t0 + Duration::from_secs(3);
        assert_eq!(next_slot(first, i, first), first + i);
        assert_eq!(
            next_slot(first, i, first + Duration::from_millis(200)),
            first + i
        );
        // A retry loop of 25 s skipped two slots: the next one is at 30 s.
        assert_eq!(
            next_slot(first, i, first + Duration::from_secs(25)),
            first + i * 3
        );
        assert_eq!(next_slot(first, i, t0), first);
    }

    #[test]
    fn phases_spread_evenly() {
        let i = Duration::from_secs(12);
        assert_eq!(phase(0, 4, i), Duration::ZERO);
        assert_eq!(phase(1, 4, i), Duration::from_secs(3));
        assert_eq!(phase(3, 4, i), Duration::from_secs(9));
    }
}
