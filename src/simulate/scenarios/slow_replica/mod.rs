//! `slow-replica`: four replicas behind a balancer, 60 requests/s; at 1 s replica B
//! becomes five times slower but stays up. Round robin keeps giving B a quarter of the
//! traffic, more than it can finish, so its queue and the p99 grow without bound while
//! the p50 stays fine; least outstanding requests and power of two choices send B only
//! what it finishes; the gate also ejects it. Compared with a per-call timeout and with
//! hedging, which trade the slow tail for errors or for extra load.

mod model;
pub mod params;
pub mod report;

pub use params::{Arrivals, SlowReplicaParams};
pub use report::SlowReplicaReport;

use super::drill::DrillModel;
use crate::gate::balance::policy::BalancePolicy;
use crate::simulate::error::SimError;
use crate::simulate::plot::{self, Area, Axes, PlotResult, Series};
use plotters::style::RGBColor;
use serde::Serialize;
use std::fmt::Write;
use std::time::Duration;

/// The per-call timeout and the hedging delay the drill compares.
pub const COMPARE_TIMEOUT: Duration = Duration::from_millis(250);
pub const COMPARE_HEDGE_AFTER: Duration = Duration::from_millis(150);

pub struct SlowReplica;

/// One row of `--compare`: a balancer with one of the caller-side variants.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlowReplicaRow {
    pub balancer: String,
    pub variant: String,
    /// The `--set` changes that make this row from the scenario.
    pub change: String,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub last_10s_p99_ms: f64,
    pub failed_share: f64,
    pub slow_share: f64,
    pub slow_max_backlog: u64,
    pub hedged_share: f64,
    pub ejections: u64,
}

pub fn run(p: &SlowReplicaParams, seed: u64) -> SlowReplicaReport {
    report::build(p, seed, &model::run(p, seed))
}

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
        ("-", None, 0, None),
        ("timeout 250 ms", Some(COMPARE_TIMEOUT), 0, None),
        ("timeout 250 ms + 1 retry", Some(COMPARE_TIMEOUT), 1, None),
        (
            "hedge at 150 ms, max 10%",
            None,
            0,
            Some(COMPARE_HEDGE_AFTER),
        ),
    ]
}

fn fmt_opt(d: Option<Duration>) -> String {
    d.map_or("null".into(), crate::util::duration::format)
}

impl DrillModel for SlowReplica {
    const NAME: &'static str = "slow-replica";
    type Params = SlowReplicaParams;
    type Report = SlowReplicaReport;
    type Row = SlowReplicaRow;

    fn validate(p: &SlowReplicaParams) -> Result<(), SimError> {
        p.validate()
    }

    fn run(p: &SlowReplicaParams, seed: u64) -> SlowReplicaReport {
        run(p, seed)
    }

    fn text(r: &SlowReplicaReport) -> String {
        report::text(r)
    }

    fn compare(p: &SlowReplicaParams, seed: u64) -> Vec<SlowReplicaRow> {
        let mut rows = Vec::new();
        for (label, policy, eject) in balancers() {
            for (variant, timeout, retries, hedge) in variants() {
                let q = SlowReplicaParams {
                    balancer: policy,
                    outlier_ejection: eject,
                    timeout,
                    timeout_retries: retries,
                    hedge_after: hedge,
                    ..p.clone()
                };
                let r = run(&q, seed);
                let change = format!(
                    "balancer={policy} outlier_ejection={eject} timeout={} timeout_retries={retries} hedge_after={}",
                    fmt_opt(timeout),
                    fmt_opt(hedge)
                );
                rows.push(SlowReplicaRow {
                    balancer: label.to_string(),
                    variant: variant.to_string(),
                    change,
                    p50_ms: r.slowed.p50_ms,
                    p99_ms: r.slowed.p99_ms,
                    last_10s_p99_ms: r.last_10s.p99_ms,
                    failed_share: r.slowed.failed as f64 / r.slowed.calls.max(1) as f64,
                    slow_share: r.slow_share,
                    slow_max_backlog: r.slow_max_backlog,
                    hedged_share: r.hedged_share,
                    ejections: r.ejections.len() as u64,
                });
            }
        }
        rows
    }

    fn compare_text(p: &SlowReplicaParams, seed: u64, rows: &[SlowReplicaRow]) -> String {
        let b = report::replica_name(p.slow_replica);
        let mut o = String::new();
        let _ = writeln!(
            o,
            "scenario slow-replica (seed {seed}): replica {b} {}x slower from {} s; latency of the calls after that, as their callers saw it",
            p.slow_factor,
            p.slow_at.as_secs_f64()
        );
        let pct = |x: f64| format!("{:.1}%", x * 100.0);
        let table: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                vec![
                    r.balancer.clone(),
                    r.variant.clone(),
                    report::fmt_ms(r.p50_ms),
                    report::fmt_ms(r.p99_ms),
                    report::fmt_ms(r.last_10s_p99_ms),
                    pct(r.failed_share),
                    pct(r.slow_share),
                    r.slow_max_backlog.to_string(),
                    pct(r.hedged_share),
                ]
            })
            .collect();
        let share = format!("{b} share");
        let queue = format!("{b} queue max");
        let headers = [
            "balancer",
            "caller",
            "p50",
            "p99",
            "p99 last 10 s",
            "failed",
            share.as_str(),
            queue.as_str(),
            "hedged",
        ];
        o.push_str(&crate::simulate::text::table(&headers, &table));
        o
    }

    fn plot(r: &SlowReplicaReport, root: &Area) -> PlotResult {
        let pts = |f: fn(&report::SecondRow) -> f64| -> Vec<(f64, f64)> {
            r.series.iter().map(|s| (f64::from(s.t), f(s))).collect()
        };
        let b = &r.slow_replica;
        let left = [
            Series::new(
                "p99 (ms) of the calls arriving that second",
                RGBColor(200, 30, 30),
                pts(|s| s.p99_ms),
            ),
            Series::new("p50 (ms)", RGBColor(30, 140, 30), pts(|s| s.p50_ms)),
        ];
        let right = [Series::new(
            format!("{b}'s queue (right axis)"),
            RGBColor(230, 140, 0),
            pts(|s| s.slow_max_backlog as f64),
        )];
        let axes = Axes {
            title: format!(
                "slow-replica: {b} {}x slower from {} s, {}",
                r.slow_factor,
                r.slow_at_s,
                report::describe_setup(r)
            ),
            x_desc: "arrival time (s)",
            y_desc: "latency (ms)",
            right: Some("requests at B"),
        };
        plot::lines(root, &axes, &left, &right)
    }
}
