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
use crate::simulate::model::{Alternative, Model};
use std::time::Duration;

/// The per-call timeout and the hedging delay the drill compares.
pub const COMPARE_TIMEOUT: Duration = Duration::from_millis(250);
pub const COMPARE_HEDGE_AFTER: Duration = Duration::from_millis(150);

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

impl Model for SlowReplicaParams {
    type Report = SlowReplicaReport;

    fn run(&self, seed: u64) -> SlowReplicaReport {
        report::build(self, &model::run(self, seed))
    }

    /// Every balancer, plain and with each caller-side variant.
    fn alternatives(&self) -> Vec<Alternative<Self>> {
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
                    ..self.clone()
                };
                out.push(Alternative::new(format!("{label}{variant}"), change, q));
            }
        }
        out
    }

    fn compare_heading(&self) -> String {
        format!(
            "scenario slow-replica: replica {} {}x slower from {} s; latency of the calls after that, as their callers saw it",
            report::replica_name(self.slow_replica),
            self.slow_factor,
            self.slow_at.as_secs_f64()
        )
    }
}
