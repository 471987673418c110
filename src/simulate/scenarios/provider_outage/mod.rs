//! `provider-outage`: 40 clients call a provider that serves 8 requests per 100 ms tick
//! and collapses (answers nothing in time: it shares its capacity among every call it
//! holds, and its callers wait 100 ms) when offered more; it is down from 2 s to 6 s of a
//! 24 s window. The clients call at the same moment, so when it goes down they all fail
//! together, and a client whose call failed sends nothing new until a retry of it goes
//! through. What the retry policy decides: whether the retries keep arriving together
//! (fixed delays and plain exponential backoff do: 40 in one tick, five times the
//! capacity, every time) or spread out (full jitter), and so whether the provider ever
//! gets out of its collapse within the window.

mod model;
pub mod params;
mod provider;

use model::tick_ms;
pub use model::{OutageTick, ProviderOutageReport};
pub use params::ProviderOutageParams;

use crate::retry::RetryKind;
use crate::simulate::error::SimError;
use crate::simulate::model::{Alternative, Figure, Model, Outcome, Unit};
use crate::simulate::plot::{Chart, Series};
use crate::simulate::text;
use plotters::style::RGBColor;
use std::fmt::Write;

fn fmt_recovered(r: Option<f64>) -> String {
    r.map_or("never within the window".into(), |s| format!("{s:.1} s"))
}

fn overload(shed: bool, timeout_ms: f64) -> String {
    if shed {
        "refuses at once what does not fit".into()
    } else {
        format!("collapses when offered more than it can finish within the callers' {timeout_ms} ms timeout (it shares its capacity among them and answers none in time)")
    }
}

/// The peak after the return, what it cost, and when it was over; tick by tick.
impl Outcome for ProviderOutageReport {
    fn what(&self) -> String {
        format!(
            "{} clients calling together at {} s, each calling again {} s after its call went through; provider serves {} per {} ms tick and {}; down {} s..{} s; {}",
            self.params.clients,
            self.params.first_call.as_secs_f64(),
            self.params.period.as_secs_f64(),
            self.params.capacity_per_tick,
            tick_ms(&self.params),
            overload(self.params.shed, self.params.timeout.as_secs_f64() * 1000.0),
            self.down_from_s,
            self.back_at_s,
            self.params.retry_policy().describe(),
        )
    }

    fn text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "peak requests in one tick after the provider is back: {} at {:.1} s (capacity {})",
            self.peak_after_back, self.peak_after_back_at_s, self.params.capacity_per_tick
        );
        let _ = writeln!(
        o,
        "total requests sent: {} ({} first tries + {} retries); served {}, given up {}, clients still waiting at the end {}",
        self.requests, self.calls, self.retries, self.served, self.given_up, self.waiting_at_end
    );
        let _ = writeln!(
            o,
            "time to recover after it came back: {}",
            fmt_recovered(self.recovered_after_s)
        );
        let per_s = (1000.0 / tick_ms(&self.params)).round().max(1.0) as usize;
        let rows: Vec<Vec<String>> = self
            .series
            .chunks(per_s)
            .map(|c| {
                let sum = |f: fn(&OutageTick) -> u64| c.iter().map(f).sum::<u64>().to_string();
                vec![
                    format!("{:.0}", c[0].tick as f64 * tick_ms(&self.params) / 1000.0),
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
        o.push_str(&text::noted_table(
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
            "one row per second; peak tick: the most requests in one of its ticks; waiting: clients whose call has not gone through, at its end",
        ));
        o
    }

    fn chart(&self) -> Chart {
        let t = |x: &OutageTick| x.tick as f64 * tick_ms(&self.params) / 1000.0;
        let pts = |f: fn(&OutageTick) -> u64| -> Vec<(f64, f64)> {
            self.series.iter().map(|x| (t(x), f(x) as f64)).collect()
        };
        let cap = f64::from(self.params.capacity_per_tick);
        let end = self.series.last().map_or(1.0, t);
        let left = vec![
            Series::new(
                "capacity per tick",
                RGBColor(170, 170, 170),
                vec![(0.0, cap), (end, cap)],
            )
            .width(4),
            Series::new(
                "requests per tick",
                RGBColor(90, 120, 230),
                pts(|x| x.new + x.retries),
            ),
            Series::new("served", RGBColor(30, 140, 30), pts(|x| x.served)),
            Series::new("failed", RGBColor(200, 30, 30), pts(|x| x.failed)),
        ];
        Chart::new(
            format!(
                "provider-outage, {}: recovered {}",
                self.params.policy,
                fmt_recovered(self.recovered_after_s)
            ),
            "time (s)",
            "requests per tick",
            left,
        )
        .with_right_line("clients waiting", "clients waiting", pts(|x| x.waiting))
    }

    fn time_to_recover_s(&self) -> Option<f64> {
        self.recovered_after_s
    }

    fn figures(&self) -> Vec<Figure> {
        vec![
            Figure::count(
                "peak_after_back",
                "peak tick after back",
                self.peak_after_back,
            ),
            Figure::count("requests", "requests", self.requests),
            Figure::count("retries", "retries", self.retries),
            Figure::flag(
                "recovered",
                "recovers",
                ("recovers", "never"),
                self.recovered_after_s.is_some(),
            ),
            Figure::new(
                "recovered_after_s",
                "recovered after",
                Unit::Seconds,
                self.recovered_after_s,
            ),
        ]
    }
}

impl Model for ProviderOutageParams {
    type Report = ProviderOutageReport;

    fn run(&self, seed: u64) -> ProviderOutageReport {
        model::run(self, seed)
    }

    fn set_retry(&mut self, kind: RetryKind) -> Result<(), SimError> {
        self.policy = kind;
        Ok(())
    }

    /// The three policies, each with the drill's numbers.
    fn alternatives(&self) -> Vec<Alternative<Self>> {
        RetryKind::ALL
            .into_iter()
            .map(|policy| {
                let q = ProviderOutageParams {
                    policy,
                    ..self.clone()
                };
                Alternative::new(q.retry_policy().describe(), format!("policy={policy}"), q)
            })
            .collect()
    }

    fn compare_heading(&self) -> String {
        format!(
            "scenario provider-outage: {} clients calling together at {} s, provider {} per tick and {}, down {} s..{} s, window {} s",
            self.clients,
            self.first_call.as_secs_f64(),
            self.capacity_per_tick,
            overload(self.shed, self.timeout.as_secs_f64() * 1000.0),
            self.down_from.as_secs_f64(),
            self.down_to.as_secs_f64(),
            self.duration.as_secs_f64()
        )
    }
}
