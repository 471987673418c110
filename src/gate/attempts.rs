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

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::hash::{BuildHasher, Hash, RandomState};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
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

fn table(slots: usize) -> Box<[AtomicU64]> {
    (0..slots.next_power_of_two())
        .map(|_| AtomicU64::new(0))
        .collect()
}

/// Request keys seen recently. Each slot packs a 24-bit tag of the key's hash and the
/// time it was last seen (40 bits of milliseconds, plus one so 0 means empty); a key may
/// sit in either slot of its pair.
pub struct RecentKeys {
    slots: Box<[AtomicU64]>,
    hasher: RandomState,
    window_ms: u64,
}

const TIME_BITS: u32 = 40;
const TIME_MASK: u64 = (1 << TIME_BITS) - 1;

impl RecentKeys {
    pub fn new(slots: usize, window: Duration) -> Self {
        RecentKeys {
            slots: table(slots.max(2)),
            hasher: RandomState::new(),
            window_ms: window.as_millis() as u64,
        }
    }

    /// True when `key` was seen within the window (so this request is a retry); the key
    /// is remembered as seen now either way.
    pub fn seen(&self, key: &[u8], now_ms: u64) -> bool {
        let h = self.hasher.hash_one(key);
        let tag = (h >> TIME_BITS) | 1; // never 0: an empty slot has tag 0
        let pair = (h as usize) & (self.slots.len() - 1) & !1;
        let stamp = (now_ms & TIME_MASK) + 1;
        let entry = (tag << TIME_BITS) | stamp;
        let fresh = |e: u64| {
            let t = (e & TIME_MASK).saturating_sub(1);
            e != 0 && now_ms.saturating_sub(t) <= self.window_ms
        };
        let slots = [&self.slots[pair], &self.slots[pair + 1]];
        let now: [u64; 2] = slots.map(|s| s.load(Ordering::Relaxed));
        if let Some(i) = (0..2).find(|&i| now[i] >> TIME_BITS == tag && fresh(now[i])) {
            slots[i].store(entry, Ordering::Relaxed);
            return true;
        }
        // Replace whichever slot holds the older (or no, or a stale) entry.
        let victim =
            if !fresh(now[0]) || (fresh(now[1]) && now[0] & TIME_MASK <= now[1] & TIME_MASK) {
                0
            } else {
                1
            };
        slots[victim].store(entry, Ordering::Relaxed);
        false
    }
}

/// Failures the gate gave each client address recently, as retries owed. Each slot packs
/// a 16-bit tag of the address's hash, a 16-bit count of failures not yet matched by a
/// retry, and the time of the last failure (32 bits of 10 ms ticks, plus one).
pub struct FailedClients {
    slots: Box<[AtomicU64]>,
    hasher: RandomState,
    horizon_ticks: u64,
}

const TICK_MS: u64 = 10;

impl FailedClients {
    pub fn new(slots: usize, horizon: Duration) -> Self {
        FailedClients {
            slots: table(slots.max(1)),
            hasher: RandomState::new(),
            horizon_ticks: horizon.as_millis() as u64 / TICK_MS,
        }
    }

    fn locate<T: Hash>(&self, client: T) -> (&AtomicU64, u64) {
        let h = self.hasher.hash_one(client);
        let tag = (h >> 48) | 1;
        (&self.slots[(h as usize) & (self.slots.len() - 1)], tag)
    }

    /// `(tag, owed)` of a slot value still inside the horizon at tick `now`.
    fn live(&self, v: u64, now: u64) -> Option<(u64, u64)> {
        let t = (v & 0xFFFF_FFFF).checked_sub(1)?;
        (now.saturating_sub(t) <= self.horizon_ticks).then_some((v >> 48, (v >> 32) & 0xFFFF))
    }

    fn update(&self, slot: &AtomicU64, f: impl Fn(u64) -> Option<u64>) -> bool {
        slot.fetch_update(Ordering::Relaxed, Ordering::Relaxed, f)
            .is_ok()
    }

    /// The gate answered `client` with a 429, a 5xx or a timeout at `now_ms`.
    pub fn failed(&self, client: IpAddr, now_ms: u64) {
        let (slot, tag) = self.locate(client);
        let now = now_ms / TICK_MS;
        let stamp = (now & 0xFFFF_FFFF) + 1;
        self.update(slot, |v| {
            let owed = match self.live(v, now) {
                Some((t, owed)) if t == tag => (owed + 1).min(0xFFFF),
                _ => 1,
            };
            Some((tag << 48) | (owed << 32) | stamp)
        });
    }

    /// True when `client` is owed a retry (a failure within the horizon not yet matched):
    /// this request is taken to be that retry.
    pub fn take_retry(&self, client: IpAddr, now_ms: u64) -> bool {
        let (slot, tag) = self.locate(client);
        let now = now_ms / TICK_MS;
        self.update(slot, |v| match self.live(v, now) {
            Some((t, owed)) if t == tag && owed > 0 => Some(v - (1 << 32)),
            _ => None,
        })
    }
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
    ) -> (Method, Kind) {
        if let Some(m) = marked(&header) {
            return m;
        }
        let key = header("idempotency-key").or_else(|| header("x-request-id"));
        if let Some(k) = key.filter(|k| !k.is_empty()) {
            let kind = if self.keys.seen(k, self.now_ms()) {
                Kind::Retry
            } else {
                Kind::First
            };
            return (Method::RequestKey, kind);
        }
        let retry = client.is_some_and(|c| self.clients.take_retry(c, self.now_ms()));
        let kind = if retry { Kind::Retry } else { Kind::First };
        (Method::ClientAddress, kind)
    }

    /// The gate gave `client` a 429, a 5xx or a timeout.
    pub fn failed(&self, client: Option<IpAddr>) {
        if let Some(c) = client {
            self.clients.failed(c, self.now_ms());
        }
    }
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
    fn a_key_seen_within_the_window_is_a_retry() {
        let keys = RecentKeys::new(64, Duration::from_secs(30));
        assert!(!keys.seen(b"poll-1", 1_000));
        assert!(keys.seen(b"poll-1", 3_000));
        assert!(!keys.seen(b"poll-2", 3_000));
        // Seen again after the window: a new request with a reused key.
        assert!(!keys.seen(b"poll-1", 3_000 + 30_001));
    }

    #[test]
    fn memory_stays_flat_and_false_retries_stay_rare_under_a_flood_of_keys() {
        let keys = RecentKeys::new(KEY_SLOTS, KEY_WINDOW);
        let mut false_retries = 0;
        let n = 1_000_000u64;
        for i in 0..n {
            // A million distinct keys within one second: the table is far too small to
            // hold them, and must neither grow nor call them retries.
            if keys.seen(&i.to_le_bytes(), i / 1000) {
                false_retries += 1;
            }
        }
        assert_eq!(keys.slots.len(), KEY_SLOTS);
        assert!(
            false_retries < n / 10_000,
            "{false_retries} false retries in {n}"
        );
    }

    #[test]
    fn each_failure_predicts_one_retry_from_that_client_within_the_horizon() {
        let c = FailedClients::new(64, Duration::from_secs(10));
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        assert!(!c.take_retry(a, 0));
        c.failed(a, 100);
        c.failed(a, 200);
        assert!(!c.take_retry(b, 300));
        assert!(c.take_retry(a, 1_200));
        assert!(c.take_retry(a, 1_300));
        assert!(!c.take_retry(a, 1_400), "two failures, two retries");
        c.failed(a, 2_000);
        assert!(!c.take_retry(a, 2_000 + 10_100), "past the horizon");
    }

    #[test]
    fn markers_then_keys_then_the_client_address() {
        let a = Attempts::default();
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let plain = headers(&[]);
        assert_eq!(
            a.classify(&plain, Some(ip)),
            (Method::ClientAddress, Kind::First)
        );
        a.failed(Some(ip));
        assert_eq!(
            a.classify(&plain, Some(ip)),
            (Method::ClientAddress, Kind::Retry)
        );
        assert_eq!(
            a.classify(&plain, Some(ip)),
            (Method::ClientAddress, Kind::First)
        );
        let keyed = headers(&[("Idempotency-Key", "k1")]);
        assert_eq!(
            a.classify(&keyed, Some(ip)),
            (Method::RequestKey, Kind::First)
        );
        assert_eq!(
            a.classify(&keyed, Some(ip)),
            (Method::RequestKey, Kind::Retry)
        );
        let both = headers(&[("x-request-id", "k1"), ("x-attempt", "1")]);
        assert_eq!(a.classify(&both, Some(ip)), (Method::XAttempt, Kind::First));
        assert_eq!(
            client_of(Some(b"203.0.113.9, 10.0.0.1"), Some(ip)),
            Some("203.0.113.9".parse().unwrap())
        );
        assert_eq!(client_of(Some(b"unknown"), Some(ip)), Some(ip));
    }
}
