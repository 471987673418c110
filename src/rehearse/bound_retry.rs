//! The clients' retry loop in the lower bound: when each client of the loop can first be
//! answered (the attempts out no procedure answers in time send again a retry delay after
//! the scrape; a client waiting out its delay sends no sooner than the workers' ladder
//! says), as release steps. Its own module beside [`super::bound`], whose paths take the
//! steps it gives, so that the bound's fluid model and this count of clients read apart
//! (the derivation is in docs/design/arithmetic.md, "The clients' retry delay").

use super::report::ReleaseStep;
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

/// A step of the loop's release: no work for its `released` clients can start before
/// `at_s` (from the paths' origin), before which at most `before` clients of the loop can
/// have been answered, however much the service serves; and a path that needs a client
/// released here or later is done no sooner than `done_from_s`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Release {
    pub(super) at_s: f64,
    pub(super) before: f64,
    pub(super) released: f64,
    pub(super) done_from_s: f64,
}

impl RetryLoop {
    /// Clients in the loop no procedure can answer before `retry_delay - scraped_before`
    /// after the paths' origin (0 when that cannot be shown): the clients with an attempt
    /// out at the scrape beyond the most any procedure answers before they give up
    /// ([`RetryLoop::answerable_in_time`]). Each of the others fails after the scrape
    /// (dropped, turned away, or timed out) and sends again at least a retry delay after
    /// the scrape.
    pub fn held_back(&self) -> f64 {
        if self.replicas == 0 || self.service_time_s <= 0.0 || self.retry_delay_s <= 0.0 {
            return 0.0;
        }
        (self.attempts_out() - self.answerable_in_time()).max(0.0)
    }

    /// Clients in the loop with an attempt out at the scrape: the phases' count where
    /// measured.
    fn attempts_out(&self) -> f64 {
        match &self.phases {
            Some(p) => p.in_flight_left.total,
            None => self.in_flight,
        }
    }

    /// The most clients with an attempt out at the scrape that any procedure (serve the
    /// queues FIFO, drop any part of them at any instant, restart, turn clients away)
    /// answers before their clients give up, wherever their requests sit. A live request
    /// was sent before the scrape, so its client gives up within the timeout `T` of it
    /// (sooner where the phases say so: within its bucket's upper edge), and it is answered
    /// after the scrape (it was still out). One server answers one request at a time, each
    /// started no sooner than the previous one's answer and costing at least the healthy
    /// service time `s` (cold caches and overload only add): its answers are `s` apart at
    /// least, the first possibly right after the scrape (a request already in service), so
    /// it gives at most `ceil(D / s)` answers before `D`. Over `replicas x concurrency`
    /// servers pooled (the live requests' split between the replicas is not measured),
    /// answers before `D` number at most `servers x ceil(D / s)`, and the most deadlines
    /// met is found earliest deadline first: unit jobs on identical servers whose answer
    /// slots before `D` form a prefix, so taking each deadline in turn into the earliest
    /// free slot before it misses none a better order would meet. Without phases every
    /// deadline is `T`: `servers x ceil(T / s)`. Not `platform::admin::answerable`: that
    /// decides which youngest FIFO suffix one replica keeps from its servers' free times,
    /// none free before the drain; the bound needs the most any procedure answers over
    /// every server, the first answer right after the scrape. (`D / s` is a ratio of a ladder edge or a
    /// timeout to a whole number of nanoseconds: unless it is a whole number it is a
    /// nanosecond's share of `s` away from one, far beyond the division's rounding, so
    /// `ceil` never undercounts.)
    pub fn answerable_in_time(&self) -> f64 {
        let servers = f64::from(self.replicas) * f64::from(self.concurrency.max(1));
        let timeout = self.client_timeout_s.max(0.0);
        let slots = |d: f64| servers * (d.min(timeout) / self.service_time_s).ceil();
        let Some(p) = &self.phases else {
            return slots(timeout);
        };
        let mut used = 0.0;
        for (le, n) in p.in_flight_left.buckets() {
            used += n.min((slots(le) - used).max(0.0));
        }
        used
    }

    /// From the paths' origin, when the held-back clients can first be answered.
    pub(super) fn back_at_s(&self) -> f64 {
        self.retry_delay_s - self.scraped_before_s.max(0.0)
    }

    /// The steps of the release that bind a path owing `backlog` of the `retrying`
    /// clients of the loop: those before which fewer than `backlog` can have been answered
    /// (a step after which the backlog can be answered constrains nothing), in time order.
    /// Released at the start: the attempts out that can be answered in time, and the
    /// clients the phases do not place. A client waiting out its delay with its next
    /// attempt in the bucket `(lo, le]` is released at `lo` after the scrape (it sends no
    /// sooner), and answered no sooner than `lo + s` (its answer takes a server at least
    /// `s` after it arrives). The held-back attempts out are released at
    /// [`RetryLoop::back_at_s`]. Where the gauges count more clients than `retrying`, the
    /// earliest released are taken to be the loop's.
    pub(super) fn releases(&self, retrying: f64, backlog: f64) -> Vec<Release> {
        let held = self.held_back();
        let back = self.back_at_s();
        // (released at, clients, answered no sooner than), from the paths' origin.
        let mut later = vec![(back, held, back)];
        let mut placed = self.attempts_out();
        if let Some(p) = &self.phases {
            let mut lo = 0.0;
            for (le, n) in p.waiting_next.buckets() {
                let at = lo - self.scraped_before_s;
                later.push((at, n, at + self.service_time_s.max(0.0)));
                lo = le;
            }
            placed += p.waiting_next.total;
        }
        later.retain(|&(_, n, _)| n > 0.0);
        later.sort_by(|a, b| a.0.total_cmp(&b.0));
        // A client released at a step or later is answered no sooner than this.
        let mut done_from = vec![f64::INFINITY; later.len() + 1];
        for (i, &(_, _, from)) in later.iter().enumerate().rev() {
            done_from[i] = done_from[i + 1].min(from);
        }
        let now = (retrying - placed).max(0.0) + self.attempts_out() - held;
        let mut answerable = now.min(retrying);
        let mut out = vec![];
        for (&(at_s, n, _), &done_from_s) in later.iter().zip(&done_from) {
            let after = (answerable + n).min(retrying);
            if answerable < backlog {
                out.push(Release {
                    at_s,
                    before: answerable,
                    released: after - answerable,
                    done_from_s,
                });
            }
            answerable = after;
        }
        out
    }
}

/// Why the bound read no clients' phases with a retry loop: `client_phases` reads none
/// unless every workers' page that answered carries both ladders with their `+Inf` rung.
const NO_LADDERS: &str = "the workers' page carries no ladders \
    (recover_demo_workers_next_attempt_within and recover_demo_workers_attempt_left_within, \
    each with its +Inf rung) at the scrape before the runbook, or no workers' page answered it";

/// Why the bound read no clients' phases without one (`retry_loop_of`).
const NO_LOOP: &str = "no retry loop was read: the clients' policy sets no least wait \
    between attempts (full jitter), or no scrape before the runbook read how many of the \
    loop had an attempt out";

/// What the report says of the retry loop the bound read (`loop_`, at the paths' origin,
/// owing `backlog` of its `retrying` clients): whether it read where the clients stood
/// (else why not), and the release steps that bound the paths.
pub(super) fn in_report(
    loop_: Option<&RetryLoop>,
    retrying: f64,
    backlog: f64,
) -> (Result<(), String>, Vec<ReleaseStep>) {
    let Some(l) = loop_ else {
        return (Err(NO_LOOP.into()), vec![]);
    };
    let read = match l.phases {
        Some(_) => Ok(()),
        None => Err(NO_LADDERS.into()),
    };
    let steps = l
        .releases(retrying, backlog)
        .iter()
        .map(|r| ReleaseStep {
            at_s: to_us(r.at_s),
            answerable: r.before,
            released: r.released,
            answered_from_s: to_us(r.done_from_s),
        })
        .collect();
    (read, steps)
}

/// Seconds to the microsecond, for reading: the ladders' edges and the service time are
/// far coarser, and the sums between them leave float noise (0.11499999999999999).
fn to_us(s: f64) -> f64 {
    (s * 1e6).round() / 1e6
}

impl Ladder {
    /// Each bucket's upper edge and count, the last past every edge (`+Inf`); counts that
    /// fall (gauges read apart) count as 0.
    fn buckets(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        let mut below = 0.0_f64;
        self.edges
            .iter()
            .copied()
            .chain(std::iter::once((f64::INFINITY, self.total)))
            .map(move |(le, cum)| {
                let n = (cum - below).max(0.0);
                below = below.max(cum);
                (le, n)
            })
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
