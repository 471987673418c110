//! Which requests are first attempts and which are retries, from what real clients send.
//!
//! Why it exists: the detector tells "the trigger is gone" from first-attempt demand
//! falling back to its baseline. Counting every request as a first attempt makes a retry
//! storm look like new demand forever, and the detector never says Stuck. Clients mark
//! retries in several ways, or not at all; this module reads, in order:
//! 1. an attempt marker: `x-attempt: N` (the demo workers), Envoy's
//!    `x-envoy-attempt-count: N`, gRPC's `grpc-previous-rpc-attempts: N`, the AWS SDKs'
//!    `amz-sdk-request: attempt=N; max=M`;
//! 2. a request key seen in the last [`KEY_WINDOW`] (`Idempotency-Key`, else
//!    `X-Request-Id`): a client that reuses the key for a retry is recognised by it;
//! 3. the client's address (`X-Forwarded-For`'s first hop, else the peer): each 429, 5xx
//!    or timeout the gate gave that address within [`RETRY_HORIZON`] predicts one retry,
//!    and the next unmarked request from it is counted as that retry.
//!
//! The metric says which method counted each request. The remembering is bounded and
//! approximate: fixed tables of hashed entries packed into atomics, so memory is flat
//! under any traffic and the hot path takes no lock; collisions and evictions only make
//! the estimate rougher. The tables are pure over a millisecond clock passed in.

mod tables;

pub use tables::{ClientSlot, FailedClients, RecentKeys};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// A request key seen again within this long is a retry.
pub const KEY_WINDOW: Duration = Duration::from_secs(30);
/// A failure the gate gave a client predicts a retry from it within this long.
pub const RETRY_HORIZON: Duration = Duration::from_secs(10);
/// Slots of the key table (8 bytes each: 512 KiB).
pub const KEY_SLOTS: usize = 1 << 16;
/// Slots of the client table (8 bytes each: 128 KiB).
pub const CLIENT_SLOTS: usize = 1 << 14;

/// How a request was classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    XAttempt,
    Envoy,
    Grpc,
    AwsSdk,
    RequestKey,
    ClientAddress,
}

impl Method {
    pub const ALL: [Method; 6] = [
        Method::XAttempt,
        Method::Envoy,
        Method::Grpc,
        Method::AwsSdk,
        Method::RequestKey,
        Method::ClientAddress,
    ];

    /// The `method` label of `recover_gate_attempts_total`.
    pub fn label(self) -> &'static str {
        match self {
            Method::XAttempt => "x-attempt",
            Method::Envoy => "x-envoy-attempt-count",
            Method::Grpc => "grpc-previous-rpc-attempts",
            Method::AwsSdk => "amz-sdk-request",
            Method::RequestKey => "request-key",
            Method::ClientAddress => "client-address",
        }
    }
}

/// First attempt or retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    First,
    Retry,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::First => "first",
            Kind::Retry => "retry",
        }
    }

    fn from_attempt(n: u64) -> Kind {
        if n >= 2 {
            Kind::Retry
        } else {
            Kind::First
        }
    }
}

fn parse_uint(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// `attempt=N` out of `amz-sdk-request: attempt=2; max=3`.
fn aws_attempt(v: &[u8]) -> Option<u64> {
    v.split(|b| *b == b';').find_map(|part| {
        let (k, n) = std::str::from_utf8(part).ok()?.split_once('=')?;
        (k.trim().eq_ignore_ascii_case("attempt"))
            .then(|| parse_uint(n.as_bytes()))
            .flatten()
    })
}

/// What a request's own attempt markers say; `header` looks a header up by its
/// lower-case name. The first readable marker decides; unreadable ones are skipped.
pub fn marked<'h>(header: impl Fn(&str) -> Option<&'h [u8]>) -> Option<(Method, Kind)> {
    if let Some(n) = header("x-attempt").and_then(parse_uint) {
        return Some((Method::XAttempt, Kind::from_attempt(n)));
    }
    if let Some(n) = header("x-envoy-attempt-count").and_then(parse_uint) {
        return Some((Method::Envoy, Kind::from_attempt(n)));
    }
    if let Some(n) = header("grpc-previous-rpc-attempts").and_then(parse_uint) {
        return Some((Method::Grpc, Kind::from_attempt(n + 1)));
    }
    if let Some(n) = header("amz-sdk-request").and_then(aws_attempt) {
        return Some((Method::AwsSdk, Kind::from_attempt(n)));
    }
    None
}

/// The client a request speaks for: the first `X-Forwarded-For` hop when it parses
/// (behind a load balancer every peer is the balancer), else the peer address.
pub fn client_of(forwarded_for: Option<&[u8]>, peer: Option<IpAddr>) -> Option<IpAddr> {
    forwarded_for
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.split(',').next())
        .and_then(|first| first.trim().parse().ok())
        .or(peer)
}

/// The whole estimate, shared by every connection of a gate.
pub struct Attempts {
    keys: RecentKeys,
    clients: FailedClients,
    origin: Instant,
}

impl Default for Attempts {
    fn default() -> Self {
        Attempts {
            keys: RecentKeys::new(KEY_SLOTS, KEY_WINDOW),
            clients: FailedClients::new(CLIENT_SLOTS, RETRY_HORIZON),
            origin: Instant::now(),
        }
    }
}

impl Attempts {
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    /// Classify one request: its markers, else its key, else its client's recent failures.
    pub fn classify<'h>(
        &self,
        header: impl Fn(&str) -> Option<&'h [u8]>,
        client: Option<IpAddr>,
    ) -> Classified {
        let told = |method, kind| Classified {
            method,
            kind,
            client: None,
        };
        if let Some((method, kind)) = marked(&header) {
            return told(method, kind);
        }
        let key = header("idempotency-key").or_else(|| header("x-request-id"));
        if let Some(k) = key.filter(|k| !k.is_empty()) {
            let kind = if self.keys.seen(k, self.now_ms()) {
                Kind::Retry
            } else {
                Kind::First
            };
            return told(Method::RequestKey, kind);
        }
        let client = client.map(|c| self.clients.locate(c));
        let retry = client.is_some_and(|c| self.clients.take_retry(c, self.now_ms()));
        Classified {
            method: Method::ClientAddress,
            kind: if retry { Kind::Retry } else { Kind::First },
            client,
        }
    }

    /// The gate gave a client told apart by its address a 429, a 5xx or a timeout.
    pub fn failed(&self, client: Option<ClientSlot>) {
        if let Some(c) = client {
            self.clients.failed(c, self.now_ms());
        }
    }
}

/// One request as [`Attempts::classify`] told it: how, first or retry, and for a client
/// told apart by its address alone, where that address's failures are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classified {
    pub method: Method,
    pub kind: Kind,
    pub client: Option<ClientSlot>,
}

/// `recover_gate_attempts_total{kind, method}`: one handle per pair, resolved once.
pub struct AttemptCounters {
    counters: Vec<Counter>,
}

impl AttemptCounters {
    pub fn register(r: &mut Registry) -> Self {
        type Labels = [(&'static str, &'static str); 2];
        let pairs: Vec<Labels> = Method::ALL
            .iter()
            .flat_map(|m| {
                [Kind::First, Kind::Retry].map(|k| [("kind", k.label()), ("method", m.label())])
            })
            .collect();
        let family: Family<Labels, Counter> = crate::util::exposition::register_family(
            r,
            "recover_gate_attempts",
            "Requests by attempt (first or retry) and the method that told: an attempt header, a repeated request key, or the client's recent failures",
            pairs.clone(),
        );
        AttemptCounters {
            counters: pairs
                .iter()
                .map(|l| family.get_or_create(l).clone())
                .collect(),
        }
    }

    pub fn count(&self, method: Method, kind: Kind) {
        let m = Method::ALL.iter().position(|x| *x == method).unwrap_or(0);
        let k = usize::from(kind == Kind::Retry);
        self.counters[2 * m + k].inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers<'a>(h: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a [u8]> + 'a {
        move |name| {
            h.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_bytes())
        }
    }

    #[test]
    fn reads_every_attempt_marker() {
        for (h, want) in [
            (("x-attempt", "1"), (Method::XAttempt, Kind::First)),
            (("x-attempt", "3"), (Method::XAttempt, Kind::Retry)),
            (("x-envoy-attempt-count", "2"), (Method::Envoy, Kind::Retry)),
            (
                ("grpc-previous-rpc-attempts", "0"),
                (Method::Grpc, Kind::First),
            ),
            (
                ("grpc-previous-rpc-attempts", "1"),
                (Method::Grpc, Kind::Retry),
            ),
            (
                ("amz-sdk-request", "attempt=1; max=3"),
                (Method::AwsSdk, Kind::First),
            ),
            (
                ("amz-sdk-request", "ttl=x; attempt=2; max=3"),
                (Method::AwsSdk, Kind::Retry),
            ),
        ] {
            assert_eq!(marked(headers(&[h])), Some(want), "{h:?}");
        }
        // Unreadable markers are skipped, not guessed at.
        assert_eq!(marked(headers(&[("x-attempt", "two")])), None);
        assert_eq!(
            marked(headers(&[
                ("x-attempt", ""),
                ("x-envoy-attempt-count", "1")
            ])),
            Some((Method::Envoy, Kind::First))
        );
    }

    #[test]
    fn markers_then_keys_then_the_client_address() {
        let a = Attempts::default();
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let plain = headers(&[]);
        fn told<'h>(
            a: &Attempts,
            h: impl Fn(&str) -> Option<&'h [u8]>,
            ip: IpAddr,
        ) -> (Method, Kind) {
            let c = a.classify(h, Some(ip));
            (c.method, c.kind)
        }
        assert_eq!(told(&a, &plain, ip), (Method::ClientAddress, Kind::First));
        a.failed(Some(a.clients.locate(ip)));
        assert_eq!(told(&a, &plain, ip), (Method::ClientAddress, Kind::Retry));
        assert_eq!(told(&a, &plain, ip), (Method::ClientAddress, Kind::First));
        let keyed = headers(&[("Idempotency-Key", "k1")]);
        assert_eq!(told(&a, &keyed, ip), (Method::RequestKey, Kind::First));
        assert_eq!(told(&a, &keyed, ip), (Method::RequestKey, Kind::Retry));
        let both = headers(&[("x-request-id", "k1"), ("x-attempt", "1")]);
        assert_eq!(told(&a, &both, ip), (Method::XAttempt, Kind::First));
        assert_eq!(
            client_of(Some(b"203.0.113.9, 10.0.0.1"), Some(ip)),
            Some("203.0.113.9".parse().unwrap())
        );
        assert_eq!(client_of(Some(b"unknown"), Some(ip)), Some(ip));
    }
}
