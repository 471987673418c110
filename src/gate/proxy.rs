//! The per-request policy, apart from the bytes on the wire: count the attempt (first or
//! retry, [`super::attempts`]), admit or reject at once, pick the least busy replica, set
//! the deadline, and record exactly one outcome; a 429, 5xx or timeout is remembered
//! against the client so its retry is recognised. A rejected request never touches the
//! upstream. A request the limit in shadow would have refused is forwarded like any
//! other and counted by why it would have been refused. [`super::connection`] does the I/O around these decisions.

use super::admission::{Admission, Admit, InFlight};
use super::attempts::{client_of, Attempts, ClientSlot};
use super::balance::{Pick, Replicas};
use super::deadline;
use super::http1::RequestHead;
use super::resend::{self, Refusal};
use super::telemetry::{Decision, GateMetrics, RequestOutcome};
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
    /// None only after a resend was refused admission: the request is ending.
    slot: Option<InFlight<'p>>,
    admission: &'p Admission,
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

    /// Whether the request may go out again after a reused upstream connection failed
    /// ([`resend`]): `written` says whether any byte of it reached that connection. A
    /// resend is admitted like a new request, its own slot given up first; every
    /// decision is counted.
    pub fn resend(&mut self, written: bool, idempotent: bool) -> bool {
        let metrics = self.outcome.metrics;
        if let Err(why) = resend::may_resend(written, idempotent) {
            metrics.resend_refused(why);
            return false;
        }
        self.slot = None;
        match self.admission.try_admit() {
            Admit::Admitted(slot) => {
                if let Some(why) = slot.shadow_refused() {
                    metrics.shadow_refusal(why);
                }
                self.slot = Some(slot);
                metrics.resent();
                true
            }
            Admit::RejectedRate { .. } | Admit::RejectedInFlight => {
                metrics.resend_refused(Refusal::NotAdmitted);
                false
            }
        }
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
        let told = self.attempts.classify(|h| head.header(h), client);
        self.metrics.attempts.count(told.method, told.kind);
        // Failures are remembered for clients that mark nothing (`told.client` is theirs
        // alone): the rest are counted by what they send.
        let failed_client = told.client;
        let slot = match self.admission.try_admit() {
            Admit::Admitted(slot) => {
                self.metrics.decided(Decision::Admitted);
                if let Some(why) = slot.shadow_refused() {
                    self.metrics.shadow_refusal(why);
                }
                slot
            }
            Admit::RejectedRate { retry_after_s } => {
                self.metrics.decided(Decision::RejectedRate);
                self.attempts.failed(failed_client);
                self.metrics.outcome(RequestOutcome::RejectedRate);
                return Dispatch::Reject {
                    retry_after_s,
                    body: "over the gate's rate limit\n",
                };
            }
            Admit::RejectedInFlight => {
                self.metrics.decided(Decision::RejectedInFlight);
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
            slot: Some(slot),
            admission: &self.admission,
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
    client: Option<ClientSlot>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::balance::BalanceConfig;
    use crate::gate::http1::{head, parse_request};
    use crate::gate::limit::Limit;

    fn proxy(limit: Limit) -> Proxy {
        let metrics = Arc::new(GateMetrics::new());
        let admission = Arc::new(
            Admission::new(&limit, metrics.in_flight.clone())
                .with_shadow_gauge(metrics.shadow_in_flight.clone()),
        );
        let upstreams = ["127.0.0.1:9".parse().unwrap()];
        let replicas = Arc::new(Replicas::new(
            &upstreams,
            &BalanceConfig::default(),
            &metrics,
        ));
        let attempts = Arc::new(Attempts::default());
        Proxy::new(
            admission,
            metrics,
            replicas,
            Duration::from_secs(1),
            attempts,
        )
    }

    fn admitted(p: &Proxy) -> Admitted<'_> {
        let wire = b"GET / HTTP/1.1\r\nhost: h\r\n\r\n";
        let mut headers = head::empty_headers();
        let h = parse_request(wire, &mut headers).unwrap().unwrap();
        match p.dispatch(&h, None, &mut Vec::new()) {
            Dispatch::Forward(a) => a,
            Dispatch::Reject { .. } => panic!("the first request is admitted"),
        }
    }

    fn line(p: &Proxy, series: &str) -> bool {
        p.metrics.render().lines().any(|l| l == series)
    }

    #[test]
    fn a_resend_spends_the_rate_like_a_new_request() {
        let p = proxy(Limit {
            rate_per_s: Some(0.001),
            burst: 1,
            max_in_flight: None,
            note: None,
            shadow: false,
        });
        let mut a = admitted(&p);
        assert!(!a.resend(false, true), "the only cell is spent");
        assert!(line(
            &p,
            r#"recover_gate_upstream_resends_refused_total{reason="not_admitted"} 1"#
        ));
    }

    #[test]
    fn in_shadow_a_request_over_the_limit_is_forwarded_and_counted() {
        let p = proxy(Limit {
            rate_per_s: Some(0.001),
            burst: 1,
            max_in_flight: None,
            note: None,
            shadow: true,
        });
        let first = admitted(&p);
        let second = admitted(&p);
        assert!(line(
            &p,
            r#"recover_gate_shadow_refusals_total{reason="rate"} 1"#
        ));
        assert!(line(
            &p,
            r#"recover_gate_requests_total{outcome="rejected_rate"} 0"#
        ));
        drop((first, second));
    }

    #[test]
    fn a_resend_holds_one_in_flight_slot_and_is_counted() {
        let p = proxy(Limit {
            rate_per_s: None,
            burst: 1,
            max_in_flight: Some(1),
            note: None,
            shadow: false,
        });
        let mut a = admitted(&p);
        assert!(a.resend(false, true), "its own slot is given up first");
        assert_eq!(p.admission.in_flight(), 1);
        assert!(line(
            &p,
            r#"recover_gate_upstream_resends_total{reason="closed_before_write"} 1"#
        ));
        assert!(!a.resend(true, true));
        assert!(!a.resend(false, false));
        assert_eq!(
            p.admission.in_flight(),
            1,
            "a refusal before admission keeps the slot"
        );
        drop(a);
        assert_eq!(p.admission.in_flight(), 0);
    }
}
