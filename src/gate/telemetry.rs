//! The gate's `/metrics`, with the names and labels in docs/reference/metrics.md: the
//! engine, the detector and the rehearsal scrape these, so a rename breaks them.
//!
//! Every labelled child is resolved once at start and kept as a handle, so the hot path
//! touches one atomic per counter instead of a labelled family's lock and hash map.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::exponential_buckets;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

use super::admission::Refused;
use super::balance::policy::BalancePolicy;
use super::latency::LatencyHistogram;
use super::limit::Limit;
use super::resend::{Refusal, RESENT_REASON};
use super::share::Peers;
use crate::util::exposition::{encode_text, register, register_family};

type Labels = [(&'static str, &'static str); 1];
type InfoLabels = [(&'static str, String); 1];
type BalancerLabels = [(&'static str, String); 2];
type F64Gauge = Gauge<f64, AtomicU64>;

/// One replica's series, labelled `replica="host:port"`.
pub struct ReplicaMetrics {
    /// 1 while ejected as a latency outlier.
    pub ejected: Gauge,
    pub ejections: Counter,
    /// Share of its normal traffic: 0 ejected, ramping back to 1 after.
    pub weight: F64Gauge,
    /// The outlier statistic (mean or p99) over its last window with requests.
    pub window_latency: F64Gauge,
}

/// Why the gate closed a client connection on one of its limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// A new connection sent nothing before `--first-byte-timeout`.
    NoFirstByte = 0,
    /// A request head did not arrive whole in time (answered 408).
    HeadTimeout = 1,
    /// It waited with no request begun and a new connection needed its slot.
    MadeRoom = 2,
}

const CLOSED: [&str; 3] = ["no_first_byte", "head_timeout", "made_room"];

/// What happened to one request; exactly one per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestOutcome {
    Admitted,
    RejectedRate,
    RejectedInFlight,
    UpstreamError,
    UpstreamTimeout,
    /// Admitted, but the client hung up before the upstream answered: in a stuck
    /// overload this is most requests, so it must be counted or arrivals read near zero.
    ClientGone,
}

/// The gate's decision on one request, counted when it is made (outcomes are counted when
/// the request ends, seconds later for work that queued): admitted plus rejected is what
/// arrived in the same window, and admissions stop the moment the gate closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Admitted = 0,
    RejectedRate = 1,
    RejectedInFlight = 2,
}

const DECISIONS: [&str; 3] = ["admitted", "rejected_rate", "rejected_in_flight"];

pub struct GateMetrics {
    registry: Registry,
    outcomes: [Counter; 6],
    decisions: [Counter; 3],
    classes: [Counter; 5],
    /// First attempts and retries, by the method that told them apart.
    pub attempts: super::attempts::AttemptCounters,
    pub in_flight: Gauge,
    limit_rate: Gauge<f64, AtomicU64>,
    limit_burst: Gauge<f64, AtomicU64>,
    limit_max_in_flight: Gauge<f64, AtomicU64>,
    limit_review_deadline: Gauge<f64, AtomicU64>,
    limit_info: Family<InfoLabels, Gauge>,
    limit_peers: Gauge,
    limit_age: Gauge<f64, AtomicU64>,
    peers_age: Gauge<f64, AtomicU64>,
    /// 1 while the limit is in shadow: decided and counted, nothing refused.
    shadow: Gauge,
    shadow_rate: F64Gauge,
    shadow_max_in_flight: F64Gauge,
    /// Requests the limit in shadow would have refused, by [`Refused`].
    shadow_refusals: [Counter; 2],
    /// Requests the limit in shadow would have held in flight (admission counts them).
    pub shadow_in_flight: Gauge,
    upstream_latency: LatencyHistogram,
    upstream_ejected: Family<InfoLabels, Gauge>,
    upstream_ejections: Family<InfoLabels, Counter>,
    upstream_weight: Family<InfoLabels, F64Gauge>,
    upstream_window_latency: Family<InfoLabels, F64Gauge>,
    balancer_info: Family<BalancerLabels, Gauge>,
    admin_refusals: Family<BalancerLabels, Counter>,
    /// Client connections refused at once over a connection cap: `max_connections`,
    /// then `max_connections_per_address`.
    connections_refused: [Counter; 2],
    accept_errors: Counter,
    /// Client connections open on each proxy worker thread, by `worker`.
    worker_connections: Family<InfoLabels, Gauge>,
    /// Requests sent again on a new upstream connection, and those that were not.
    resends: Counter,
    resend_refusals: [Counter; 3],
    /// State files that could not be applied at start (set aside; the flags started).
    state_file_rejected: Counter,
    connections_closed: [Counter; 3],
}

const OUTCOMES: [&str; 6] = [
    "admitted",
    "rejected_rate",
    "rejected_in_flight",
    "upstream_error",
    "upstream_timeout",
    "client_gone",
];
/// Status classes, and `error`: a response the upstream cut short mid-body (the client got
/// a broken answer, whatever its status line said).
const CLASSES: [&str; 5] = ["2xx", "3xx", "4xx", "5xx", "error"];
const CUT_SHORT: usize = 4;
/// The connection caps, in the order of [`super::limits::Refused`].
const CAPS: [&str; 2] = ["max_connections", "max_connections_per_address"];

impl Default for GateMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl GateMetrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let r = &mut registry;
        let requests: Family<Labels, Counter> = register_family(
            r,
            "recover_gate_requests",
            "Requests by outcome, exactly one per request",
            OUTCOMES.map(|o| [("outcome", o)]),
        );
        let responses: Family<Labels, Counter> = register_family(
            r,
            "recover_gate_upstream_responses",
            "Upstream responses by status class",
            CLASSES.map(|c| [("class", c)]),
        );
        let admissions: Family<Labels, Counter> = register_family(
            r,
            "recover_gate_admissions",
            "The gate's decision on each request, counted when it is made",
            DECISIONS.map(|d| [("decision", d)]),
        );
        let decisions = DECISIONS.map(|d| admissions.get_or_create(&[("decision", d)]).clone());
        let attempts = super::attempts::AttemptCounters::register(r);
        let outcomes = OUTCOMES.map(|o| requests.get_or_create(&[("outcome", o)]).clone());
        let classes = CLASSES.map(|c| responses.get_or_create(&[("class", c)]).clone());
        let refused: Family<Labels, Counter> = register_family(
            r,
            "recover_gate_connections_refused",
            "Client connections refused at once (a 503, then closed) over a connection cap",
            CAPS.map(|c| [("cap", c)]),
        );
        let connections_refused = CAPS.map(|c| refused.get_or_create(&[("cap", c)]).clone());
        let resends: Family<Labels, Counter> = register_family(
            r,
            "recover_gate_upstream_resends",
            "Requests sent again on a new upstream connection (each passed admission again)",
            [[("reason", RESENT_REASON)]],
        );
        let resend_refusals: Family<Labels, Counter> = register_family(
            r,
            "recover_gate_upstream_resends_refused",
            "Requests a reused upstream connection failed that were not sent again, by reason",
            Refusal::ALL.map(|w| [("reason", w.label())]),
        );
        let resends = resends.get_or_create(&[("reason", RESENT_REASON)]).clone();
        let closed: Family<Labels, Counter> = register_family(
            r,
            "recover_gate_connections_closed",
            "Client connections the gate closed on a limit: no first byte in time, a request head late (408), or waiting idle when a new connection needed the slot",
            CLOSED.map(|c| [("reason", c)]),
        );
        let connections_closed = CLOSED.map(|c| closed.get_or_create(&[("reason", c)]).clone());
        let resend_refusals = Refusal::ALL.map(|w| {
            resend_refusals
                .get_or_create(&[("reason", w.label())])
                .clone()
        });
        let shadow_refusals: Family<Labels, Counter> = register_family(
            r,
            "recover_gate_shadow_refusals",
            "Requests the limit in shadow would have refused (and admitted), by reason: rate or in_flight",
            Refused::ALL.map(|w| [("reason", w.label())]),
        );
        let shadow_refusals = Refused::ALL.map(|w| {
            shadow_refusals
                .get_or_create(&[("reason", w.label())])
                .clone()
        });
        let gauge = Gauge::<f64, AtomicU64>::default;
        GateMetrics {
            shadow_refusals,
            shadow: register(
                r,
                "recover_gate_shadow",
                "1 while the limit is in shadow: every request decided by it and counted, none refused; the recover_gate_limit_* gauges then read +Inf (nothing enforced)",
                Gauge::default(),
            ),
            shadow_rate: register(
                r,
                "recover_gate_shadow_rate_per_second",
                "This replica's share of the rate limit in shadow (+Inf: none, or not in shadow)",
                gauge(),
            ),
            shadow_max_in_flight: register(
                r,
                "recover_gate_shadow_max_in_flight",
                "This replica's share of the in-flight cap in shadow (+Inf: none, or not in shadow)",
                gauge(),
            ),
            shadow_in_flight: register(
                r,
                "recover_gate_shadow_in_flight",
                "Requests the limit in shadow would have admitted and not yet answered: the concurrency it would have held (0 when not in shadow)",
                Gauge::default(),
            ),
            connections_closed,
            resends,
            resend_refusals,
            state_file_rejected: register(
                r,
                "recover_gate_state_file_rejected",
                "State files that could not be applied at start: moved aside, the gate started at the limit of its flags",
                Counter::default(),
            ),
            connections_refused,
            accept_errors: register(
                r,
                "recover_gate_accept_errors",
                "Failed accepts on the proxy listener (out of file descriptors and the like)",
                Counter::default(),
            ),
            worker_connections: register(
                r,
                "recover_gate_worker_connections",
                "Client connections open on each proxy worker thread",
                Family::default(),
            ),
            outcomes,
            decisions,
            classes,
            attempts,
            in_flight: register(
                r,
                "recover_gate_in_flight",
                "Requests admitted and not yet answered by the upstream",
                Gauge::default(),
            ),
            limit_rate: register(
                r,
                "recover_gate_limit_rate_per_second",
                "This replica's share of the admitted rate limit (+Inf: unlimited)",
                gauge(),
            ),
            limit_burst: register(
                r,
                "recover_gate_limit_burst",
                "This replica's share of the burst above the rate (+Inf: no rate limit)",
                gauge(),
            ),
            limit_max_in_flight: register(
                r,
                "recover_gate_limit_max_in_flight",
                "This replica's share of the in-flight cap (+Inf: unlimited)",
                gauge(),
            ),
            limit_review_deadline: register(
                r,
                "recover_gate_limit_review_deadline_timestamp_seconds",
                "When a human must have reviewed the limit in force, from its note's \"review by\" (+Inf: no limit, or no deadline)",
                gauge(),
            ),
            limit_info: register(
                r,
                "recover_gate_limit_applied_info",
                "Version of the limit in force",
                Family::default(),
            ),
            limit_peers: register(
                r,
                "recover_gate_limit_peers",
                "Gate replicas sharing the limit (this one included); the limit gauges show this replica's share",
                Gauge::default(),
            ),
            limit_age: register(
                r,
                "recover_gate_limit_age_seconds",
                "Seconds since the limit source last gave or confirmed the limit in force (+Inf: no limit known, all traffic refused)",
                gauge(),
            ),
            peers_age: register(
                r,
                "recover_gate_limit_peers_age_seconds",
                "Seconds since the peer source last reported the replicas sharing the limit (+Inf: never; 0 without a peer source)",
                gauge(),
            ),
            upstream_latency: register(
                r,
                "recover_gate_upstream_latency_seconds",
                "Time from forwarding to the upstream's response head",
                LatencyHistogram::new(exponential_buckets(0.0005, 2.0, 16)),
            ),
            upstream_ejected: register(
                r,
                "recover_gate_upstream_ejected",
                "1 while the replica is ejected as a latency outlier",
                Family::default(),
            ),
            upstream_ejections: register(
                r,
                "recover_gate_upstream_ejections",
                "Times the replica was ejected as a latency outlier",
                Family::default(),
            ),
            upstream_weight: register(
                r,
                "recover_gate_upstream_weight",
                "Share of its normal traffic the replica gets: 0 ejected, ramping back to 1",
                Family::default(),
            ),
            upstream_window_latency: register(
                r,
                "recover_gate_upstream_window_latency_seconds",
                "The outlier statistic (mean or p99) over the replica's last window",
                Family::default(),
            ),
            balancer_info: register(
                r,
                "recover_gate_balancer_info",
                "The balancing policy in use and whether outlier ejection is on",
                Family::default(),
            ),
            admin_refusals: register(
                r,
                "recover_gate_admin_refusals",
                "Admin listener requests refused (4xx and 5xx answers), by route and status",
                Family::default(),
            ),
            registry,
        }
    }

    /// One client connection refused over a cap.
    pub fn connection_refused(&self, why: super::limits::Refused) {
        let i = match why {
            super::limits::Refused::Total => 0,
            super::limits::Refused::PerAddress => 1,
        };
        self.connections_refused[i].inc();
    }

    /// One client connection closed on a limit.
    pub fn connection_closed(&self, why: Closed) {
        self.connections_closed[why as usize].inc();
    }

    /// One request sent again on a new upstream connection.
    pub fn resent(&self) {
        self.resends.inc();
    }

    /// One request a reused upstream connection failed, not sent again.
    pub fn resend_refused(&self, why: Refusal) {
        self.resend_refusals[why as usize].inc();
    }

    /// The state file could not be applied at start.
    pub fn state_file_rejected(&self) {
        self.state_file_rejected.inc();
    }

    /// One failed accept on the proxy listener.
    pub fn accept_error(&self) {
        self.accept_errors.inc();
    }

    /// One refusal on the admin listener (`route` is a route template or `unmatched`).
    pub fn admin_refusal(&self, route: &str, status: u16) {
        self.admin_refusals
            .get_or_create(&[("route", route.to_string()), ("status", status.to_string())])
            .inc();
    }

    /// The open client connections of proxy worker `worker`, shown from the first scrape.
    pub fn worker_connections(&self, worker: usize) -> Gauge {
        let l = [("worker", worker.to_string())];
        self.worker_connections.get_or_create(&l).clone()
    }

    /// The series of one replica, created now so that they read 0 (weight 1) from start.
    pub fn replica(&self, replica: &str) -> ReplicaMetrics {
        let l = [("replica", replica.to_string())];
        let weight = self.upstream_weight.get_or_create(&l).clone();
        weight.set(1.0);
        ReplicaMetrics {
            ejected: self.upstream_ejected.get_or_create(&l).clone(),
            ejections: self.upstream_ejections.get_or_create(&l).clone(),
            weight,
            window_latency: self.upstream_window_latency.get_or_create(&l).clone(),
        }
    }

    /// Show the balancer in use (the only child of the info family).
    pub fn balancer(&self, policy: BalancePolicy, outlier_ejection: bool) {
        self.balancer_info.clear();
        let on = if outlier_ejection { "on" } else { "off" };
        self.balancer_info
            .get_or_create(&[
                ("balancer", policy.name().to_string()),
                ("outlier_ejection", on.to_string()),
            ])
            .set(1);
    }

    /// One request the limit in shadow would have refused.
    pub fn shadow_refusal(&self, why: Refused) {
        self.shadow_refusals[why as usize].inc();
    }

    pub fn outcome(&self, o: RequestOutcome) {
        self.outcomes[o as usize].inc();
    }

    pub fn decided(&self, d: Decision) {
        self.decisions[d as usize].inc();
    }

    pub fn upstream_response(&self, status: u16, seconds: f64) {
        self.upstream_latency.observe(seconds);
        if let Some(c) = (status / 100)
            .checked_sub(2)
            .filter(|&i| usize::from(i) < CUT_SHORT)
            .and_then(|i| self.classes.get(usize::from(i)))
        {
            c.inc();
        }
    }

    /// A response whose body the upstream cut short: counted as class `error`, not by its
    /// status line, so goodput does not count broken answers.
    pub fn upstream_cut_short(&self, seconds: f64) {
        self.upstream_latency.observe(seconds);
        self.classes[CUT_SHORT].inc();
    }

    /// Show this replica's share of the limit, the version, and how many replicas share
    /// it (the version is the only child of the info family). A limit in shadow shows in
    /// the shadow gauges; the limit gauges then show nothing enforced.
    pub fn limit_applied(&self, limit: &Limit, version: &str, peers: Peers) {
        self.limit_peers.set(peers.count as i64);
        let inf = f64::INFINITY;
        self.shadow.set(i64::from(limit.shadow));
        let watched = limit.shadow.then_some(limit);
        self.shadow_rate
            .set(watched.and_then(|l| l.rate_per_s).unwrap_or(inf));
        self.shadow_max_in_flight
            .set(watched.and_then(|l| l.max_in_flight).map_or(inf, f64::from));
        let unlimited = Limit::unlimited();
        let limit = if limit.shadow { &unlimited } else { limit };
        let rate = limit.rate_per_s.unwrap_or(inf);
        self.limit_rate.set(rate);
        self.limit_burst.set(if limit.rate_per_s.is_some() {
            f64::from(limit.burst)
        } else {
            inf
        });
        self.limit_max_in_flight
            .set(limit.max_in_flight.map_or(inf, f64::from));
        let review_by = limit
            .review_by()
            .filter(|_| limit.restricts())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        self.limit_review_deadline
            .set(review_by.map_or(inf, |d| d.as_secs_f64()));
        self.limit_info.clear();
        self.limit_info
            .get_or_create(&[("version", version.to_string())])
            .set(1);
    }

    /// How old the limit and the peer count are (`None`: never known), set before each
    /// render.
    pub fn set_ages(&self, limit: Option<std::time::Duration>, peers: Option<std::time::Duration>) {
        let secs = |d: Option<std::time::Duration>| d.map_or(f64::INFINITY, |d| d.as_secs_f64());
        self.limit_age.set(secs(limit));
        self.peers_age.set(secs(peers));
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = encode_text(&self.registry);
        // prometheus-client prints Rust's "inf"; the exposition format spells it "+Inf".
        if out.contains(" inf\n") {
            out = out.replace(" inf\n", " +Inf\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_contract_names() {
        let m = GateMetrics::new();
        m.outcome(RequestOutcome::RejectedRate);
        use super::super::attempts::{Kind, Method};
        m.attempts.count(Method::XAttempt, Kind::Retry);
        m.attempts.count(Method::ClientAddress, Kind::First);
        m.upstream_response(503, 0.01);
        m.limit_applied(&Limit::unlimited(), "7", Peers::new(3, 1));
        let text = m.render();
        for needle in [
            "recover_gate_requests_total{outcome=\"rejected_rate\"} 1",
            "recover_gate_requests_total{outcome=\"admitted\"} 0",
            "recover_gate_attempts_total{kind=\"retry\",method=\"x-attempt\"} 1",
            "recover_gate_attempts_total{kind=\"first\",method=\"client-address\"} 1",
            "recover_gate_upstream_responses_total{class=\"5xx\"} 1",
            "recover_gate_in_flight 0",
            "recover_gate_limit_rate_per_second +Inf",
            "recover_gate_limit_review_deadline_timestamp_seconds +Inf",
            "recover_gate_limit_applied_info{version=\"7\"} 1",
            "recover_gate_limit_peers 3",
            "recover_gate_upstream_latency_seconds_count 1",
            "recover_gate_upstream_resends_total{reason=\"closed_before_write\"} 0",
            "recover_gate_upstream_resends_refused_total{reason=\"not_idempotent\"} 0",
            "recover_gate_shadow 0",
            "recover_gate_shadow_refusals_total{reason=\"rate\"} 0",
            "recover_gate_shadow_refusals_total{reason=\"in_flight\"} 0",
            "recover_gate_shadow_in_flight 0",
            "recover_gate_shadow_rate_per_second +Inf",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }

    #[test]
    fn a_limit_in_shadow_shows_in_the_shadow_gauges_and_enforces_nothing() {
        let m = GateMetrics::new();
        let watched = Limit {
            rate_per_s: Some(30.0),
            burst: 15,
            max_in_flight: Some(8),
            note: Some("review by 2030-01-01T00:00:00Z".into()),
            shadow: true,
        };
        m.limit_applied(&watched, "3", Peers::ALONE);
        m.shadow_refusal(Refused::Rate);
        let text = m.render();
        for needle in [
            "recover_gate_shadow 1",
            "recover_gate_shadow_rate_per_second 30.0",
            "recover_gate_shadow_max_in_flight 8.0",
            "recover_gate_shadow_refusals_total{reason=\"rate\"} 1",
            "recover_gate_limit_rate_per_second +Inf",
            "recover_gate_limit_max_in_flight +Inf",
            "recover_gate_limit_review_deadline_timestamp_seconds +Inf",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }
}
