//! The clients' retry loop in the lower bound: when each client of the loop can first be
//! answered (the attempts out no procedure answers in time send again a retry delay after
//! the scrape; a client waiting out its delay sends no sooner than the workers' ladder
//! says), as release steps. Its own module beside [`super::bound`], whose paths take the
//! steps it gives, so that the bound's fluid model and this count of clients read apart
//! (the derivation is in docs/design/arithmetic.md, "The clients' retry delay").

pub use super::ladder::Ladder;
pub use super::report::HoldOver;
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
    /// Where the replicas' servers stood at the scrape, where the service exports it
    /// (`None`: every server may answer right after the scrape).
    pub servers: Option<ServersAt>,
    /// What a restart of a replica gives at the soonest.
    pub restart: Restart,
}

/// A replica's restart as the bound counts it: ready no sooner than the runbook's start
/// plus its measured start-to-ready, then cold. The default is the loosest (ready at the
/// runbook's start, warm at once).
#[derive(Debug, Clone, PartialEq)]
pub struct Restart {
    /// Start-to-ready, seconds (`None`: not measured, taken as 0).
    pub start_to_ready_s: Option<f64>,
    /// A cold request's cost over a warm one's (the demo's `m(0)`).
    pub cold_factor: f64,
    /// Completions after which the process is warm (0: warm at once).
    pub warm_after: u64,
    /// How long a warm call issued at ready takes to make the process warm, seconds.
    pub warm_s: f64,
}

impl Default for Restart {
    fn default() -> Self {
        Restart {
            start_to_ready_s: None,
            cold_factor: 1.0,
            warm_after: 0,
            warm_s: 0.0,
        }
    }
}

/// Where the replicas' servers stood at a scrape, as the demo service exports it
/// (`recover_demo_service_busy_for_within{le_s}`), over every replica's page.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServersAt {
    /// Each busy server, replica by replica in the order the service's pages were read.
    pub by_replica: Vec<Vec<BusyServer>>,
    /// Servers read idle.
    pub idle: u32,
    /// How far apart within the probe the service's and the clients' pages may have been
    /// read, seconds.
    pub read_apart_s: f64,
    /// The service's pages were read before the clients' (the probe reads them first):
    /// apart by `read_apart_s` at most, and never the other way.
    pub read_first: bool,
    /// How much longer than its cost a job holds its server, as the service measured it
    /// (`None`: not exported, or over too few jobs; every job then holds its server its
    /// cost alone).
    pub hold_over: Option<HoldOver>,
}

/// Standard deviations below the mean a run of jobs' summed overrun is taken to stay
/// above: the normal law leaves about 0.1% below 3.
const HOLD_OVER_SDS: f64 = 3.0;

impl HoldOver {
    /// The least total overrun `n` jobs in a row are taken to add: their mean's sum less
    /// three standard deviations of a sum of `n` independent overruns, never below zero.
    /// Back to back on one server the overruns are not independent but pay each other
    /// back (a job ending late on the timer's tick starts the next one later in its
    /// tick, which then ends on time): their sum spreads less than independent ones', so
    /// the margin only loosens.
    pub fn least_over(&self, n: f64) -> f64 {
        (n * self.mean_s - HOLD_OVER_SDS * self.sd_s * n.sqrt()).max(0.0)
    }
}

/// A server free right after the scrape, whose first answer may come at once.
const FREE: BusyServer = BusyServer {
    free_s: 0.0,
    live: true,
};

/// One server read busy at a scrape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BusyServer {
    /// The earliest end of its job in service, seconds after the scrape (its bucket's
    /// lower edge).
    pub free_s: f64,
    /// Its job ends before its client stops waiting, so its end may answer a client; true
    /// where the service does not say (`busy_live_for_within` not exported).
    pub live: bool,
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
    /// (sooner where the phases say so: within its bucket's upper edge `D`), and it is
    /// answered after the scrape (it was still out). The live requests' split between the
    /// replicas is not measured, so every server is pooled, and the count is the greedy
    /// earliest deadline first over the bound `C(D)` on all answers before `D`: with the
    /// constraints "at most `C(D)` answers before `D`" for every `D`, taking each
    /// deadline in turn while room is left meets the most deadlines (any set met obeys
    /// them), and any procedure's answers obey them, so the count bounds every procedure.
    /// `C(D)` sums [`RetryLoop::server_answers`] over the servers. (`D / s` is a ratio of
    /// a ladder edge or a timeout to a whole number of nanoseconds: unless it is a whole
    /// number it is a nanosecond's share of `s` away from one, far beyond the division's
    /// rounding, so `ceil` never undercounts.)
    pub fn answerable_in_time(&self) -> f64 {
        let timeout = self.client_timeout_s.max(0.0);
        let slots = |d: f64| self.answers_before(d.min(timeout));
        let Some(p) = &self.phases else {
            return slots(timeout);
        };
        let mut used = 0.0;
        for (le, n) in p.in_flight_left.buckets() {
            used += n.min((slots(le) - used).max(0.0));
        }
        used
    }

    /// The most answers all servers give in `(0, d]` after the scrape.
    fn answers_before(&self, d: f64) -> f64 {
        let servers = f64::from(self.replicas) * f64::from(self.concurrency.max(1));
        let s = self.service_time_s;
        let Some(at) = &self.servers else {
            return servers * self.server_answers(d, &FREE, 0.0);
        };
        let mu = at.read_apart_s.max(0.0);
        let busy: f64 = at
            .by_replica
            .iter()
            .flatten()
            .map(|b| self.server_answers(d, b, mu))
            .sum();
        // Read idle: its next job starts no sooner than the read, so its next answer
        // comes a service time after it at least.
        let idle = f64::from(at.idle)
            * self.server_answers(
                d,
                &BusyServer {
                    free_s: s,
                    live: true,
                },
                mu,
            );
        // Servers no page accounts for: free right after the scrape.
        let known = at.by_replica.iter().map(Vec::len).sum::<usize>() as f64 + f64::from(at.idle);
        let unknown = (servers - known).max(0.0) * self.server_answers(d, &FREE, 0.0);
        busy + idle + unknown
    }

    /// The most answers one server gives in `(0, d]` after the scrape, its job in service
    /// (if any) done no sooner than `free` after the page's read, that page read up to
    /// `mu` apart from the clients' (only before them where the probe read the service's
    /// pages first, [`ServersAt::read_first`]). One server answers one request at a time, each
    /// started no sooner than the previous one's answer and costing at least the healthy
    /// service time `s` (cold caches and overload only add): its answers are `s` apart at
    /// least. Without a restart: none before its job in service ends; that job may be
    /// live, so it counts at `free`, then the others `s` apart: `1 + floor((d - free) /
    /// s)` (fewer where the service measures its jobs' overrun, [`RetryLoop::jobs_within`],
    /// which the `floor`s below stand for). The page may have been read up to `mu` before the clients' (the job ends
    /// `mu` sooner on their clock) or after (the server may have answered once more in
    /// between, before the job it was read busy with started, which then ends no sooner
    /// than `free`): the more of `1 + floor((d - free + mu) / s)` and `2 + floor((d -
    /// free) / s)` covers both; read first, only the first can be. A job that ends after
    /// its client stops waiting (not [`BusyServer::live`]) answers nobody: the server's
    /// count starts with the next job, one fewer. With a restart: its process comes up no
    /// sooner than the runbook's start (`scraped_before_s` after the scrape) plus its
    /// start-to-ready, and a server then answers no sooner than
    /// [`RetryLoop::restart_answers`] says. Answers before the restart and after it are
    /// still `s` apart (a restart at `rho >= free` after `a` answers from `free` on leaves
    /// at most `floor((d - rho) / s)` more, and `a <= 1 + floor((rho - free) / s)`; a
    /// restart before `free` leaves only the restart's, and a later restart only delays
    /// them), so the more of the two counts covers any procedure, restart or not.
    /// Never more than `ceil(d / s)`, the count with the first answer right after the
    /// scrape that holds whatever the pages say.
    fn server_answers(&self, d: f64, server: &BusyServer, mu: f64) -> f64 {
        let s = self.service_time_s;
        let free = server.free_s;
        let any = (d / s).ceil().max(0.0);
        if free <= 0.0 && mu <= 0.0 && server.live {
            return any;
        }
        // A job that ends after its client stops waiting answers nobody: the server's
        // first useful answer is the next job's, a service time after it.
        let first = if server.live { 1.0 } else { 0.0 };
        let floor = |x: f64| self.jobs_within(x);
        // From `free` on, on the clock of a page read `shift` before the clients'.
        let from = |shift: f64| {
            if d + shift >= free {
                first + floor(d - free + shift)
            } else {
                0.0
            }
        };
        let stay = if mu > 0.0 && !self.servers.as_ref().is_some_and(|a| a.read_first) {
            from(mu).max(1.0 + from(0.0))
        } else {
            from(mu)
        };
        let restart = self.restart_answers(d + mu);
        stay.max(restart).min(any)
    }

    /// The most jobs one server ends back to back within `x` of starting the first: each
    /// holds it the healthy service time `s` at least, and together they hold it the
    /// least overrun the service measured over that many ([`HoldOver::least_over`]; none
    /// where it is not measured).
    pub(super) fn jobs_within(&self, x: f64) -> f64 {
        let s = self.service_time_s;
        // A whole number of service times may come out a hair below on division: round
        // up there (more answers only loosens the count).
        let mut n = (x / s + 1e-9).floor();
        let Some(h) = self.servers.as_ref().and_then(|a| a.hold_over) else {
            return n;
        };
        while n > 0.0 && n * s + h.least_over(n) > x + 1e-9 {
            n -= 1.0;
        }
        n
    }

    /// The most answers one server of a restarted replica gives by `d` after the scrape.
    /// Its process is ready no sooner than `ready` (the runbook's start plus the
    /// start-to-ready); each request then costs `s x m(w)`, fixed at its start, with
    /// `m(w) = 1 + (cold - 1)(1 - w)`, `w` the replica's completions since the restart
    /// over `warm_after` (capped at 1), and `s` once a warm call issued at ready has made
    /// it warm (`warm_s` later; a job started before that ends no later than `s` after
    /// it here, which only loosens). The count is the lockstep greedy: every server starts
    /// at `ready`, round `k` costs `s x m(c k / warm_after)`, its end `tau_{k+1}` the
    /// server's `(k+1)`-th answer. No procedure does better for any server: by induction
    /// every server's `k`-th job starts no sooner than `tau_k`, so the replica has at
    /// most `c k` completions before `tau_{k+1}`, and a job started at `x` in
    /// `[tau_k, tau_{k+1})` costs at least the round's cost (`m` falls with completions
    /// and warmth only), ending no sooner than `tau_{k+1}`.
    pub(super) fn restart_answers(&self, d: f64) -> f64 {
        let s = self.service_time_s;
        let r = &self.restart;
        let ready = self.scraped_before_s.max(0.0) + r.start_to_ready_s.unwrap_or(0.0).max(0.0);
        let warm_at = ready + r.warm_s.max(0.0);
        let per_round = f64::from(self.concurrency.max(1));
        let cold = r.cold_factor.max(1.0);
        let (mut tau, mut rounds) = (ready, 0.0_f64);
        loop {
            let w = if r.warm_after == 0 {
                1.0
            } else {
                (per_round * rounds / r.warm_after as f64).min(1.0)
            };
            let cost = s * (1.0 + (cold - 1.0) * (1.0 - w));
            let end = (tau + cost).min(tau.max(warm_at) + s);
            // Past `d`, or warm (the rest are `s` apart: counted at once).
            if end > d {
                return rounds;
            }
            if w >= 1.0 || end >= warm_at + s {
                return rounds + 1.0 + ((d - end) / s + 1e-9).floor();
            }
            tau = end;
            rounds += 1.0;
        }
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
        servers: None,
        restart: Restart {
            start_to_ready_s: None,
            cold_factor: sc.service.cold_factor,
            warm_after: sc.service.warm_after,
            warm_s: sc.service.warm_duration.as_secs_f64(),
        },
    })
}
