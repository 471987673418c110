//! The clients' retry loop in the lower bound: which clients no procedure can answer
//! before they send again, and when they send. Its own module beside
//! [`super::bound`], whose paths take the floor it gives, so that the bound's fluid model
//! and this count of clients read apart (the derivation is in docs/design/arithmetic.md,
//! "The clients' retry delay").

use super::scenario::Scenario;

/// What the rehearsal knows of its clients' retry loop at the scrape before the runbook's
/// start: enough to find the clients no procedure can answer before they send again.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryLoop {
    /// The least wait between a failed attempt and the next (a fixed delay; the base of an
    /// exponential backoff without jitter), seconds.
    pub retry_delay_s: f64,
    /// The clients' timeout per attempt, seconds.
    pub client_timeout_s: f64,
    /// How long before the runbook's start the state was scraped, seconds.
    pub scraped_before_s: f64,
    /// Clients in the loop with an attempt in flight at the scrape.
    pub in_flight: f64,
    /// Replicas serving.
    pub replicas: u32,
    /// Requests a replica works on at once.
    pub concurrency: u32,
    /// A request's healthy (warm, not overloaded) service time, seconds: the least any
    /// request costs.
    pub service_time_s: f64,
    /// Where each client of the loop stood at the scrape, where the workers export it.
    pub phases: Option<ClientPhases>,
}

/// Where each client in the retry loop stood at a scrape, as the demo workers export it:
/// enough to tell when each can first be answered.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClientPhases {
    /// Clients waiting out a retry delay, by the time from the scrape to their next attempt.
    pub waiting_next: Ladder,
    /// Clients with an attempt out, by the time left from the scrape until they give up on it.
    pub in_flight_left: Ladder,
}

/// A cumulative count over a ladder of durations, as a Prometheus histogram's buckets read:
/// for each edge `le_s` (increasing), how many items last at most `le_s`; `total` counts
/// every item, those past the last edge too.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Ladder {
    /// `(le_s, count)` pairs, `le_s` increasing, counts not falling.
    pub edges: Vec<(f64, f64)>,
    pub total: f64,
}

impl RetryLoop {
    /// Clients in the loop no procedure can answer before `retry_delay - scraped_before`
    /// after the runbook's start (0 when that cannot be shown): the clients in flight at
    /// the scrape beyond the most any procedure answers before they give up
    /// ([`RetryLoop::answerable_in_time`]). Each of the others fails after the scrape
    /// (dropped, turned away, or timed out) and sends again at least a retry delay after
    /// the scrape.
    pub fn held_back(&self) -> f64 {
        if self.replicas == 0 || self.service_time_s <= 0.0 || self.retry_delay_s <= 0.0 {
            return 0.0;
        }
        (self.in_flight - self.answerable_in_time()).max(0.0)
    }

    /// The most clients in flight at the scrape that any procedure (serve the queues FIFO,
    /// drop any part of them at any instant, restart, turn clients away) answers before
    /// their clients give up, wherever their requests sit. A live request was sent before
    /// the scrape, so its client gives up within the timeout `T` of it, and it is answered
    /// after the scrape (it was still out). One server answers one request at a time, each
    /// started no sooner than the previous one's answer and costing at least the healthy
    /// service time `s` (cold caches and overload only add): its answers in `(0, T]` are
    /// `s` apart at least, so there are at most `ceil(T / s)` of them (the first may be a
    /// request already in service at the scrape). `replicas x concurrency` servers answer
    /// at most that many each, however the live requests are split between the replicas.
    /// (`T / s` is a ratio of two durations in nanoseconds: unless it is a whole number it
    /// is a nanosecond's share of `s` away from one, far beyond the division's rounding,
    /// so `ceil` never undercounts.)
    pub fn answerable_in_time(&self) -> f64 {
        let servers = f64::from(self.replicas) * f64::from(self.concurrency.max(1));
        servers * (self.client_timeout_s.max(0.0) / self.service_time_s).ceil()
    }

    /// From the runbook's start, when the held-back clients can first be answered.
    pub(super) fn back_at_s(&self) -> f64 {
        self.retry_delay_s - self.scraped_before_s.max(0.0)
    }
}

/// The scenario's clients' retry loop as scraped `scraped_before_s` before the runbook:
/// the clients in the loop with an attempt out. `None` where the clients' policy sets no
/// least wait (full jitter may retry at once) or nothing was measured.
pub fn retry_loop_of(
    sc: &Scenario,
    scraped_before_s: f64,
    in_flight: Option<f64>,
) -> Option<RetryLoop> {
    use crate::retry::{RetryKind, RetryPolicy};
    let policy: RetryPolicy = sc.workers.retry.parse().ok()?;
    let retry_delay_s = match policy.kind {
        RetryKind::Fixed | RetryKind::Exponential => policy.base.as_secs_f64(),
        RetryKind::FullJitter => return None,
    };
    Some(RetryLoop {
        retry_delay_s,
        client_timeout_s: sc.workers.timeout.as_secs_f64(),
        scraped_before_s,
        in_flight: in_flight?,
        replicas: sc.replicas,
        concurrency: sc.service.concurrency,
        service_time_s: sc.service.service_time.as_secs_f64(),
        phases: None,
    })
}
