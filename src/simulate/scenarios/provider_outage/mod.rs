//! `provider-outage`: 40 clients call a provider that serves 8 requests per 100 ms tick;
//! it is down from 2 s to 6 s of a 24 s run. Every call that fails is retried by its
//! client's policy (exponential backoff without jitter, a fixed 1 s delay, or exponential
//! backoff with full jitter), while the clients keep sending their new calls. What the
//! policy decides: how hard the retries hit the provider when it comes back, how many
//! requests it costs, and how long until every call has gone through.
//!
//! A tick model, small enough to follow by hand: client `i` sends a new call in the ticks
//! where `tick % period_ticks == i % period_ticks` (so 4 per tick, half the capacity); a
//! tick's requests beyond the capacity fail at once (which ones: a seeded draw); a failed
//! call is sent again after its policy's delay, rounded up to whole ticks (at least one).

mod model;
pub mod params;

pub use model::{run, OutageTick, ProviderOutageReport};
pub use params::{ProviderOutageParams, RetryPolicy};

use super::drill::DrillModel;
use crate::simulate::error::SimError;
use crate::simulate::plot::{self, Area, Axes, PlotResult, Series};
use plotters::style::RGBColor;
use serde::Serialize;
use std::fmt::Write;

fn fmt_recovered(r: Option<f64>) -> String {
    r.map_or("never (within the run)".into(), |s| format!("{s:.1} s"))
}

pub fn text(r: &ProviderOutageReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "scenario provider-outage (seed {}): {} clients, a new call each per {} s; provider serves {} per {} ms tick, down {} s..{} s; {}",
        r.seed,
        r.clients,
        r.period_s,
        r.capacity_per_tick,
        r.tick_ms,
        r.down_from_s,
        r.back_at_s,
        r.policy_description
    );
    let _ = writeln!(
        o,
        "healthy: {:.1} requests per tick, all served",
        r.healthy_per_tick
    );
    let _ = writeln!(
        o,
        "peak requests in one tick after the provider is back: {} at {:.1} s (capacity {}); during the outage: {}",
        r.peak_after_back, r.peak_after_back_at_s, r.capacity_per_tick, r.peak_during_outage
    );
    let _ = writeln!(
        o,
        "total requests sent: {} ({} calls + {} retries); served {}, given up {}, still waiting at the end {}",
        r.requests, r.calls, r.retries, r.served, r.given_up, r.waiting_at_end
    );
    let _ = writeln!(
        o,
        "time to recover after it came back: {}",
        fmt_recovered(r.recovered_after_s)
    );
    let per_s = (1.0 / (r.tick_ms / 1000.0)).round().max(1.0) as usize;
    let rows: Vec<Vec<String>> = r
        .series
        .chunks(per_s)
        .map(|c| {
            let sum = |f: fn(&OutageTick) -> u64| c.iter().map(f).sum::<u64>().to_string();
            vec![
                format!("{:.0}", c[0].tick as f64 * r.tick_ms / 1000.0),
                sum(|x| x.new + x.retries),
                c.iter()
                    .map(|x| x.new + x.retries)
                    .max()
                    .unwrap_or(0)
                    .to_string(),
                sum(|x| x.retries),
                sum(|x| x.served),
                sum(|x| x.failed),
                c.last().map_or(0, |x| x.waiting).to_string(),
            ]
        })
        .collect();
    o.push_str(&crate::simulate::text::table(
        &[
            "t(s)",
            "requests",
            "peak tick",
            "retries",
            "served",
            "failed",
            "waiting",
        ],
        &rows,
    ));
    let _ = writeln!(
        o,
        "(one row per second; peak tick: the most requests in one of its ticks; waiting: calls waiting for a retry at its end)"
    );
    o
}

pub struct ProviderOutage;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProviderOutageRow {
    pub policy: RetryPolicy,
    pub change: String,
    pub peak_after_back: u64,
    pub requests: u64,
    pub retries: u64,
    pub recovered_after_s: Option<f64>,
    pub given_up: u64,
}

impl DrillModel for ProviderOutage {
    const NAME: &'static str = "provider-outage";
    type Params = ProviderOutageParams;
    type Report = ProviderOutageReport;
    type Row = ProviderOutageRow;

    fn validate(p: &ProviderOutageParams) -> Result<(), SimError> {
        p.validate()
    }

    fn run(p: &ProviderOutageParams, seed: u64) -> ProviderOutageReport {
        run(p, seed)
    }

    fn text(r: &ProviderOutageReport) -> String {
        text(r)
    }

    fn compare(p: &ProviderOutageParams, seed: u64) -> Vec<ProviderOutageRow> {
        RetryPolicy::ALL
            .into_iter()
            .map(|policy| {
                let r = run(
                    &ProviderOutageParams {
                        policy,
                        ..p.clone()
                    },
                    seed,
                );
                ProviderOutageRow {
                    policy,
                    change: format!("policy={}", policy.name()),
                    peak_after_back: r.peak_after_back,
                    requests: r.requests,
                    retries: r.retries,
                    recovered_after_s: r.recovered_after_s,
                    given_up: r.given_up,
                }
            })
            .collect()
    }

    fn compare_text(p: &ProviderOutageParams, seed: u64, rows: &[ProviderOutageRow]) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "scenario provider-outage (seed {seed}): {} clients, provider {} per tick, down {} s..{} s, run {} s",
            p.clients,
            p.capacity_per_tick,
            p.down_from.as_secs_f64(),
            p.down_to.as_secs_f64(),
            p.duration.as_secs_f64()
        );
        let table: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                vec![
                    r.policy.describe(p),
                    r.peak_after_back.to_string(),
                    r.requests.to_string(),
                    r.retries.to_string(),
                    fmt_recovered(r.recovered_after_s),
                ]
            })
            .collect();
        o.push_str(&crate::simulate::text::table(
            &[
                "policy",
                "peak tick after back",
                "requests",
                "retries",
                "recovered after",
            ],
            &table,
        ));
        o
    }

    fn plot(r: &ProviderOutageReport, root: &Area) -> PlotResult {
        let t = |x: &OutageTick| x.tick as f64 * r.tick_ms / 1000.0;
        let pts = |f: fn(&OutageTick) -> u64| -> Vec<(f64, f64)> {
            r.series.iter().map(|x| (t(x), f(x) as f64)).collect()
        };
        let cap = f64::from(r.capacity_per_tick);
        let end = r.series.last().map_or(1.0, t);
        let mut capacity = Series::new(
            "capacity per tick",
            RGBColor(170, 170, 170),
            vec![(0.0, cap), (end, cap)],
        );
        capacity.width = 4;
        let left = [
            capacity,
            Series::new(
                "requests per tick",
                RGBColor(90, 120, 230),
                pts(|x| x.new + x.retries),
            ),
            Series::new("served", RGBColor(30, 140, 30), pts(|x| x.served)),
            Series::new("failed", RGBColor(200, 30, 30), pts(|x| x.failed)),
        ];
        let right = [Series::new(
            "calls waiting for a retry (right axis)",
            RGBColor(230, 140, 0),
            pts(|x| x.waiting),
        )];
        let axes = Axes {
            title: format!(
                "provider-outage, {}: recovered {}",
                r.policy.name(),
                fmt_recovered(r.recovered_after_s)
            ),
            x_desc: "time (s)",
            y_desc: "requests per tick",
            right: Some("calls waiting"),
        };
        plot::lines(root, &axes, &left, &right)
    }

    fn time_to_recover_s(r: &ProviderOutageReport) -> Option<f64> {
        r.recovered_after_s
    }
}
