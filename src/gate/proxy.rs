//! The proxy hot path, one request at a time: count the attempt, admit or reject at once,
//! pick the least busy replica, forward with the deadline header under the upstream
//! timeout, count the outcome. A rejected request never touches the upstream. Kept free
//! of allocation-heavy layers: this path is benchmarked against nginx.

use super::admission::{Admission, Verdict};
use super::balance::Replicas;
use super::deadline;
use super::telemetry::{GateMetrics, Outcome};
use super::upstream::{self, Links, UpstreamBody};
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub type ProxyBody = Either<UpstreamBody, Full<Bytes>>;

/// Headers that describe one connection, not the message: never forwarded.
const HOP_BY_HOP: [HeaderName; 6] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::UPGRADE,
];

pub struct Proxy {
    pub admission: Arc<Admission>,
    pub metrics: Arc<GateMetrics>,
    pub replicas: Arc<Replicas>,
    timeout: Duration,
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

    /// Answer one request; `links` are the upstream connections of the client connection
    /// it came on.
    pub async fn handle(
        &self,
        mut req: Request<Incoming>,
        links: &Arc<Links>,
    ) -> Response<ProxyBody> {
        let arrived = Instant::now();
        self.metrics
            .attempt(req.headers().get("x-attempt").map(HeaderValue::as_bytes));
        let _slot = match self.admission.try_admit() {
            Verdict::Admitted(slot) => slot,
            Verdict::RejectedRate { retry_after_s } => {
                self.metrics.outcome(Outcome::RejectedRate);
                return too_many(retry_after_s, "over the gate's rate limit\n");
            }
            Verdict::RejectedInFlight => {
                self.metrics.outcome(Outcome::RejectedInFlight);
                return too_many(1, "over the gate's in-flight limit\n");
            }
        };
        let mut pending = PendingOutcome {
            metrics: &self.metrics,
            outcome: Some(Outcome::ClientGone),
        };
        let pick = self.replicas.pick();
        let path = req
            .uri()
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
        // Origin form on the wire. The client's Host goes through as it came (a transparent
        // edge); an HTTP/1.0 client that sent none gets the replica's.
        *req.uri_mut() = Uri::from(path);
        strip_hop_by_hop(req.headers_mut());
        if !req.headers().contains_key(header::HOST) {
            if let Ok(host) = HeaderValue::from_str(pick.replica.authority.as_str()) {
                req.headers_mut().insert(header::HOST, host);
            }
        }
        let deadline = deadline::compute(
            deadline::now_epoch_ms(),
            self.timeout,
            arrived.elapsed(),
            req.headers()
                .get(deadline::HEADER)
                .map(HeaderValue::as_bytes),
        );
        req.headers_mut()
            .insert(deadline::HEADER, HeaderValue::from(deadline.epoch_ms));
        let wait = deadline.wait;

        let sent = Instant::now();
        let exchange = upstream::send(links, pick.index, &pick.replica.authority, req);
        match tokio::time::timeout(wait, exchange).await {
            Ok(Ok(mut resp)) => {
                self.metrics
                    .upstream_response(resp.status().as_u16(), sent.elapsed().as_secs_f64());
                pending.outcome = Some(Outcome::Admitted);
                strip_hop_by_hop(resp.headers_mut());
                resp.map(Either::Left)
            }
            Ok(Err(e)) => {
                if e.is_connect() {
                    self.replicas.eject(&pick);
                }
                tracing::debug!(error = %e, "upstream error");
                pending.outcome = Some(Outcome::UpstreamError);
                plain(StatusCode::BAD_GATEWAY, "upstream unreachable\n")
            }
            Err(_) => {
                pending.outcome = Some(Outcome::UpstreamTimeout);
                plain(StatusCode::GATEWAY_TIMEOUT, "upstream timed out\n")
            }
        }
    }
}

/// Records the outcome of an admitted request exactly once, also when the client hangs
/// up and hyper drops the handler mid-flight (the outcome then stays `ClientGone`).
struct PendingOutcome<'a> {
    metrics: &'a GateMetrics,
    outcome: Option<Outcome>,
}

impl Drop for PendingOutcome<'_> {
    fn drop(&mut self) {
        if let Some(o) = self.outcome.take() {
            self.metrics.outcome(o);
        }
    }
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    if headers.is_empty() {
        return;
    }
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
}

fn plain(status: StatusCode, body: &'static str) -> Response<ProxyBody> {
    let mut r = Response::new(Either::Right(Full::new(Bytes::from_static(
        body.as_bytes(),
    ))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn too_many(retry_after_s: u64, body: &'static str) -> Response<ProxyBody> {
    let mut r = plain(StatusCode::TOO_MANY_REQUESTS, body);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
    r
}
