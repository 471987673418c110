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
    /// Requests queued at each replica at the scrape (FIFO, not yet started).
    pub queued: Vec<f64>,
    /// Requests a replica works on at once.
    pub concurrency: u32,
    /// A request's healthy (warm, not overloaded) service time, seconds.
    pub service_time_s: f64,
    /// What overload multiplies a request's cost by (k >= 1), while a replica queues more
    /// than it answers within the client timeout.
    pub overload_factor: f64,
}

impl RetryLoop {
    /// Clients in the loop no procedure can answer before `retry_delay - scraped_before`
    /// after the runbook's start (0 when that cannot be shown).
    ///
    /// A live request (its client still waiting) was sent within the client timeout, so in
    /// a replica's FIFO queue every abandoned one is ahead of it. It is answered only if the
    /// replica starts it before its client gives up, within the timeout of the scrape (a
    /// drain or a restart drops it; nothing else reorders the queue). While a replica
    /// queues more than `capacity x client_timeout` (its warm capacity: a colder one has a
    /// lower threshold) each start costs at least `k x service_time`, and at least
    /// `service_time` otherwise; so within the timeout it starts at most
    /// [`RetryLoop::starts_in_time`] requests, and only the live ones among the first that
    /// many are within reach: at most `min(starts, max(0, starts - (queued - in_flight)))`
    /// on each replica, since the live ones (at most `in_flight` of them) are at the back.
    /// Of the clients in flight, also at most `replicas x concurrency` are being worked on.
    /// Every other one fails after the scrape and sends again at least a retry delay later.
    pub fn held_back(&self) -> f64 {
        let c = f64::from(self.concurrency.max(1));
        if self.queued.is_empty() || self.service_time_s <= 0.0 || self.retry_delay_s <= 0.0 {
            return 0.0;
        }
        let reachable: f64 = self
            .queued
            .iter()
            .map(|&q| {
                let starts = self.starts_in_time(q).min(q.max(0.0));
                starts.min((starts - (q - self.in_flight)).max(0.0))
            })
            .sum();
        (self.in_flight - self.queued.len() as f64 * c - reachable).max(0.0)
    }

    /// The most requests a replica queueing `queued` at the scrape can start within the
    /// client timeout `T` of it, whatever the procedure. Its first `o = ceil(queued - C T)
    /// - 1` starts are overloaded (the depth after the `j`-th is at least `queued - j`),
    /// each costing at least `k s`; later ones at least `s` (`C = c / s`). By `T` all but
    /// the `c` last started have completed, and `c` servers complete at most `c T` of
    /// work: so at most `c (1 + T / (k s))` starts while every one is overloaded, and past
    /// the overloaded ones at most `o + c + C T`.
    fn starts_in_time(&self, queued: f64) -> f64 {
        let c = f64::from(self.concurrency.max(1));
        let (s, k, to) = (
            self.service_time_s,
            self.overload_factor.max(1.0),
            self.client_timeout_s.max(0.0),
        );
        let capacity = c / s;
        let overloaded = ((queued - capacity * to).ceil() - 1.0).max(0.0);
        let all_overloaded = c * (1.0 + to / (k * s));
        if overloaded >= all_overloaded {
            all_overloaded
        } else {
            overloaded + c + capacity * to
        }
    }

    /// From the runbook's start, when the held-back clients can first be answered.
    pub(super) fn back_at_s(&self) -> f64 {
        self.retry_delay_s - self.scraped_before_s.max(0.0)
    }
}

/// The scenario's clients' retry loop as scraped `scraped_before_s` before the runbook:
/// clients in the loop with an attempt out, and each replica's queue. `None` where the
/// clients' policy sets no least wait (full jitter may retry at once) or nothing was
/// measured.
pub fn retry_loop_of(
    sc: &Scenario,
    scraped_before_s: f64,
    in_flight: Option<f64>,
    queued: Vec<f64>,
) -> Option<RetryLoop> {
    use crate::retry::{RetryKind, RetryPolicy};
    let policy: RetryPolicy = sc.workers.retry.parse().ok()?;
    let retry_delay_s = match policy.kind {
        RetryKind::Fixed | RetryKind::Exponential => policy.base.as_secs_f64(),
        RetryKind::FullJitter => return None,
    };
    (!queued.is_empty() && queued.len() == sc.replicas as usize).then_some(())?;
    Some(RetryLoop {
        retry_delay_s,
        client_timeout_s: sc.workers.timeout.as_secs_f64(),
        scraped_before_s,
        in_flight: in_flight?,
        queued,
        concurrency: sc.service.concurrency,
        service_time_s: sc.service.service_time.as_secs_f64(),
        overload_factor: sc.service.overload_factor,
    })
}
