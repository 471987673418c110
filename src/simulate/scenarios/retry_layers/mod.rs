//! `retry-layers`: retries stacked over three layers. The app retries its call to the API
//! up to 2 times, the API retries its call to the downstream up to 3 times, and the
//! downstream retries its store up to 3 times; 3,000 requests/s enter at the top. Each
//! layer multiplies what the one above sends when calls fail: with the store down, one
//! request becomes 3 x 4 x 4 = 48 store calls. A retry budget per layer (a token bucket:
//! every success adds 0.1 token, every retry costs 1) caps the extra load at about 10%.
//! And time: with a 400 ms deadline, a 250 ms first-attempt timeout and a 100 ms wait,
//! the first retry starts at 350 ms and the rest start after the caller has left.
//!
//! The calls are drawn one by one (seeded) for `seconds` of traffic, so the budget's
//! state carries from call to call as it does in a running service; the store fails each
//! call with probability `failure_rate` (the layers above fail only through it). Each
//! layer has one bucket for all its instances, holding at most `budget_tokens` and full at
//! the start.

mod model;
pub mod params;

pub use model::{deadline, loads, run, AttemptTiming, Loads, RetryLayersReport};
pub use params::RetryLayersParams;

use super::drill::DrillModel;
use crate::simulate::error::SimError;
use crate::simulate::plot::{Area, PlotResult};
use plotters::prelude::*;
use serde::Serialize;
use std::fmt::Write;

/// The four layers, top first; the store only receives.
pub const LAYERS: [&str; 4] = ["app", "API", "downstream", "store"];

fn condition(failure_rate: f64, budget: Option<f64>) -> String {
    let f = if failure_rate >= 1.0 {
        "everything failing".to_string()
    } else if failure_rate <= 0.0 {
        "nothing failing".to_string()
    } else {
        format!("{:.0}% of store calls failing", failure_rate * 100.0)
    };
    match budget {
        Some(b) => format!("{f}, retry budget {:.0}% per layer", b * 100.0),
        None => f,
    }
}

pub fn text(r: &RetryLayersReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "scenario retry-layers (seed {}): {} req/s into the app; retries: app {}, API {}, downstream {}; {}",
        r.seed,
        r.rate_per_s,
        r.retries[0],
        r.retries[1],
        r.retries[2],
        condition(r.failure_rate, r.retry_budget)
    );
    let rows: Vec<Vec<String>> = LAYERS
        .iter()
        .enumerate()
        .map(|(i, n)| {
            vec![
                n.to_string(),
                format!("{:.0}", r.loads.per_s[i]),
                format!("{:.2}x", r.loads.per_s[i] / r.rate_per_s),
                format!("{:.0}", r.worst_case_per_s[i]),
            ]
        })
        .collect();
    o.push_str(&crate::simulate::text::table(
        &["layer", "calls/s", "x the top", "if all fail, no budget"],
        &rows,
    ));
    let _ = writeln!(
        o,
        "store calls per request: {:.2}; requests that succeed: {:.1}%",
        r.loads.amplification,
        r.loads.success * 100.0
    );
    let _ = writeln!(
        o,
        "deadline {} ms, first attempt times out at {} ms, retry waits {} ms, an answer takes {} ms:",
        r.deadline_ms, r.attempt_timeout_ms, r.retry_wait_ms, r.answer_latency_ms
    );
    for a in &r.attempts {
        let verdict = if a.left_ms <= 0.0 {
            "starts after the deadline: work for nobody".to_string()
        } else if a.fits {
            format!("{:.0} ms left: fits", a.left_ms)
        } else {
            format!(
                "{:.0} ms left, less than the {} ms an answer takes: cannot finish",
                a.left_ms, r.answer_latency_ms
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
        if r.retries_fit { "yes" } else { "no" }
    );
    let _ = writeln!(
        o,
        "(below the app, each layer waits {} ms per attempt too: its retries start at {} ms, after the caller above gave up at {} ms)",
        r.attempt_timeout_ms,
        r.attempt_timeout_ms + r.retry_wait_ms,
        r.attempt_timeout_ms
    );
    o
}

pub struct RetryLayers;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetryLayersRow {
    pub condition: String,
    pub change: String,
    pub per_s: [f64; 4],
    pub amplification: f64,
    pub success: f64,
}

/// The conditions compared: (failure rate, budget).
fn conditions(p: &RetryLayersParams) -> Vec<(f64, Option<f64>)> {
    let budget = Some(p.retry_budget.unwrap_or(0.1));
    vec![
        (0.0, None),
        (1.0, None),
        (0.5, None),
        (1.0, budget),
        (0.5, budget),
    ]
}

impl DrillModel for RetryLayers {
    const NAME: &'static str = "retry-layers";
    type Params = RetryLayersParams;
    type Report = RetryLayersReport;
    type Row = RetryLayersRow;

    fn validate(p: &RetryLayersParams) -> Result<(), SimError> {
        p.validate()
    }

    fn run(p: &RetryLayersParams, seed: u64) -> RetryLayersReport {
        run(p, seed)
    }

    fn text(r: &RetryLayersReport) -> String {
        text(r)
    }

    fn compare(p: &RetryLayersParams, seed: u64) -> Vec<RetryLayersRow> {
        conditions(p)
            .into_iter()
            .map(|(failure_rate, retry_budget)| {
                let q = RetryLayersParams {
                    failure_rate,
                    retry_budget,
                    ..p.clone()
                };
                let l = loads(&q, seed);
                let budget = retry_budget.map_or("null".into(), |b| b.to_string());
                RetryLayersRow {
                    condition: condition(failure_rate, retry_budget),
                    change: format!("failure_rate={failure_rate} retry_budget={budget}"),
                    per_s: l.per_s,
                    amplification: l.amplification,
                    success: l.success,
                }
            })
            .collect()
    }

    fn compare_text(p: &RetryLayersParams, seed: u64, rows: &[RetryLayersRow]) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "scenario retry-layers (seed {seed}): calls per second received by each layer, {} req/s into the app",
            p.rate_per_s
        );
        let table: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                let mut v = vec![r.condition.clone()];
                v.extend(r.per_s.iter().map(|x| format!("{x:.0}")));
                v.push(format!("{:.2}", r.amplification));
                v.push(format!("{:.1}%", r.success * 100.0));
                v
            })
            .collect();
        o.push_str(&crate::simulate::text::table(
            &[
                "condition",
                "app",
                "API",
                "downstream",
                "store",
                "store/request",
                "succeed",
            ],
            &table,
        ));
        o
    }

    fn plot(r: &RetryLayersReport, root: &Area) -> PlotResult {
        root.fill(&WHITE)?;
        let y_max = r
            .worst_case_per_s
            .iter()
            .chain(r.loads.per_s.iter())
            .fold(1.0f64, |a, &b| a.max(b))
            * 2.0;
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!(
                    "retry-layers: {}",
                    condition(r.failure_rate, r.retry_budget)
                ),
                ("sans-serif", 22),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5f64..3.5f64, (1.0f64..y_max).log_scale())?;
        chart
            .configure_mesh()
            .x_labels(4)
            .x_label_formatter(&|x| {
                LAYERS
                    .get(x.round().max(0.0) as usize)
                    .map_or(String::new(), |s| s.to_string())
            })
            .y_desc("calls per second (log scale)")
            .draw()?;
        let bars = [
            ("this run", RGBColor(90, 120, 230), r.loads.per_s, -0.2),
            (
                "everything failing, no budget",
                RGBColor(200, 30, 30),
                r.worst_case_per_s,
                0.2,
            ),
        ];
        for (label, color, values, dx) in bars {
            chart
                .draw_series(values.iter().enumerate().map(|(i, &v)| {
                    let x = i as f64 + dx;
                    Rectangle::new([(x - 0.18, 1.0), (x + 0.18, v.max(1.0))], color.filled())
                }))?
                .label(label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 15, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }
}
