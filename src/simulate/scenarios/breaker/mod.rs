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

use crate::simulate::kernel::arrivals::{Arrivals, Stream};
use crate::simulate::kernel::record::Series as Rows;
use crate::simulate::kernel::rng::SplitMix64;
use crate::simulate::model::{Alternative, Figure, Model, Outcome, Unit};
use crate::simulate::plot::{Chart, Series};
use crate::simulate::text::{self, pct};
use model::{Breaker as Machine, Dependency, State};
use plotters::style::RGBColor;
use serde::Serialize;
use std::fmt::Write;

/// The columns of the second-by-second table.
const COLUMNS: [&str; 6] = [
    "t(s)",
    "passed",
    "failed",
    "refused",
    "not closed",
    "dependency",
];

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
    /// What it ran with.
    pub params: BreakerParams,
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

/// How often it opened, closed and flapped, and what got through; second by second.
impl Outcome for BreakerReport {
    fn what(&self) -> String {
        let (e, b) = (self.params.errors.name(), self.params.breaker.name());
        format!("{} calls, errors {e}, breaker {b}", self.calls)
    }

    fn text(&self) -> String {
        let mut o = String::new();
        let first = self
            .first_open_s
            .map_or("never".into(), |t| format!("first at {t:.2} s"));
        let _ = writeln!(
            o,
            "opens: {} ({first}; {} from closed, {} after a failed probe); closes: {}; flaps: {}",
            self.trips + self.reopens,
            self.trips,
            self.reopens,
            self.closes,
            self.flaps
        );
        let _ = writeln!(
        o,
        "not closed for {} of the calls; {} reached the dependency ({} of them failed), {} refused by the breaker",
        pct(self.open_share),
        self.passed,
        self.failed,
        self.rejected
    );
        let _ = writeln!(o, "calls that succeeded: {}", pct(self.success_rate));
        if let Some(g) = self.good_callers_success_rate {
            let _ = writeln!(
            o,
            "calls from the callers that do not fail: {} succeeded (the breaker refuses them with the others)",
            pct(g)
        );
        }
        if let Some(rec) = self.dependency_recovered {
            let _ = writeln!(
                o,
                "dependency at the end: {}",
                if rec { "recovered" } else { "still overloaded" }
            );
        }
        let row = |c: &[BreakerSecond]| {
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
        };
        o.push_str(&text::windowed_table(&self.series, &COLUMNS, row, |w| {
            format!("rows of {w} s")
        }));
        o
    }

    fn chart(&self) -> Chart {
        let pts = |f: fn(&BreakerSecond) -> f64| -> Vec<(f64, f64)> {
            self.series.iter().map(|s| (f64::from(s.t), f(s))).collect()
        };
        let left = vec![
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
        Chart::new(
            format!(
                "breaker {}, errors {}: opened {} times",
                self.params.breaker.name(),
                self.params.errors.name(),
                self.trips + self.reopens
            ),
            "time (s)",
            "calls per second",
            left,
        )
        .with_right_line(
            "share of the second not closed",
            "breaker not closed, share",
            pts(|s| s.open_share),
        )
    }

    fn figures(&self) -> Vec<Figure> {
        vec![
            Figure::count("opens", "opens", u64::from(self.trips + self.reopens)),
            Figure::count("closes", "closes", u64::from(self.closes)),
            Figure::count("flaps", "flaps", u64::from(self.flaps)),
            Figure::share("open_share", "not closed", self.open_share),
            Figure::share("success_rate", "succeeded", self.success_rate),
            Figure::new(
                "good_callers_success_rate",
                "good callers",
                Unit::Percent,
                self.good_callers_success_rate,
            ),
            Figure::new(
                "dependency_recovered",
                "dependency",
                Unit::Flag("recovered", "overloaded"),
                self.dependency_recovered.map(|b| if b { 1.0 } else { 0.0 }),
            ),
        ]
    }
}

impl Model for BreakerParams {
    type Report = BreakerReport;

    fn run(&self, seed: u64) -> BreakerReport {
        let mut rng = SplitMix64::new(seed);
        let callers = self.callers as usize;
        let mut order: Vec<usize> = (0..callers).collect();
        rng.shuffle(&mut order);
        let mut dep = Dependency::new(self, &mut rng);
        let mut br = Machine::new(self.breaker, self);
        let n = (self.calls_per_s * self.duration.as_secs_f64()).round() as u64;
        let secs = self.duration.as_secs_f64().ceil() as usize;
        let mut rows: Rows<BreakerSecond> = Rows::new(1_000_000, secs);
        let mut per_second_calls: Rows<u64> = Rows::new(1_000_000, secs);
        let mut arrivals = Stream::new(Arrivals::Paced, self.calls_per_s);
        let (mut not_closed, mut good_calls, mut good_ok) = (0u64, 0u64, 0u64);
        let mut first_open = None;
        for i in 0..n {
            let now = arrivals.next(&mut rng);
            dep.tick(now);
            let caller = order[(i % callers as u64) as usize];
            *per_second_calls.at(now) += 1;
            let row = rows.at(now);
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
            if self.errors == ErrorMode::DeterministicHalf && !dep.caller_fails(caller) {
                good_calls += 1;
                good_ok += u64::from(ok);
            }
        }
        let mut series = rows.into_rows();
        for (t, row) in series.iter_mut().enumerate() {
            row.t = t as u32;
        }
        for (row, &c) in series.iter_mut().zip(per_second_calls.rows()) {
            row.open_share /= c.max(1) as f64;
        }
        let sum = |f: fn(&BreakerSecond) -> u64| series.iter().map(f).sum::<u64>();
        let (passed, failed, rejected) =
            (sum(|s| s.passed), sum(|s| s.failed), sum(|s| s.rejected));
        BreakerReport {
            params: self.clone(),
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
            good_callers_success_rate: (self.errors == ErrorMode::DeterministicHalf)
                .then(|| good_ok as f64 / good_calls.max(1) as f64),
            dependency_recovered: (self.errors == ErrorMode::Overload).then(|| !dep.degraded()),
            series,
        }
    }

    /// Each kind of error, behind each breaker.
    fn alternatives(&self) -> Vec<Alternative<Self>> {
        let mut out = Vec::new();
        for errors in ErrorMode::ALL {
            for breaker in BreakerKind::ALL {
                out.push(Alternative::new(
                    format!("{} errors, breaker {}", errors.name(), breaker.name()),
                    format!("errors={} breaker={}", errors.name(), breaker.name()),
                    BreakerParams {
                        errors,
                        breaker,
                        ..self.clone()
                    },
                ));
            }
        }
        out
    }

    fn compare_heading(&self) -> String {
        let mut o = format!(
            "scenario breaker: {} calls/s for {}, {:.0}% errors",
            self.calls_per_s,
            crate::util::duration::format(self.duration),
            self.error_rate * 100.0
        );
        for kind in [BreakerKind::Consecutive, BreakerKind::Rate] {
            let _ = write!(o, "\n{}: {}", kind.name(), describe(kind, self));
        }
        o.push_str("\nopens: trips from closed + re-opens after a failed probe; flaps: trips after the first, each one after a close");
        o
    }
}
