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
//! - The service answers no faster than its pool: `capacity_warm / m(w)` per second, with
//!   the cold multiplier `m(w) = 1 + (cold_factor - 1)(1 - w)`; warmth `w` rises with
//!   requests served (`warm_after` per replica, spread evenly: balancing is the fastest
//!   way) or jumps to 1 when a warm call completes. Overload never costs anything here,
//!   requests in flight at the start are free to drop, and nothing waits for a scrape.
//! - A restart costs the replica's own start-to-ready time, measured when the rehearsal
//!   started the system (the readiness poll's interval taken off, since it sees "ready" up
//!   to one interval late); unknown, it costs 0. An unknown warmth is taken as warm.

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
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoundStart {
    /// Workers in the retry loop.
    pub retrying: f64,
    /// Replica start-to-ready time, seconds, if measured.
    pub restart_s: Option<f64>,
    /// Mean warm fraction of the replicas, if measured.
    pub warm_fraction: Option<f64>,
}

/// One schedule of the model: when serving starts, when the caches become warm by a warm
/// call (if one is made), and how warm the service is when serving starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    pub serve_from_s: f64,
    pub warm_done_s: Option<f64>,
    pub start_warmth: f64,
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

    /// Requests that must be answered once to leave the loop.
    pub fn backlog(&self, retrying: f64) -> f64 {
        (retrying - self.retrying_allowed * self.workers as f64).max(0.0)
    }

    /// Earliest time the backlog can have been answered under `s`, the service serving at
    /// its best from `serve_from_s`.
    pub fn earliest(&self, retrying: f64, s: Schedule) -> Option<f64> {
        let backlog = self.backlog(retrying);
        let warm_total = self.warm_after as f64 * self.replicas.max(1) as f64;
        let c = self.capacity_warm_per_s;
        if backlog <= 0.0 {
            return Some(s.serve_from_s.max(0.0));
        }
        if c <= 0.0 || !c.is_finite() {
            return None;
        }
        // Stepping serves at the rate a step starts with while warmth only rises, and a
        // warm call lands up to a step late: each costs at most `cold_factor` steps.
        let slack = 2.0 * self.cold_factor.max(1.0) * DT;
        let (mut t, mut n) = (s.serve_from_s, 0.0);
        loop {
            let warm_call = s.warm_done_s.is_some_and(|w| t >= w);
            let w = if warm_call || warm_total <= 0.0 {
                1.0
            } else {
                (s.start_warmth + n / warm_total).min(1.0)
            };
            if w >= 1.0 {
                let end = t + ((backlog - n) / c).max(0.0);
                return Some((end - slack).max(s.serve_from_s));
            }
            n += c / self.cold_multiplier(w) * DT;
            t += DT;
            if n >= backlog {
                return Some((t - slack).max(s.serve_from_s));
            }
            if t > HORIZON_S {
                return None;
            }
        }
    }

    /// Every path with its best time; the lower bound is the least of them.
    pub fn paths(&self, start: BoundStart) -> Vec<BoundPath> {
        let r = start.restart_s.unwrap_or(0.0).max(0.0);
        let w = self.warm_s.max(0.0);
        let warm_now = start.warm_fraction.unwrap_or(1.0).clamp(0.0, 1.0);
        let time = |s: Schedule| self.earliest(start.retrying, s);
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
                }),
            },
            BoundPath {
                name: "warm_first".into(),
                what: format!("restart ({r:.2} s), warm the caches ({w:.2} s), then readmit warm"),
                time_s: time(Schedule {
                    serve_from_s: r + w,
                    warm_done_s: Some(r + w),
                    start_warmth: 0.0,
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
                }),
            },
        ];
        if self.drain_clears_overload {
            out.push(BoundPath {
                name: "drain_no_restart".into(),
                what: format!(
                    "drain (the overload lives in the queue), readmit at once at the warmth the service had ({warm_now:.2}) while the caches warm ({w:.2} s)"
                ),
                time_s: time(Schedule {
                    serve_from_s: 0.0,
                    warm_done_s: Some(w),
                    start_warmth: warm_now,
                }),
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
pub fn true_lower_bound(
    sc: &Scenario,
    retrying: f64,
    start_to_ready_s: Option<f64>,
    warm_fraction: Option<f64>,
    crit: &SteadyCriteria,
) -> Option<LowerBound> {
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
    let paths = sys.paths(BoundStart {
        retrying,
        restart_s: start_to_ready_s,
        warm_fraction,
    });
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
        warm_s: sys.warm_s,
        warm_fraction_at_start: warm_fraction,
        lower_bound_s: t,
        lowest,
        paths,
        capacity_used: what,
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
