//! The true lower bound on time to recover: the fastest any procedure could get this system
//! from the state it was in when the runbook started to steady state.
//!
//! Why it exists: the report's ratio (measured time over the bound) is only a yardstick if
//! no run can come in under it. So the bound is a minimum over every way of recovering the
//! model allows, each computed from the system's own numbers and never from the runbook's
//! steps: readmitting as a restart leaves the service (cold, warming only by serving);
//! warming first, then readmitting warm; readmitting cold while the warming runs; and,
//! where the system's overload lives in its queue alone (the demo service: its cost
//! multiplier depends on queue depth, so a drain clears it), draining without a restart at
//! the warmth the service had.
//!
//! The model (each piece a relaxation, so the bound can only come out lower than the truth):
//! - Steady needs every client in the retry loop answered once, but for the fraction the
//!   steady criteria let stay in it: `backlog = retrying - retrying_fraction_max x workers`.
//! - Clients not in the loop keep polling, but their polls are left out: their phases are
//!   unknown (the trigger may have bunched them, so none need arrive in a short window), and
//!   in a stuck state they are few.
//! - A replica answers no faster than its pool: `(capacity_warm / replicas) x phi(w)` per
//!   second, `phi(w) = 1 / m(w)` with the cold multiplier `m(w) = 1 + (cold_factor - 1)(1 - w)`;
//!   its warmth `w` rises with the requests it serves (`warm_after` of them from cold to
//!   warm) or jumps to 1 when a warm call completes. Overload never costs anything here,
//!   requests in flight at the start are free to drop, and nothing waits for a scrape.
//! - After a restart every replica starts cold: each replica's best is then the same curve,
//!   so the service's best is that curve times the replicas (`Spread::Even`).
//! - Without a restart only the mean warmth is measured, and the spread matters: `m` is
//!   affine and falling in `w`, so `phi` is convex, and by Jensen a warm and a cold replica
//!   answer more than two half-warm ones (`f = 4`: `1 + 1/4` against `2 x 1/2.5` warm
//!   capacities). So the bound takes the most favourable spread (`Spread::Favourable`): with
//!   `S` the warmth summed over the replicas, the most any spread can answer per second is
//!   `g(S) = max sum_i phi(w_i)` over `w` in `[0, 1]^replicas` with `sum_i w_i = S`. A convex
//!   function of `w` is largest at a vertex of that set, and its vertices have at most one
//!   `w_i` strictly between 0 and 1: `floor(S)` replicas warm, one at `S - floor(S)`, the rest
//!   cold. `S` starts at `replicas x mean` and only grows by what is served (`1 / warm_after`
//!   a request, less once a replica is warm), and `g` does not fall as `S` grows, so the
//!   served count can never pass the one of `n' = capacity/replicas x g(S0 + n / warm_after)`.
//!   That curve takes the best spread at every instant, not only at the start, because no one
//!   spread is best throughout: a warm and a cold replica answer more at first, two half-warm
//!   ones lose less while warming the rest of the way. Where every replica's warmth is
//!   measured, none of this is assumed: each replica serves at its own best from its own
//!   warmth (`BoundSystem::earliest_known`).
//! - A restart costs the replica's own start-to-ready time, measured when the rehearsal
//!   started the system (the readiness poll's interval taken off, since it sees "ready" up
//!   to one interval late); unknown, it costs 0. An unknown warmth is taken as warm.
//! - The clients' retry loop releases its clients no sooner than they can be answered
//!   ([`RetryLoop`], `bound_retry`): those whose attempt was in flight when the state was
//!   scraped, beyond the most the servers answer before those clients give up (each
//!   server at its healthy cost whatever the procedure drops or keeps), fail and send
//!   again at least a retry delay after the scrape; where the workers export where each
//!   client stood, a client waiting out its delay sends no sooner than its bucket's lower
//!   edge. Clients whose phases are not measured may come back at once.

pub use super::bound_busy::ServersBusy;
use super::bound_retry::{self, Release};
pub use super::bound_retry::{
    retry_loop_of, BusyServer, ClientPhases, HoldOver, Ladder, Restart, RetryLoop, ServersAt,
};
use super::report::{BoundPath, LowerBound};
use super::scenario::Scenario;
use super::verify::SteadyCriteria;

/// The system's numbers the bound needs (all from the scenario the rehearsal built).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoundSystem {
    pub replicas: u32,
    /// Warm capacity of all replicas together, requests/s.
    pub capacity_warm_per_s: f64,
    /// Cost multiplier of a cold cache (>= 1).
    pub cold_factor: f64,
    /// Requests a replica serves until warm (0: always warm).
    pub warm_after: u64,
    /// How long a warm call takes.
    pub warm_s: f64,
    pub workers: u32,
    /// Fraction of the workers steady state lets stay in the retry loop.
    pub retrying_allowed: f64,
    /// A drain alone clears the overload (no restart needed to leave the stuck state).
    pub drain_clears_overload: bool,
}

/// The state at the runbook's start.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundStart {
    /// Workers in the retry loop.
    pub retrying: f64,
    /// Replica start-to-ready time, seconds, if measured.
    pub restart_s: Option<f64>,
    /// Mean warm fraction of the replicas, if measured.
    pub warm_fraction: Option<f64>,
    /// Each replica's warm fraction, where measured for every replica (then it wins over
    /// the mean: no spread needs to be assumed).
    pub warm_per_replica: Option<Vec<f64>>,
    /// The clients' retry loop, where the scenario declares its clients' retry delay and
    /// timeout and the split of the loop was measured (else the delay counts for nothing).
    pub retry_loop: Option<RetryLoop>,
}

/// How the warmth is spread over the replicas when serving starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spread {
    /// Every replica equally warm (after a restart: all cold).
    Even,
    /// Only the mean is known: the most favourable spread at every instant (module doc).
    Favourable,
}

/// One schedule of the model: when serving starts, when the caches become warm by a warm
/// call (if one is made), and how warm the service is (mean over replicas, and its spread)
/// when serving starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    pub serve_from_s: f64,
    pub warm_done_s: Option<f64>,
    pub start_warmth: f64,
    pub spread: Spread,
}

/// Fluid time step, seconds (the result is moved earlier by what stepping can cost, so
/// that it can only make the bound lower).
const DT: f64 = 0.001;
/// Past this a schedule counts as never recovering.
const HORIZON_S: f64 = 3600.0;

impl BoundSystem {
    fn cold_multiplier(&self, w: f64) -> f64 {
        1.0 + (self.cold_factor.max(1.0) - 1.0) * (1.0 - w.clamp(0.0, 1.0))
    }

    /// The most the service answers per second with its warmth summed over the replicas
    /// at `sum` (0..=replicas) and spread as `spread`.
    fn rate(&self, sum: f64, spread: Spread) -> f64 {
        let r = self.replicas.max(1) as f64;
        let sum = sum.clamp(0.0, r);
        let c = self.capacity_warm_per_s;
        match spread {
            Spread::Even => c / self.cold_multiplier(sum / r),
            Spread::Favourable => {
                let warm = sum.floor();
                let partly = if warm < r {
                    1.0 / self.cold_multiplier(sum - warm)
                } else {
                    0.0
                };
                let cold = (r - warm - 1.0).max(0.0) / self.cold_multiplier(0.0);
                c / r * (warm + partly + cold)
            }
        }
    }

    /// Requests that must be answered once to leave the loop.
    pub fn backlog(&self, retrying: f64) -> f64 {
        (retrying - self.retrying_allowed * self.workers as f64).max(0.0)
    }

    /// Earliest time the backlog can have been answered under `s`, the service serving at
    /// its best from `serve_from_s`.
    pub fn earliest(&self, retrying: f64, s: Schedule) -> Option<f64> {
        self.earliest_floored(retrying, s, &[])
    }

    fn earliest_floored(&self, retrying: f64, s: Schedule, steps: &[Release]) -> Option<f64> {
        let replicas = self.replicas.max(1) as f64;
        let warm_after = self.warm_after as f64;
        let start = s.start_warmth.clamp(0.0, 1.0) * replicas;
        self.serve(
            retrying,
            s.serve_from_s,
            s.warm_done_s,
            steps,
            0.0,
            |n, _, warm| {
                // Warmth summed over the replicas.
                let sum = (start + n / warm_after).min(replicas);
                (!warm && sum < replicas).then(|| self.rate(sum, s.spread) * DT)
            },
        )
    }

    /// Earliest time the backlog can have been answered with each replica's warmth known
    /// (`warmth`, one per replica), serving from `serve_from_s`, all warm at `warm_done_s`
    /// if a warm call is made: each replica warms only by what it serves, so each serves
    /// at its own best, all of them busy.
    pub fn earliest_known(
        &self,
        retrying: f64,
        warmth: &[f64],
        serve_from_s: f64,
        warm_done_s: Option<f64>,
    ) -> Option<f64> {
        self.earliest_known_floored(retrying, warmth, serve_from_s, warm_done_s, &[], None)
    }

    /// With `busy` (no restart: the servers holding a request at the scrape), each
    /// replica serves with the share of its servers free at each step
    /// ([`ServersBusy::free_share`]), and each request in service counts as served when it
    /// ends (it may be a live client's). The free times are taken a step early, so what
    /// stepping counts late is counted early instead.
    fn earliest_known_floored(
        &self,
        retrying: f64,
        warmth: &[f64],
        serve_from_s: f64,
        warm_done_s: Option<f64>,
        steps: &[Release],
        busy: Option<&ServersBusy>,
    ) -> Option<f64> {
        if warmth.is_empty() && self.backlog(retrying) > 0.0 {
            return None;
        }
        let per = self.capacity_warm_per_s / warmth.len() as f64;
        let warm_after = self.warm_after as f64;
        let busy = busy.map(|b| b.earlier(DT)).unwrap_or_default();
        // A replica's warmth now, from its warmth at the start and what it has served.
        let now = |w0: f64, served: f64| (w0.clamp(0.0, 1.0) + served / warm_after).min(1.0);
        let mut served = vec![0.0; warmth.len()];
        let busy_until = busy.last_free_s();
        // The first step also counts the requests that end at or before it starts.
        let mut ended_to = f64::NEG_INFINITY;
        self.serve(
            retrying,
            serve_from_s,
            warm_done_s,
            steps,
            busy_until,
            |_, t, warm| {
                if !warm
                    && warmth
                        .iter()
                        .zip(&served)
                        .all(|(&w0, &s)| now(w0, s) >= 1.0)
                    && t >= busy_until
                {
                    return None;
                }
                // Each replica's step depends on its own warmth and free servers only.
                let mut step = 0.0;
                for (i, (&w0, s)) in warmth.iter().zip(served.iter_mut()).enumerate() {
                    let w = if warm { 1.0 } else { now(w0, *s) };
                    let d = per / self.cold_multiplier(w) * busy.free_share(i, t) * DT
                        + busy.ending(i, ended_to, t + DT);
                    *s += d;
                    step += d;
                }
                ended_to = t + DT;
                Some(step)
            },
        )
    }

    /// The fluid loop both schedules share: from `serve_from_s`, each step of `DT` serves
    /// what `step(served so far)` returns, until the backlog is answered; once `step` says
    /// every replica is warm (`None`), or a warm call has completed, the rest goes at warm
    /// capacity. Stepping serves at the rate a step starts with while warmth only rises,
    /// and a warm call lands up to a step late: each costs at most `cold_factor` steps,
    /// taken off the result so that stepping can only make the bound lower.
    ///
    /// With release `steps` (the clients of the loop that can have been answered by `t`,
    /// `A(t)`, rises only at them): before a step's `at_s`, at most its `before` clients
    /// can have been answered, and no work for the others has started, so a procedure done
    /// at `t` serves at least `backlog - before` between `at_s` and `t`. The curve's rate
    /// never falls as it serves, so no procedure serves more between `at_s` and any later
    /// time than it does: the target becomes `backlog + max_k max(0, served by at_k -
    /// before_k)`, and no path is done before the last step that binds (`before <
    /// backlog`), nor before that step's `done_from_s`. The served count is read at the
    /// last step of `DT` not past `at_s` (a lower count, a lower bound).
    ///
    /// `step(served, t, warm)` gets the step's start `t` and whether the caches are warm
    /// by then; the loop goes at warm capacity only once they are and `t` has reached
    /// `busy_until_s` (every server free), or `step` says `None`.
    fn serve(
        &self,
        retrying: f64,
        serve_from_s: f64,
        warm_done_s: Option<f64>,
        steps: &[Release],
        busy_until_s: f64,
        mut step: impl FnMut(f64, f64, bool) -> Option<f64>,
    ) -> Option<f64> {
        let backlog = self.backlog(retrying);
        let c = self.capacity_warm_per_s;
        if backlog <= 0.0 {
            return Some(serve_from_s.max(0.0));
        }
        if c <= 0.0 || !c.is_finite() {
            return None;
        }
        let slack = 2.0 * self.cold_factor.max(1.0) * DT;
        let raised = |n: f64, r: &Release| backlog + (n - r.before).max(0.0);
        let binds = |r: &&Release| r.before < backlog;
        let done_from = steps
            .iter()
            .filter(binds)
            .fold(0.0, |a, r| r.done_from_s.max(a));
        let done = |end: f64| Some((end - slack).max(serve_from_s).max(done_from));
        let (mut t, mut n) = (serve_from_s, 0.0);
        // Steps before serving starts bind nothing: the curve has served 0 by them.
        let mut pending = steps
            .iter()
            .filter(|r| r.at_s > serve_from_s)
            .filter(binds)
            .peekable();
        let mut target = backlog;
        loop {
            while let Some(r) = pending.next_if(|r| t + DT > r.at_s) {
                target = target.max(raised(n, r));
            }
            let warm = warm_done_s.is_some_and(|w| t >= w) || self.warm_after == 0;
            let Some(d) = (if warm && t >= busy_until_s {
                None
            } else {
                step(n, t, warm)
            }) else {
                // Warm capacity from here: the served count at each step is known exactly,
                // and the target, above it, is reached after the last.
                for r in pending {
                    target = target.max(raised(n + c * (r.at_s - t).max(0.0), r));
                }
                return done(t + ((target - n) / c).max(0.0));
            };
            n += d;
            t += DT;
            if pending.peek().is_none() && n >= target {
                return done(t);
            }
            if t > HORIZON_S {
                return None;
            }
        }
    }

    /// Every path with its best time; the lower bound is the least of them.
    pub fn paths(&self, start: BoundStart) -> Vec<BoundPath> {
        self.paths_busy(start, None)
    }

    /// [`BoundSystem::paths`], the path without a restart serving with the servers
    /// `busy` held at the scrape only once their requests end (a restart frees them).
    pub fn paths_busy(&self, start: BoundStart, busy: Option<&ServersBusy>) -> Vec<BoundPath> {
        let r = start.restart_s.unwrap_or(0.0).max(0.0);
        let w = self.warm_s.max(0.0);
        let warm_now = start.warm_fraction.unwrap_or(1.0).clamp(0.0, 1.0);
        let steps = start
            .retry_loop
            .as_ref()
            .map(|l| l.releases(start.retrying, self.backlog(start.retrying)))
            .unwrap_or_default();
        let time = |s: Schedule| self.earliest_floored(start.retrying, s, &steps);
        let mut out = vec![
            BoundPath {
                name: "readmit_cold".into(),
                what: format!(
                    "restart ({r:.2} s to ready), readmit at once; the caches warm only by serving"
                ),
                time_s: time(Schedule {
                    serve_from_s: r,
                    warm_done_s: None,
                    start_warmth: 0.0,
                    spread: Spread::Even,
                }),
            },
            BoundPath {
                name: "warm_first".into(),
                what: format!("restart ({r:.2} s), warm the caches ({w:.2} s), then readmit warm"),
                time_s: time(Schedule {
                    serve_from_s: r + w,
                    warm_done_s: Some(r + w),
                    start_warmth: 0.0,
                    spread: Spread::Even,
                }),
            },
            BoundPath {
                name: "readmit_cold_while_warming".into(),
                what: format!(
                    "restart ({r:.2} s), readmit at once while the caches warm ({w:.2} s)"
                ),
                time_s: time(Schedule {
                    serve_from_s: r,
                    warm_done_s: Some(r + w),
                    start_warmth: 0.0,
                    spread: Spread::Even,
                }),
            },
        ];
        let known = start
            .warm_per_replica
            .as_deref()
            .filter(|ws| ws.len() == self.replicas.max(1) as usize);
        if let (true, Some(ws)) = (self.drain_clears_overload, known) {
            let each: Vec<String> = ws.iter().map(|x| format!("{x:.2}")).collect();
            out.push(BoundPath {
                name: "drain_no_restart".into(),
                what: format!(
                    "drain (the overload lives in the queue), readmit at once at each replica's warmth ({}) while the caches warm ({w:.2} s)",
                    each.join(", ")
                ),
                time_s: self.earliest_known_floored(
                    start.retrying,
                    ws,
                    0.0,
                    Some(w),
                    &steps,
                    busy,
                ),
            });
        } else if self.drain_clears_overload {
            // Without a restart the requests in service at the scrape end and may be live
            // clients' answers, sooner than any new request could be: the fluid schedule
            // takes every server free at the origin, so it owes them as answered there (a
            // relaxation). Where the servers were not read this path counts none, as the
            // paths did before the servers were read (the system knows its capacity, not
            // its servers).
            let in_service = busy.map_or(0.0, ServersBusy::in_service);
            out.push(BoundPath {
                name: "drain_no_restart".into(),
                what: format!(
                    "drain (the overload lives in the queue), readmit at once at the warmth the service had (mean {warm_now:.2}, spread the most favourable way) while the caches warm ({w:.2} s)"
                ),
                time_s: self.earliest_floored(
                    (start.retrying - in_service).max(0.0),
                    Schedule {
                        serve_from_s: 0.0,
                        warm_done_s: Some(w),
                        start_warmth: warm_now,
                        spread: Spread::Favourable,
                    },
                    &steps,
                ),
            });
        }
        out
    }
}

/// The least of the paths and its name; `None` when no path recovers.
pub fn least(paths: &[BoundPath]) -> Option<(&BoundPath, f64)> {
    paths
        .iter()
        .filter_map(|p| p.time_s.map(|t| (p, t)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// The true lower bound for the scenario's system from the state the runbook found
/// (`rehearse::bound`). The demo service's overload lives in its queue
/// (`CostModel::overloaded` reads the queue depth alone), so a drain clears it and the
/// no-restart path counts.
///
/// `retrying` was scraped `scraped_before_s` before the runbook's start, and the loop's
/// clients may be answered in between (by the stuck service, or faster): so every path
/// counts from that scrape, as if the procedure could act from it, and its time is then
/// read from the runbook's start (less `scraped_before_s`, never under 0). Counting from
/// the runbook's start with the scraped count would owe clients already answered, and
/// could come out above a measured time. Where the loop says where the replicas' servers
/// stood ([`RetryLoop::servers`]), the path without a restart serves with each busy one
/// only once its request ends ([`ServersBusy`]).
pub fn true_lower_bound(
    sc: &Scenario,
    retrying: f64,
    scraped_before_s: f64,
    start_to_ready_s: Option<f64>,
    warmth: &[f64],
    crit: &SteadyCriteria,
    retry_loop: Option<RetryLoop>,
) -> Option<LowerBound> {
    let lag = scraped_before_s.max(0.0);
    // The loop's split counts from the same scrape (its delay from its own scrape).
    let retry_loop = retry_loop.map(|l| RetryLoop {
        scraped_before_s: l.scraped_before_s - lag,
        restart: Restart {
            start_to_ready_s,
            ..l.restart
        },
        ..l
    });
    let held_back = retry_loop
        .as_ref()
        .map(|l| l.held_back().min(retrying))
        .unwrap_or(0.0);
    let warm_fraction =
        (!warmth.is_empty()).then(|| warmth.iter().sum::<f64>() / warmth.len() as f64);
    let sys = BoundSystem {
        replicas: sc.replicas,
        capacity_warm_per_s: sc.capacity_per_s(),
        cold_factor: sc.service.cold_factor,
        warm_after: sc.service.warm_after,
        warm_s: sc.service.warm_duration.as_secs_f64(),
        workers: sc.workers.count,
        retrying_allowed: crit.retrying_fraction_max,
        drain_clears_overload: true,
    };
    // The steps `paths` takes, for the report.
    let (phases_read, releases) =
        bound_retry::in_report(retry_loop.as_ref(), retrying, sys.backlog(retrying));
    // The loop was scraped `-scraped_before_s` after the paths' origin (now shifted).
    let job_overrun = retry_loop
        .as_ref()
        .and_then(|l| l.servers.as_ref())
        .and_then(|a| a.hold_over);
    let busy = retry_loop.as_ref().and_then(|l| {
        let at = l.servers.as_ref()?;
        ServersBusy::read(at, l.concurrency, -l.scraped_before_s)
    });
    let mut paths = sys.paths_busy(
        BoundStart {
            retrying,
            restart_s: start_to_ready_s,
            warm_fraction,
            warm_per_replica: Some(warmth.to_vec()),
            retry_loop,
        },
        busy.as_ref(),
    );
    for p in &mut paths {
        p.time_s = p.time_s.map(|t| (t - lag).max(0.0));
    }
    let (best, t) = least(&paths)?;
    let (lowest, what) = (best.name.clone(), best.what.clone());
    Some(LowerBound {
        restart_s: start_to_ready_s.unwrap_or(0.0),
        restart_from: match start_to_ready_s {
            Some(_) => "a replica's start-to-ready when the rehearsal started the system, less the readiness poll's interval (5 ms)".into(),
            None => "unknown (not measured): taken as 0".into(),
        },
        backlog: sys.backlog(retrying),
        capacity_cold_per_s: sc.capacity_cold_per_s(),
        capacity_warm_per_s: sc.capacity_per_s(),
        demand_per_s: sc.demand_per_s(),
        retry_delay_s: sc.retry_delay().as_secs_f64(),
        held_back,
        scraped_before_s: lag,
        warm_s: sys.warm_s,
        warm_fraction_at_start: warm_fraction,
        lower_bound_s: t,
        fluid_s: t,
        sample_s: None,
        record_interval_s: sc.record_interval.as_secs_f64(),
        on_grid: "not yet placed on the scrape grid: the fluid bound".into(),
        lowest,
        paths,
        capacity_used: what,
        client_phases_read: phases_read.is_ok(),
        client_phases_unknown: phases_read.err(),
        releases,
        job_overrun,
    })
}

/// No run can recover faster than the bound: one that did says the bound or the clock is
/// wrong.
pub fn under_bound(time_to_recover_s: Option<f64>, lb: Option<&LowerBound>) -> Option<String> {
    let (t, lb) = (time_to_recover_s?, lb?);
    (t < lb.lower_bound_s).then(|| {
        format!(
            "time to recover {t:.2} s is under the true lower bound {:.2} s ({}): a bug in the bound or the clock",
            lb.lower_bound_s, lb.lowest
        )
    })
}

#[cfg(test)]
#[path = "bound_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "bound_retry_tests.rs"]
mod retry_tests;

#[cfg(test)]
#[path = "bound_retry_busy_tests.rs"]
mod retry_busy_tests;

#[cfg(test)]
#[path = "bound_retry_model.rs"]
mod retry_model;
