//! The per-request policy, apart from the bytes on the wire: count the attempt, admit or
//! reject at once, pick the least busy replica, set the deadline, and record exactly one
//! outcome. A rejected request never touches the upstream. [`super::connection`] does
//! the I/O around these decisions.

use super::admission::{Admission, Admit, InFlight};
use super::balance::{Pick, Replicas};
use super::deadline;
use super::http1::RequestHead;
use super::telemetry::{GateMetrics, RequestOutcome};
use std::sync::Arc;
use std::time::Duration;

pub struct Proxy {
    pub admission: Arc<Admission>,
    pub metrics: Arc<GateMetrics>,
    pub replicas: Arc<Replicas>,
    /// How long the gate waits for an upstream's response head (and, while a response
    /// body streams, for each next piece of it).
    pub timeout: Duration,
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
}

impl Proxy {
    pub fn new(
        admission: Arc<Admission>,
        metrics: Arc<GateMetrics>,
        replicas: Arc<Replicas>,
        timeout: Duration,
    ) -> Self {
        Proxy {
            admission,
            metrics,
            replicas,
            timeout,
        }
    }

    /// Reject one request or forward it. An admitted request's upstream head goes into
    /// `upstream_head`.
    pub fn dispatch(
        &self,
        head: &RequestHead<'_, '_>,
        upstream_head: &mut Vec<u8>,
    ) -> Dispatch<'_> {
        self.metrics.attempt(head.header("x-attempt"));
        let slot = match self.admission.try_admit() {
            Admit::Admitted(slot) => slot,
            Admit::RejectedRate { retry_after_s } => {
                self.metrics.outcome(RequestOutcome::RejectedRate);
                return Dispatch::Reject {
                    retry_after_s,
                    body: "over the gate's rate limit\n",
                };
            }
            Admit::RejectedInFlight => {
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
            },
        })
    }
}

/// Records the outcome of an admitted request exactly once, also when the client hangs
/// up and the exchange is dropped mid-flight (the outcome then stays `ClientGone`).
struct PendingOutcome<'a> {
    metrics: &'a GateMetrics,
    outcome: Option<RequestOutcome>,
}

impl Drop for PendingOutcome<'_> {
    fn drop(&mut self) {
        if let Some(o) = self.outcome.take() {
            self.metrics.outcome(o);
        }
    }
}
