//! `slow-replica`: four replicas behind a balancer, 60 requests/s; at 1 s replica B
//! becomes five times slower but stays up. Round robin keeps giving B a quarter of the
//! traffic, more than it can finish, so its queue and the p99 grow without bound while
//! the p50 stays fine; least outstanding requests and power of two choices send B only
//! what it finishes; the gate also ejects it. Compared with a per-call timeout and with
//! hedging, which trade the slow tail for errors or for extra load.

mod model;
pub mod params;
pub mod report;

pub use params::SlowReplicaParams;
pub use report::SlowReplicaReport;

use crate::gate::balance::policy::BalancePolicy;
use crate::simulate::model::{Alternative, Figure, Model, Unit};
use std::time::Duration;

/// The per-call timeout and the hedging delay the drill compares.
pub const COMPARE_TIMEOUT: Duration = Duration::from_millis(250);
pub const COMPARE_HEDGE_AFTER: Duration = Duration::from_millis(150);

pub struct SlowReplica;

/// The balancers compared: (label, policy, outlier ejection).
fn balancers() -> [(&'static str, BalancePolicy, bool); 4] {
    [
        ("round robin", BalancePolicy::RoundRobin, false),
        ("least outstanding", BalancePolicy::LeastOutstanding, false),
        ("power of two choices", BalancePolicy::P2c, false),
        (
            "gate: least outstanding + ejection",
            BalancePolicy::LeastOutstanding,
            true,
        ),
    ]
}

/// The caller-side variants compared: (label, timeout, retries, hedge).
fn variants() -> [(&'static str, Option<Duration>, u32, Option<Duration>); 4] {
    [
        ("", None, 0, None),
        (", timeout 250 ms", Some(COMPARE_TIMEOUT), 0, None),
        (", timeout 250 ms + 1 retry", Some(COMPARE_TIMEOUT), 1, None),
        (
            ", hedge at 150 ms, max 10%",
            None,
            0,
            Some(COMPARE_HEDGE_AFTER),
        ),
    ]
}

fn fmt_opt(d: Option<Duration>) -> String {
    d.map_or("null".into(), crate::util::duration::format)
}

impl Model for SlowReplica {
    const NAME: &'static str = params::NAME;
    type Params = SlowReplicaParams;
    type Report = SlowReplicaReport;

    fn run(p: &SlowReplicaParams, seed: u64) -> SlowReplicaReport {
        report::build(p, seed, &model::run(p, seed))
    }

    /// Every balancer, plain and with each caller-side variant.
    fn alternatives(p: &SlowReplicaParams) -> Vec<Alternative<SlowReplicaParams>> {
        let mut out = Vec::new();
        for (label, policy, eject) in balancers() {
            for (variant, timeout, retries, hedge) in variants() {
                let change = format!(
                    "balancer={policy} outlier_ejection={eject} timeout={} timeout_retries={retries} hedge_after={}",
                    fmt_opt(timeout),
                    fmt_opt(hedge)
                );
                let q = SlowReplicaParams {
                    balancer: policy,
                    outlier_ejection: eject,
                    timeout,
                    timeout_retries: retries,
                    hedge_after: hedge,
                    ..p.clone()
                };
                out.push(Alternative::new(format!("{label}{variant}"), change, q));
            }
        }
        out
    }

    fn compare_heading(p: &SlowReplicaParams) -> String {
        format!(
            "scenario slow-replica: replica {} {}x slower from {} s; latency of the calls after that, as their callers saw it",
            report::replica_name(p.slow_replica),
            p.slow_factor,
            p.slow_at.as_secs_f64()
        )
    }

    fn figures(_base: &SlowReplicaParams, alt: &SlowReplicaParams, seed: u64) -> Vec<Figure> {
        let r = Self::run(alt, seed);
        let b = &r.slow_replica;
        let ms = |key, header: &str, v| Figure::new(key, header, Unit::Millis, Some(v));
        vec![
            ms("p50_ms", "p50", r.slowed.p50_ms),
            ms("p99_ms", "p99", r.slowed.p99_ms),
            ms("last_10s_p99_ms", "p99 last 10 s", r.last_10s.p99_ms),
            Figure::share(
                "failed_share",
                "failed",
                r.slowed.failed as f64 / r.slowed.calls.max(1) as f64,
            ),
            Figure::share("slow_share", &format!("{b} share"), r.slow_share),
            Figure::count(
                "slow_max_backlog",
                &format!("{b} queue max"),
                r.slow_max_backlog,
            ),
            Figure::share("hedged_share", "hedged", r.hedged_share),
        ]
    }
}
