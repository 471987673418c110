//! `breaker`: a dependency failing half of 100 calls/s for 5 minutes, behind "open after
//! 5 consecutive failures" or "open when errors exceed 40% over 10 s with at least 100
//! calls, stay open 10 s, then 5 probes that must all succeed". How often each opens and
//! flaps depends on why the calls fail: random errors trip the consecutive breaker every
//! few seconds and leave the rate breaker open almost all the time; when the same callers
//! always fail, the probes are the same callers every time; when the dependency is
//! overloaded, the open time is what lets it recover.

mod model;
pub mod params;

pub use params::{BreakerKind, BreakerParams, ErrorMode};

use super::drill::DrillModel;
use crate::simulate::error::SimError;
use crate::simulate::kernel::rng::SplitMix64;
use crate::simulate::plot::{self, Area, Axes, PlotResult, Series};
use model::{shuffle, Breaker as Machine, Dependency, State};
use plotters::style::RGBColor;
use serde::Serialize;
use std::fmt::Write;

/// One second of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BreakerSecond {
    pub t: u32,
    /// Calls that reached the dependency, and those of them that failed.
    pub passed: u64,
    pub failed: u64,
    /// Calls the breaker refused.
    pub rejected: u64,
    /// Share of the second's calls that found the breaker not closed.
    pub open_share: f64,
    pub degraded: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BreakerReport {
    pub scenario: &'static str,
    pub seed: u64,
    pub errors: ErrorMode,
    pub breaker: BreakerKind,
    pub calls: u64,
    /// Closed -> open.
    pub trips: u32,
    /// Half-open -> open: a probe failed.
    pub reopens: u32,
    /// Half-open -> closed.
    pub closes: u32,
    /// Times it opened again after having closed (closed -> open -> closed -> open...).
    pub flaps: u32,
    pub first_open_s: Option<f64>,
    /// Share of the calls that found the breaker not closed.
    pub open_share: f64,
    pub passed: u64,
    pub failed: u64,
    pub rejected: u64,
    /// Calls that succeeded, of all calls.
    pub success_rate: f64,
    /// Deterministic half: the success rate of the callers whose calls would succeed.
    pub good_callers_success_rate: Option<f64>,
    /// Overload: the dependency is healthy at the end.
    pub dependency_recovered: Option<bool>,
    pub series: Vec<BreakerSecond>,
}

pub fn run(p: &BreakerParams, seed: u64) -> BreakerReport {
    let mut rng = SplitMix64::new(seed);
    let callers = p.callers as usize;
    let mut order: Vec<usize> = (0..callers).collect();
    shuffle(&mut order, &mut rng);
    let mut dep = Dependency::new(p, &mut rng);
    let mut br = Machine::new(p.breaker, p);
    let n = (p.calls_per_s * p.duration.as_secs_f64()).round() as u64;
    let secs = p.duration.as_secs_f64().ceil() as usize;
    let mut series: Vec<BreakerSecond> = (0..secs)
        .map(|t| BreakerSecond {
            t: t as u32,
            ..BreakerSecond::default()
        })
        .collect();
    let mut per_second_calls = vec![0u64; secs];
    let (mut not_closed, mut good_calls, mut good_ok) = (0u64, 0u64, 0u64);
    let mut first_open = None;
    for i in 0..n {
        let now = (i as f64 * 1e6 / p.calls_per_s) as u64;
        dep.tick(now);
        let caller = order[(i % callers as u64) as usize];
        let sec = ((now / 1_000_000) as usize).min(secs - 1);
        let row = &mut series[sec];
        per_second_calls[sec] += 1;
        let allowed = br.allow(now);
        let closed = matches!(br.state, State::Closed);
        let ok = if allowed {
            let failed = dep.call(now, caller, &mut rng);
            br.record(now, failed);
            row.passed += 1;
            row.failed += u64::from(failed);
            !failed
        } else {
            row.rejected += 1;
            false
        };
        if !closed {
            not_closed += 1;
            row.open_share += 1.0;
        }
        if first_open.is_none() && matches!(br.state, State::Open { .. }) {
            first_open = Some(now as f64 / 1e6);
        }
        row.degraded = dep.degraded();
        if p.errors == ErrorMode::DeterministicHalf && !dep.caller_fails(caller) {
            good_calls += 1;
            good_ok += u64::from(ok);
        }
    }
    for (row, &c) in series.iter_mut().zip(&per_second_calls) {
        row.open_share /= c.max(1) as f64;
    }
    let sum = |f: fn(&BreakerSecond) -> u64| series.iter().map(f).sum::<u64>();
    let (passed, failed, rejected) = (sum(|s| s.passed), sum(|s| s.failed), sum(|s| s.rejected));
    BreakerReport {
        scenario: "breaker",
        seed,
        errors: p.errors,
        breaker: p.breaker,
        calls: n,
        trips: br.trips,
        reopens: br.reopens,
        closes: br.closes,
        flaps: br.trips.saturating_sub(1),
        first_open_s: first_open,
        open_share: not_closed as f64 / n.max(1) as f64,
        passed,
        failed,
        rejected,
        success_rate: (passed - failed) as f64 / n.max(1) as f64,
        good_callers_success_rate: (p.errors == ErrorMode::DeterministicHalf)
            .then(|| good_ok as f64 / good_calls.max(1) as f64),
        dependency_recovered: (p.errors == ErrorMode::Overload).then(|| !dep.degraded()),
        series,
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn describe(kind: BreakerKind, p: &BreakerParams) -> String {
    let d = crate::util::duration::format;
    match kind {
        BreakerKind::None => "no breaker".into(),
        BreakerKind::Consecutive => format!(
            "open after {} consecutive failures, {} open, {} probe",
            p.consecutive_failures,
            d(p.open_for),
            p.consecutive_probes
        ),
        BreakerKind::Rate => format!(
            "open at >{:.0}% errors over {} with >={} calls, {} open, {} probes",
            p.rate_threshold * 100.0,
            d(p.window),
            p.min_calls,
            d(p.open_for),
            p.rate_probes
        ),
    }
}

pub fn text(r: &BreakerReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "scenario breaker (seed {}): {} calls, errors {}, breaker {}",
        r.seed,
        r.calls,
        r.errors.name(),
        r.breaker.name()
    );
    let first = r
        .first_open_s
        .map_or("never".into(), |t| format!("first at {t:.2} s"));
    let _ = writeln!(
        o,
        "opens: {} ({first}; {} from closed, {} after a failed probe); closes: {}; flaps: {}",
        r.trips + r.reopens,
        r.trips,
        r.reopens,
        r.closes,
        r.flaps
    );
    let _ = writeln!(
        o,
        "not closed for {} of the calls; {} reached the dependency ({} of them failed), {} refused by the breaker",
        pct(r.open_share),
        r.passed,
        r.failed,
        r.rejected
    );
    let _ = writeln!(o, "calls that succeeded: {}", pct(r.success_rate));
    if let Some(g) = r.good_callers_success_rate {
        let _ = writeln!(
            o,
            "calls from the callers that do not fail: {} succeeded (the breaker refuses them with the others)",
            pct(g)
        );
    }
    if let Some(rec) = r.dependency_recovered {
        let _ = writeln!(
            o,
            "dependency at the end: {}",
            if rec { "recovered" } else { "still overloaded" }
        );
    }
    let window = (r.series.len() / 30).max(1);
    let rows: Vec<Vec<String>> = r
        .series
        .chunks(window)
        .map(|c| {
            let sum = |f: fn(&BreakerSecond) -> u64| c.iter().map(f).sum::<u64>();
            let share = c.iter().map(|s| s.open_share).sum::<f64>() / c.len() as f64;
            vec![
                c[0].t.to_string(),
                sum(|s| s.passed).to_string(),
                sum(|s| s.failed).to_string(),
                sum(|s| s.rejected).to_string(),
                pct(share),
                if c.iter().any(|s| s.degraded) {
                    "overloaded".into()
                } else {
                    "-".into()
                },
            ]
        })
        .collect();
    o.push_str(&crate::simulate::text::table(
        &[
            "t(s)",
            "passed",
            "failed",
            "refused",
            "not closed",
            "dependency",
        ],
        &rows,
    ));
    let _ = writeln!(o, "(rows of {window} s)");
    o
}

pub struct Breaker;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BreakerRow {
    pub errors: ErrorMode,
    pub breaker: BreakerKind,
    pub change: String,
    pub opens: u32,
    pub trips: u32,
    pub closes: u32,
    pub flaps: u32,
    pub open_share: f64,
    pub success_rate: f64,
    pub good_callers_success_rate: Option<f64>,
    pub dependency_recovered: Option<bool>,
}

impl DrillModel for Breaker {
    const NAME: &'static str = "breaker";
    type Params = BreakerParams;
    type Report = BreakerReport;
    type Row = BreakerRow;

    fn validate(p: &BreakerParams) -> Result<(), SimError> {
        p.validate()
    }

    fn run(p: &BreakerParams, seed: u64) -> BreakerReport {
        run(p, seed)
    }

    fn text(r: &BreakerReport) -> String {
        text(r)
    }

    fn compare(p: &BreakerParams, seed: u64) -> Vec<BreakerRow> {
        let mut rows = Vec::new();
        for errors in ErrorMode::ALL {
            for breaker in BreakerKind::ALL {
                let r = run(
                    &BreakerParams {
                        errors,
                        breaker,
                        ..p.clone()
                    },
                    seed,
                );
                rows.push(BreakerRow {
                    errors,
                    breaker,
                    change: format!("errors={} breaker={}", errors.name(), breaker.name()),
                    opens: r.trips + r.reopens,
                    trips: r.trips,
                    closes: r.closes,
                    flaps: r.flaps,
                    open_share: r.open_share,
                    success_rate: r.success_rate,
                    good_callers_success_rate: r.good_callers_success_rate,
                    dependency_recovered: r.dependency_recovered,
                });
            }
        }
        rows
    }

    fn compare_text(p: &BreakerParams, seed: u64, rows: &[BreakerRow]) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "scenario breaker (seed {seed}): {} calls/s for {}, {:.0}% errors",
            p.calls_per_s,
            crate::util::duration::format(p.duration),
            p.error_rate * 100.0
        );
        for kind in [BreakerKind::Consecutive, BreakerKind::Rate] {
            let _ = writeln!(o, "{}: {}", kind.name(), describe(kind, p));
        }
        let table: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                vec![
                    r.errors.name().to_string(),
                    r.breaker.name().to_string(),
                    r.opens.to_string(),
                    r.closes.to_string(),
                    r.flaps.to_string(),
                    pct(r.open_share),
                    pct(r.success_rate),
                    r.good_callers_success_rate.map_or("-".into(), pct),
                    r.dependency_recovered.map_or("-".into(), |b| {
                        if b { "recovered" } else { "overloaded" }.into()
                    }),
                ]
            })
            .collect();
        o.push_str(&crate::simulate::text::table(
            &[
                "errors",
                "breaker",
                "opens",
                "closes",
                "flaps",
                "not closed",
                "succeeded",
                "good callers",
                "dependency",
            ],
            &table,
        ));
        o.push_str("(opens: trips from closed + re-opens after a failed probe; flaps: trips after the first, each one after a close)\n");
        o
    }

    fn plot(r: &BreakerReport, root: &Area) -> PlotResult {
        let pts = |f: fn(&BreakerSecond) -> f64| -> Vec<(f64, f64)> {
            r.series.iter().map(|s| (f64::from(s.t), f(s))).collect()
        };
        let left = [
            Series::new(
                "calls passed/s",
                RGBColor(90, 120, 230),
                pts(|s| s.passed as f64),
            ),
            Series::new("failed/s", RGBColor(200, 30, 30), pts(|s| s.failed as f64)),
            Series::new(
                "refused by the breaker/s",
                RGBColor(170, 170, 170),
                pts(|s| s.rejected as f64),
            ),
        ];
        let right = [Series::new(
            "breaker not closed (share, right axis)",
            RGBColor(230, 140, 0),
            pts(|s| s.open_share),
        )];
        let axes = Axes {
            title: format!(
                "breaker {}, errors {}: opened {} times",
                r.breaker.name(),
                r.errors.name(),
                r.trips + r.reopens
            ),
            x_desc: "time (s)",
            y_desc: "calls per second",
            right: Some("share of the second not closed"),
        };
        plot::lines(root, &axes, &left, &right)
    }
}
