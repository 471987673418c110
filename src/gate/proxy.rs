//! The per-request policy, apart from the bytes on the wire: count the attempt (first or
//! retry, [`super::attempts`]), admit or reject at once, pick the least busy replica, set
//! the deadline, and record exactly one outcome; a 429, 5xx or timeout is remembered
//! against the client so its retry is recognised. A rejected request never touches the
//! upstream. [`super::connection`] does the I/O around these decisions.

use super::admission::{Admission, Admit, InFlight};
use super::attempts::{client_of, Attempts, Method};
use super::balance::{Pick, Replicas};
use super::deadline;
use super::http1::RequestHead;
use super::telemetry::{GateMetrics, RequestOutcome};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

pub struct Proxy {
    pub admission: Arc<Admission>,
    pub metrics: Arc<GateMetrics>,
    pub replicas: Arc<Replicas>,
    /// How long the gate waits for an upstream's response head (and, while a response
    /// body streams, for each next piece of it).
    pub timeout: Duration,
    /// What tells first attempts from retries (bounded memory, shared by every
    /// connection of every worker).
    pub attempts: Arc<Attempts>,
}

/// What to do with one request.
pub enum Dispatch<'p> {
    /// Answer 429 with this Retry-After and body, without touching the upstream.
    Reject {
        retry_after_s: u64,
        body: &'static str,
    },
    Forward(Admitted<'p>),
}

/// An admitted request: its in-flight slot, its replica, how long to wait for it, and
/// its outcome, recorded when this drops.
pub struct Admitted<'p> {
    _slot: InFlight<'p>,
    pub pick: Pick<'p>,
    pub wait: Duration,
    outcome: PendingOutcome<'p>,
}

impl Admitted<'_> {
    /// Record how this request ended (the last call wins); unless told otherwise, an
    /// admitted request that goes away ended because the client hung up.
    pub fn ended(&mut self, o: RequestOutcome) {
        if matches!(
            o,
            RequestOutcome::Admitted | RequestOutcome::UpstreamTimeout
        ) {
            self.pick.observe(); // the replica's latency, for outlier ejection
        }
        self.outcome.outcome = Some(o);
    }

    /// The upstream answered with `status`: a 5xx is a failure the client may retry.
    pub fn answered(&mut self, status: u16) {
        self.outcome.server_error = status >= 500;
    }
}

impl Proxy {
    pub fn new(
        admission: Arc<Admission>,
        metrics: Arc<GateMetrics>,
        replicas: Arc<Replicas>,
        timeout: Duration,
        attempts: Arc<Attempts>,
    ) -> Self {
        Proxy {
            admission,
            metrics,
            replicas,
            timeout,
            attempts,
        }
    }

    /// Decide for one request from the peer `peer`. An admitted request's upstream head
    /// goes into `upstream_head`.
    pub fn dispatch(
        &self,
        head: &RequestHead<'_, '_>,
        peer: Option<IpAddr>,
        upstream_head: &mut Vec<u8>,
    ) -> Dispatch<'_> {
        let client = client_of(head.header("x-forwarded-for"), peer);
        let (method, kind) = self.attempts.classify(|h| head.header(h), client);
        self.metrics.attempts.count(method, kind);
        // Failures are remembered for clients that mark nothing: the rest are counted
        // by what they send.
        let failed_client = client.filter(|_| method == Method::ClientAddress);
        let slot = match self.admission.try_admit() {
            Admit::Admitted(slot) => slot,
            Admit::RejectedRate { retry_after_s } => {
                self.attempts.failed(failed_client);
                self.metrics.outcome(RequestOutcome::RejectedRate);
                return Dispatch::Reject {
                    retry_after_s,
                    body: "over the gate's rate limit\n",
                };
            }
            Admit::RejectedInFlight => {
                self.attempts.failed(failed_client);
                self.metrics.outcome(RequestOutcome::RejectedInFlight);
                return Dispatch::Reject {
                    retry_after_s: 1,
                    body: "over the gate's in-flight limit\n",
                };
            }
        };
        let pick = self.replicas.pick();
        let deadline = deadline::compute(
            deadline::now_epoch_ms(),
            self.timeout,
            Duration::ZERO,
            head.header(deadline::HEADER),
        );
        head.write_upstream(
            upstream_head,
            pick.replica.authority.as_str(),
            deadline.epoch_ms,
        );
        Dispatch::Forward(Admitted {
            _slot: slot,
            pick,
            wait: deadline.wait,
            outcome: PendingOutcome {
                metrics: &self.metrics,
                outcome: Some(RequestOutcome::ClientGone),
                attempts: &self.attempts,
                client: failed_client,
                server_error: false,
            },
        })
    }
}

/// Records the outcome of an admitted request exactly once, also when the client hangs
/// up and the exchange is dropped mid-flight (the outcome then stays `ClientGone`). A
/// request that failed (5xx, a timeout on either side) is remembered against its client.
struct PendingOutcome<'a> {
    metrics: &'a GateMetrics,
    outcome: Option<RequestOutcome>,
    attempts: &'a Attempts,
    client: Option<IpAddr>,
    server_error: bool,
}

impl Drop for PendingOutcome<'_> {
    fn drop(&mut self) {
        if let Some(o) = self.outcome.take() {
            self.metrics.outcome(o);
            let failed = self.server_error
                || matches!(
                    o,
                    RequestOutcome::UpstreamError
                        | RequestOutcome::UpstreamTimeout
                        | RequestOutcome::ClientGone
                );
            if failed {
                self.attempts.failed(self.client);
            }
        }
    }
}
