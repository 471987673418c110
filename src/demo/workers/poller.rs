//! One worker: polls on its own fixed schedule (its phase within the interval), and on a
//! failed attempt follows the retry policy until success, `--max-attempts`, or an empty
//! retry budget.

use super::metrics::{OutcomeLabel, WorkerMetrics};
use super::phases::Phase;
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

/// Run worker `index` until `shutdown`.
pub async fn run_poller(
    fleet: Arc<Fleet>,
    index: usize,
    first: Instant,
    shutdown: CancellationToken,
) {
    let mut slot = first;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(slot.into()) => {}
            _ = shutdown.cancelled() => return,
        }
        let Some(ok) = poll(&fleet, index, &shutdown).await else {
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

/// Counts worker `.1` in `in_retry_loop` for as long as it lives, and takes its phase back
/// to idle when it ends (also on shutdown).
struct InRetryLoop<'a>(&'a WorkerMetrics, usize);

impl<'a> InRetryLoop<'a> {
    fn new(m: &'a WorkerMetrics, index: usize) -> Self {
        m.in_retry_loop.inc();
        InRetryLoop(m, index)
    }

    /// The worker sleeps out a retry delay until `next_at`.
    fn waiting(&self, next_at: Instant) {
        self.0.phases.set(self.1, Phase::Waiting { next_at });
    }
}

impl Drop for InRetryLoop<'_> {
    fn drop(&mut self) {
        self.0.phases.set(self.1, Phase::Idle);
        self.0.in_retry_loop.dec();
    }
}

/// One demanded poll with its retries, by worker `index`. `Some(true)` ok, `Some(false)`
/// given up, `None` shut down.
async fn poll(fleet: &Fleet, index: usize, shutdown: &CancellationToken) -> Option<bool> {
    let mut attempt_no: u32 = 1;
    let mut in_loop: Option<InRetryLoop<'_>> = None;
    // One key per demanded poll, repeated by its retries, as an idempotent client does.
    let key = fleet
        .idempotency_key
        .then(|| format!("{:016x}", rand::random::<u64>()));
    loop {
        let gives_up_at = Instant::now() + fleet.timeout;
        let sending = in_loop
            .as_ref()
            .map(|_| RetryInFlight::new(&fleet.metrics, index, gives_up_at));
        let outcome = tokio::select! {
            o = attempt(fleet, attempt_no, key.as_deref(), gives_up_at) => o,
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
        let in_loop = in_loop.get_or_insert_with(|| InRetryLoop::new(&fleet.metrics, index));
        fleet.metrics.retries.inc();
        let next_at = Instant::now() + fleet.policy.delay(attempt_no, rand::random::<f64>);
        in_loop.waiting(next_at);
        tokio::select! {
            _ = tokio::time::sleep_until(next_at.into()) => {}
            _ = shutdown.cancelled() => return None,
        }
        attempt_no += 1;
    }
}

/// Counts a retry in `retrying_in_flight` while its attempt is out (also on shutdown),
/// its worker's phase out until `gives_up_at` (the poll sets the next phase as it ends).
struct RetryInFlight<'a>(&'a WorkerMetrics);

impl<'a> RetryInFlight<'a> {
    fn new(m: &'a WorkerMetrics, index: usize, gives_up_at: Instant) -> Self {
        m.phases.set(index, Phase::Out { gives_up_at });
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

/// One HTTP attempt, given up on at `gives_up_at` (the client timeout from its start).
async fn attempt(
    fleet: &Fleet,
    attempt_no: u32,
    key: Option<&str>,
    gives_up_at: Instant,
) -> Attempt {
    // The deadline the service is told is the one the client gives up at.
    let deadline = SystemTime::now() + gives_up_at.saturating_duration_since(Instant::now());
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
    let outcome = match tokio::time::timeout_at(gives_up_at.into(), exchange).await {
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

    /// A fleet of one worker polling `url` with `timeout` per attempt and a fixed `delay`.
    fn one_worker(url: &str, timeout: Duration, delay: Duration) -> Arc<Fleet> {
        let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
        Arc::new(Fleet {
            client,
            url: url.parse().unwrap(),
            interval: Duration::from_secs(60),
            timeout,
            policy: RetryPolicy::fixed(delay),
            max_attempts: 0,
            budget: None,
            metrics: WorkerMetrics::new(timeout, 1),
            attempt_header: AttemptHeader::XAttempt,
            idempotency_key: false,
        })
    }

    /// A server on loopback that drops the first connection at once (the first attempt
    /// fails, its worker enters the loop) and holds every later one unanswered.
    async fn refuse_then_hold() -> String {
        let addr = crate::util::ports::reserved_loopback_addr().unwrap();
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        tokio::spawn(async move {
            let mut held = Vec::new();
            let mut first = true;
            while let Ok((conn, _)) = listener.accept().await {
                if !std::mem::take(&mut first) {
                    held.push(conn);
                }
            }
        });
        format!("http://{addr}/config")
    }

    /// The worker's phase and counts while it stands somewhere, then after a shutdown.
    async fn stands_then_cancelled(fleet: Arc<Fleet>, stands: impl Fn(Phase) -> bool) {
        let stop = CancellationToken::new();
        let task = tokio::spawn(run_poller(fleet.clone(), 0, Instant::now(), stop.clone()));
        let m = &fleet.metrics;
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let p = m.phases.phase(0);
            if stands(p) {
                break;
            }
            assert!(Instant::now() < until, "never stood as expected: {p:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(m.in_retry_loop.get(), 1);
        stop.cancel();
        task.await.unwrap();
        assert_eq!(m.phases.phase(0), Phase::Idle, "idle after the shutdown");
        assert_eq!((m.in_retry_loop.get(), m.retrying_in_flight.get()), (0, 0));
    }

    /// A worker shut down while it waits out a retry delay leaves no trace in the ladders.
    #[tokio::test]
    async fn a_worker_waiting_then_shut_down_stands_nowhere() {
        let url = refuse_then_hold().await;
        let fleet = one_worker(&url, Duration::from_secs(5), Duration::from_secs(30));
        stands_then_cancelled(fleet, |p| matches!(p, Phase::Waiting { .. })).await;
    }

    /// A worker shut down with a retry attempt out leaves no trace in the ladders; while it
    /// was out, its deadline was the timeout from the attempt's start.
    #[tokio::test]
    async fn a_worker_out_then_shut_down_stands_nowhere() {
        let url = refuse_then_hold().await;
        let fleet = one_worker(&url, Duration::from_secs(30), Duration::from_millis(10));
        let f = fleet.clone();
        stands_then_cancelled(fleet, move |p| match p {
            Phase::Out { gives_up_at } => {
                assert!(gives_up_at <= Instant::now() + Duration::from_secs(30));
                assert!(gives_up_at > Instant::now() + Duration::from_secs(20));
                assert_eq!(f.metrics.retrying_in_flight.get(), 1);
                true
            }
            _ => false,
        })
        .await;
    }
}
