//! `retry-layers`: retries stacked over three layers. The app retries its call to the API
//! up to 2 times, the API retries its call to the downstream up to 3 times, and the
//! downstream retries its store up to 3 times; 3,000 requests/s enter at the top. Each
//! layer multiplies what the one above sends when calls fail: with the store down, one
//! request becomes 3 x 4 x 4 = 48 store calls. A retry budget per layer (a token bucket:
//! every success adds 0.1 token, every retry costs 1) caps the extra load at about 10%.
//! And time: with a 400 ms deadline, a 250 ms first-attempt timeout and a 100 ms wait,
//! the first retry starts at 350 ms and the rest start after the caller has left.
//!
//! Why the store fails is a parameter: a fixed share of its calls, or overload: a queue
//! worked through in order at the store's capacity, where a call answered after its
//! caller's timeout has failed but was worked on all the same. Then a one-second stall is
//! enough: the retries it sets off are a queue that keeps every answer late after the
//! stall is over, and the retries of those late answers keep the queue growing, until a
//! retry budget takes the amplification away.

mod model;
pub mod params;

pub use model::{deadline, loads, AttemptTiming, LayerSecond, Loads};
pub use params::{Failures, RetryLayersParams};

use crate::simulate::model::{Alternative, Figure, Model, Outcome, Unit};
use crate::simulate::plot::{Chart, Series};
use crate::simulate::text;
use plotters::style::RGBColor;
use serde::Serialize;
use std::fmt::Write;

/// The four layers, top first; the store only receives.
pub const LAYERS: [&str; 4] = ["app", "API", "downstream", "store"];

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetryLayersReport {
    /// What it ran with.
    pub params: RetryLayersParams,
    pub condition: String,
    pub loads: Loads,
    /// Calls per second per layer if every attempt failed and nothing limited retries:
    /// the product of the attempts above it.
    pub worst_case_per_s: [f64; 4],
    /// Share of the store's calls that failed in the last second of the run.
    pub store_failing_at_end: f64,
    /// Overloaded store: seconds from the end of the trigger until the store stopped
    /// failing for the rest of the run; none if it was still failing in the last second.
    pub storm_over_after_s: Option<f64>,
    pub attempts: Vec<AttemptTiming>,
    /// A retry can be answered inside the deadline.
    pub retries_fit: bool,
    pub series: Vec<LayerSecond>,
}

fn condition(p: &RetryLayersParams) -> String {
    let f = match p.failures {
        Failures::Load => format!(
            "store queueing at {:.0} calls/s, stalled {} s..{} s",
            p.store_capacity_per_s,
            p.trigger_from.as_secs_f64(),
            p.trigger_to.as_secs_f64()
        ),
        Failures::Fixed if p.failure_rate >= 1.0 => "everything failing".to_string(),
        Failures::Fixed if p.failure_rate <= 0.0 => "nothing failing".to_string(),
        Failures::Fixed => format!("{:.0}% of store calls failing", p.failure_rate * 100.0),
    };
    match p.retry_budget {
        Some(b) => format!("{f}, retry budget {:.0}% per layer", b * 100.0),
        None => f,
    }
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn share(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// The load on each layer, what got through, the storm second by second when the store
/// is overloaded, and the deadline arithmetic.
impl Outcome for RetryLayersReport {
    fn what(&self) -> String {
        format!(
            "{} req/s into the app; retries: app {}, API {}, downstream {}; {}",
            self.params.rate_per_s,
            self.params.app_retries,
            self.params.api_retries,
            self.params.downstream_retries,
            self.condition,
        )
    }

    fn text(&self) -> String {
        let mut o = String::new();
        let rows: Vec<Vec<String>> = LAYERS
            .iter()
            .enumerate()
            .map(|(i, n)| {
                vec![
                    n.to_string(),
                    format!("{:.0}", self.loads.per_s[i]),
                    format!("{:.2}x", self.loads.per_s[i] / self.params.rate_per_s),
                    format!("{:.0}", self.worst_case_per_s[i]),
                ]
            })
            .collect();
        o.push_str(&text::table(
            &["layer", "calls/s", "x the top", "if all fail, no budget"],
            &rows,
        ));
        let _ = writeln!(
            o,
            "store calls per request: {:.2}; requests that succeed: {}",
            self.loads.amplification,
            text::pct(self.loads.success)
        );
        if self.params.failures == Failures::Load {
            let over = self.storm_over_after_s.map_or(
                "no: the retries keep it failing after the trigger, to the end of the run".into(),
                |s| format!("{s:.0} s after the trigger ended"),
            );
            let _ = writeln!(
                o,
                "store calls failing in the last second: {}; the storm is over: {over}",
                text::pct(self.store_failing_at_end)
            );
            let rows: Vec<Vec<String>> = self
                .series
                .iter()
                .map(|s| {
                    let mut v = vec![s.t.to_string()];
                    v.extend(s.received.iter().map(u64::to_string));
                    v.push(text::pct(share(s.store_failed, s.received[3])));
                    v.push(text::pct(share(s.succeeded, s.requests)));
                    v
                })
                .collect();
            o.push_str(&text::table(
                &[
                    "t(s)",
                    "app",
                    "API",
                    "downstream",
                    "store",
                    "store failing",
                    "succeed",
                ],
                &rows,
            ));
        }
        let _ = writeln!(
        o,
        "deadline {} ms, first attempt times out at {} ms, retry waits {} ms, an answer takes {} ms:",
        ms(self.params.deadline), ms(self.params.attempt_timeout), ms(self.params.retry_wait), ms(self.params.answer_latency)
    );
        for a in &self.attempts {
            let verdict = if a.left_ms <= 0.0 {
                "starts after the deadline: work for nobody".to_string()
            } else if a.fits {
                format!("{:.0} ms left: fits", a.left_ms)
            } else {
                format!(
                    "{:.0} ms left, less than the {} ms an answer takes: cannot finish",
                    a.left_ms,
                    ms(self.params.answer_latency)
                )
            };
            let _ = writeln!(
                o,
                "  app attempt {} starts at {:.0} ms: {verdict}",
                a.attempt, a.starts_ms
            );
        }
        let _ = writeln!(
            o,
            "retries fit inside the deadline: {}",
            if self.retries_fit { "yes" } else { "no" }
        );
        let _ = writeln!(
        o,
        "(below the app, each layer waits {} ms per attempt too: its retries start at {} ms, after the caller above gave up at {} ms)",
        ms(self.params.attempt_timeout),
        ms(self.params.attempt_timeout) + ms(self.params.retry_wait),
        ms(self.params.attempt_timeout)
    );
        o
    }

    fn chart(&self) -> Chart {
        let colors = [
            RGBColor(90, 120, 230),
            RGBColor(30, 140, 30),
            RGBColor(230, 140, 0),
            RGBColor(200, 30, 30),
        ];
        let left: Vec<Series> = LAYERS
            .iter()
            .zip(colors)
            .enumerate()
            .map(|(i, (name, color))| {
                let pts = self
                    .series
                    .iter()
                    .map(|s| (f64::from(s.t), s.received[i] as f64))
                    .collect();
                Series::new(format!("{name} calls/s"), color, pts)
            })
            .collect();
        let title = format!("retry-layers: {}", self.condition);
        Chart::new(title, "time (s)", "calls per second", left)
    }

    fn figures(&self) -> Vec<Figure> {
        let mut f: Vec<Figure> = LAYERS
            .iter()
            .enumerate()
            .map(|(i, name)| {
                Figure::new(
                    ["app", "api", "downstream", "store"][i],
                    *name,
                    Unit::Count,
                    Some(self.loads.per_s[i]),
                )
            })
            .collect();
        f.push(Figure::new(
            "store_per_request",
            "store/request",
            Unit::Ratio,
            Some(self.loads.amplification),
        ));
        f.push(Figure::share("succeed", "succeed", self.loads.success));
        f.push(Figure::share(
            "store_failing_at_end",
            "store failing at the end",
            self.store_failing_at_end,
        ));
        let over = Figure::new(
            "storm_over_after_s",
            "storm over after",
            Unit::Seconds,
            self.storm_over_after_s,
        );
        f.push(match self.params.failures {
            Failures::Load => over,
            Failures::Fixed => over.none_reads("-"),
        });
        f
    }
}

impl Model for RetryLayersParams {
    type Report = RetryLayersReport;

    fn run(&self, seed: u64) -> RetryLayersReport {
        let series = model::seconds(self, seed);
        let tries = [
            self.app_retries + 1,
            self.api_retries + 1,
            self.downstream_retries + 1,
        ]
        .map(f64::from);
        let attempts = deadline(self);
        let last = series.last().cloned().unwrap_or_default();
        let storm_over_after_s = (self.failures == Failures::Load)
            .then(|| {
                let bad = series.iter().rposition(|s| s.store_failed > 0);
                match bad {
                    Some(i) if i + 1 == series.len() => None,
                    Some(i) => Some((i as f64 + 1.0 - self.trigger_to.as_secs_f64()).max(0.0)),
                    None => Some(0.0),
                }
            })
            .flatten();
        RetryLayersReport {
            params: self.clone(),
            condition: condition(self),
            loads: model::loads_of(self, &series),
            worst_case_per_s: [
                self.rate_per_s,
                self.rate_per_s * tries[0],
                self.rate_per_s * tries[0] * tries[1],
                self.rate_per_s * tries[0] * tries[1] * tries[2],
            ],
            store_failing_at_end: share(last.store_failed, last.received[3]),
            storm_over_after_s,
            retries_fit: attempts.iter().skip(1).any(|a| a.fits),
            attempts,
            series,
        }
    }

    /// Nothing, everything and half failing, an overloaded store; the failing ones again
    /// with a retry budget per layer.
    fn alternatives(&self) -> Vec<Alternative<Self>> {
        let budget = Some(self.retry_budget.unwrap_or(0.1));
        let fixed = |rate: f64| (Failures::Fixed, rate);
        let load = (Failures::Load, self.failure_rate);
        [
            (fixed(0.0), None),
            (fixed(1.0), None),
            (fixed(0.5), None),
            (load, None),
            (fixed(1.0), budget),
            (fixed(0.5), budget),
            (load, budget),
        ]
        .into_iter()
        .map(|((failures, failure_rate), retry_budget)| {
            let q = RetryLayersParams {
                failures,
                failure_rate,
                retry_budget,
                ..self.clone()
            };
            let b = retry_budget.map_or("null".into(), |b| b.to_string());
            let change = match failures {
                Failures::Fixed => format!("failure_rate={failure_rate} retry_budget={b}"),
                Failures::Load => format!("failures=load retry_budget={b}"),
            };
            Alternative::new(condition(&q), change, q)
        })
        .collect()
    }

    fn compare_heading(&self) -> String {
        format!(
            "scenario retry-layers: calls per second received by each layer, {} req/s into the app",
            self.rate_per_s
        )
    }
}
