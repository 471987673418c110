//! `config-deploy`: the worked example, a continuous-time model of the demo system. 500
//! workers poll a config service every 30 s; it does 200 req/s without shedding; clients
//! time out after 2 s and retry after 1 s, forever, without jitter; a deploy takes it down
//! for 20 s. With overload factor 4 it stays stuck; with shedding, or with overload factor
//! 1, it recovers by itself. With a plan, the runbook's procedure runs at `plan_at`.
//!
//! The parts mirror the real components: [`clients`] (the demo workers), [`gate`],
//! [`server`] (the config service), [`procedure`] (a plan's recovery), wired tick by tick
//! in [`engine`] on the kernel's clock.

pub mod check;
pub mod clients;
mod engine;
pub mod from_plan;
pub mod gate;
pub mod params;
pub mod procedure;
pub mod readmission;
pub mod report;
pub mod server;
mod settled;
#[cfg(test)]
mod warm_tests;

use crate::plan::Plan;
use crate::retry::RetryKind;
use crate::simulate::error::SimError;
use crate::simulate::model::{Alternative, Figure, Model, Outcome, Unit};
use crate::simulate::plot::{Chart, Series};
use crate::simulate::text;
use crate::util::duration;
use params::SystemParams;
use plotters::style::{RGBColor, GREEN, MAGENTA, RED};
use report::{Second, SystemReport};
use std::fmt::Write;

/// How a recovery reads in the comparison.
const RECOVERS: (&str, &str) = ("recovers", "stuck");

/// A file's `plan:`: its rates must be numbers the gate can hold.
pub fn take_plan(p: &mut SystemParams, plan: Plan) -> Result<(), String> {
    let mut rates = std::iter::once(plan.admit_rate).chain(plan.ramp.iter().map(|s| s.rate_per_s));
    if rates.any(|r| !(r.is_finite() && r >= 0.0)) {
        return Err("admit_rate and ramp rate_per_s must be finite and 0 or more".into());
    }
    p.plan = Some(plan);
    Ok(())
}

/// The columns of the second-by-second table.
const COLUMNS: [&str; 11] = [
    "t(s)",
    "arrive/s",
    "retry/s",
    "useful/s",
    "wasted/s",
    "timeout/s",
    "reject/s",
    "queue",
    "in retry",
    "capacity",
    "gate",
];

/// A condensed table of the run (one row per window so 300 s fit on a screen) and the
/// summary lines; the chart: arrivals, goodput, wasted work, rejections and capacity per
/// second, the queue on the right axis. A stuck overload is easiest to see as a picture:
/// arrivals staying high while goodput stays near zero.
impl Outcome for SystemReport {
    fn what(&self) -> String {
        String::new()
    }

    fn text(&self) -> String {
        let mut o = String::new();
        let row = |chunk: &[Second]| {
            let n = chunk.len() as f64;
            let avg = |f: fn(&Second) -> u64| {
                format!("{:.0}", chunk.iter().map(f).sum::<u64>() as f64 / n)
            };
            let last = &chunk[chunk.len() - 1];
            vec![
                chunk[0].t.to_string(),
                avg(|s| s.arriving),
                avg(|s| s.retries),
                avg(|s| s.useful),
                avg(|s| s.abandoned),
                avg(|s| s.timeouts),
                avg(|s| s.rejected),
                last.queue.to_string(),
                last.in_retry.to_string(),
                format!("{:.0}", last.capacity),
                last.gate_rate
                    .map_or("open".to_string(), |g| format!("{g:.0}")),
            ]
        };
        o.push_str(&text::windowed_table(&self.series, &COLUMNS, row, |w| {
            format!("rows average {w} s; queue, in retry, capacity and gate at the row's end")
        }));
        let _ = writeln!(o, "peak calls in a second: {}", self.recovery.peak_calls);
        let t = &self.totals;
        let _ = writeln!(
        o,
        "polls: {} started, {} served, {} given up, {} pending; {} attempts, {} served after the client left",
        t.calls, t.served, t.given_up, t.pending, t.attempts, t.abandoned_work
    );
        let reference = self.reference.replace('_', " ");
        let _ = writeln!(
            o,
            "settled (first clean second) after {reference}: {}",
            text::opt_s(self.recovery.settled_s)
        );
        if self.recovery.recovered {
            let _ = writeln!(
                o,
                "recovered: yes, {} after {reference}",
                text::opt_s(self.recovery.time_to_recover_s)
            );
        } else {
            let _ = writeln!(o, "recovered: no (still failing at the end of the run)");
        }
        if self.reference == "plan_start" {
            let _ = writeln!(o, "relapses during the ramp: {}", self.relapses);
        }
        o
    }

    fn chart(&self) -> Chart {
        let pts = |f: fn(&Second) -> f64| -> Vec<(f64, f64)> {
            self.series.iter().map(|s| (f64::from(s.t), f(s))).collect()
        };
        let title = match (self.recovery.recovered, self.recovery.time_to_recover_s) {
            (true, Some(t)) => format!(
                "{}: recovers {t} s after {}",
                params::NAME,
                self.reference.replace('_', " ")
            ),
            _ => format!("{}: stays stuck", params::NAME),
        };
        // Drawn back to front: the wide grey capacity line stays visible under the wasted
        // work that, in a stuck state, uses all of it.
        let left = vec![
            Series::new(
                "capacity (useful/s)",
                RGBColor(170, 170, 170),
                pts(|s| s.capacity),
            )
            .width(5),
            Series::new(
                "arriving/s (retries come in waves)",
                RGBColor(90, 120, 230),
                pts(|s| s.arriving as f64),
            )
            .width(1),
            Series::new("rejected/s", MAGENTA, pts(|s| s.rejected as f64)),
            Series::new(
                "wasted/s (served after timeout)",
                RED,
                pts(|s| s.abandoned as f64),
            ),
            Series::new("useful/s", GREEN, pts(|s| s.useful as f64)),
        ];
        let right = vec![Series::new(
            "queue depth (right axis)",
            RGBColor(230, 140, 0),
            pts(|s| s.queue as f64),
        )
        .width(1)];
        Chart::new(title, "time (s)", "requests per second", left).with_right("queue depth", right)
    }

    fn time_to_recover_s(&self) -> Option<f64> {
        self.recovery.time_to_recover_s
    }

    fn attempts(&self) -> Option<u64> {
        Some(self.totals.attempts)
    }

    fn figures(&self) -> Vec<Figure> {
        vec![
            Figure::flag("recovered", "from start", RECOVERS, self.recovery.recovered),
            Figure::new(
                "time_to_recover_s",
                "recovery",
                Unit::Seconds,
                self.recovery.time_to_recover_s,
            ),
            Figure::count("peak_calls", "peak", self.recovery.peak_calls),
            Figure::count("given_up", "given up", self.recovery.given_up),
            Figure::count("wasted", "wasted", self.totals.abandoned_work),
        ]
    }
}

impl Model for SystemParams {
    type Report = SystemReport;

    fn run(&self, seed: u64) -> SystemReport {
        engine::run(self, seed)
    }

    fn set_retry(&mut self, kind: RetryKind) -> Result<(), SimError> {
        self.set_retry(kind);
        Ok(())
    }

    fn take_plan(&mut self, plan: Plan) -> Result<(), String> {
        take_plan(self, plan)
    }

    /// The baseline and each change on its own: client timeout, retry delay, jitter,
    /// backoff, a retry budget, load shedding, a cheaper overload.
    fn alternatives(&self) -> Vec<Alternative<Self>> {
        let changes = [
            (
                "client timeout x4",
                "timeout",
                duration::format(self.timeout * 4),
            ),
            (
                "retry delay x10",
                "retry_delay",
                duration::format(self.retry_delay * 10),
            ),
            ("jitter", "jitter", (!self.jitter).to_string()),
            (
                "exponential backoff",
                "backoff",
                (!self.backoff).to_string(),
            ),
            ("retry budget 10%", "retry_budget", "0.1".into()),
            ("load shedding", "shedding", (!self.shedding).to_string()),
            ("overload factor 1", "overload_factor", "1".into()),
        ];
        let mut out = vec![Alternative::new("baseline", "", self.clone())];
        for (label, key, value) in changes {
            if let Ok(q) = crate::simulate::overrides::apply(self, params::NAME, key, &value) {
                out.push(Alternative::new(label, format!("{key}={value}"), q));
            }
        }
        out
    }

    fn compare_heading(&self) -> String {
        format!(
            "scenario config-deploy: one change at a time; \"from start\": the change is in place before the trigger; \"once stuck\": made at {} (plan_at)",
            duration::format(self.plan_at)
        )
    }

    /// From the start, and made only at `plan_at` once the system is stuck (without a
    /// plan): does it get out, and how long after the change?
    fn figures(&self, alt: &Self, seed: u64) -> Vec<Figure> {
        let mut f = engine::run(alt, seed).figures();
        if self.plan.is_none() {
            let late = engine::run_with(self, Some(alt), seed);
            f.push(Figure::flag(
                "recovers_if_changed_when_stuck",
                "once stuck",
                RECOVERS,
                late.recovery.recovered,
            ));
            f.push(Figure::new(
                "time_to_recover_after_change_s",
                "recovery after",
                Unit::Seconds,
                late.recovery.time_to_recover_s,
            ));
        }
        f
    }

    fn client_seconds(&self) -> Option<f64> {
        Some(f64::from(self.clients) * self.duration.as_secs_f64())
    }
}
