//! `bulkhead`: 150 home loads/s per instance, each calling posts, profile, ads,
//! notifications and the optional recommendations; an unrelated search endpoint beside
//! them. Recommendations slows down, and with its timeout raised to 2 s every call to it
//! holds a connection for 2 s: 300 connections wanted. One shared pool of 256 fills with
//! them and starves the core calls and search; separate pools sized by Little's law keep
//! the damage inside recommendations, whose full pool refuses at once.
//!
//! The home load's core is posts and profile: it succeeds when both do; ads,
//! notifications and recommendations are optional.

mod model;
pub mod params;

pub use params::{BulkheadParams, Design};

use crate::simulate::model::{Alternative, Figure, Model, Outcome};
use crate::simulate::plot::{Chart, Series};
use crate::simulate::text::{self, pct};
use params::{DOWNSTREAMS, RECOMMENDATIONS, SEARCH};
use plotters::style::RGBColor;
use serde::Serialize;
use std::fmt::Write;

/// The columns of the second-by-second table.
const COLUMNS: [&str; 6] = [
    "t(s)",
    "core",
    "search",
    "recommendations",
    "in use",
    "waiting",
];

/// Success rates of the calls made in some stretch of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Rates {
    pub home_loads: u64,
    /// Home loads whose posts and profile calls both succeeded.
    pub core: f64,
    pub searches: u64,
    pub search: f64,
    /// Per downstream, in the order posts, profile, ads, notifications, recommendations,
    /// search.
    pub per_downstream: Vec<f64>,
    /// Recommendations calls refused at once by their full pool.
    pub recommendations_refused: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BulkheadSecond {
    pub t: u32,
    pub core: f64,
    pub search: f64,
    pub recommendations: f64,
    /// Connections in use and calls waiting for one, at the end of the second.
    pub in_use: u64,
    pub waiting: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BulkheadReport {
    /// What it ran with.
    pub params: BulkheadParams,
    pub pools: String,
    pub before: Rates,
    pub after: Rates,
    pub max_in_use: u64,
    pub max_waiting: u64,
    pub series: Vec<BulkheadSecond>,
}

fn rates(o: &model::Run, from: u64, to: u64) -> Rates {
    let in_range = |t: u64| t >= from && t < to;
    let share = |a: u64, b: u64| if b == 0 { 1.0 } else { a as f64 / b as f64 };
    let mut made = [0u64; 6];
    let mut ok = [0u64; 6];
    let mut refused = 0;
    for c in &o.calls {
        if in_range(c.created_us) {
            made[c.ds] += 1;
            ok[c.ds] += u64::from(c.ok);
            refused += u64::from(c.rejected && c.ds == RECOMMENDATIONS);
        }
    }
    let (mut homes, mut core) = (0u64, 0u64);
    for &h in &o.homes {
        let posts = o.calls[h as usize];
        if in_range(posts.created_us) {
            homes += 1;
            core += u64::from(posts.ok && o.calls[h as usize + 1].ok);
        }
    }
    Rates {
        home_loads: homes,
        core: share(core, homes),
        searches: made[SEARCH],
        search: share(ok[SEARCH], made[SEARCH]),
        per_downstream: (0..6).map(|d| share(ok[d], made[d])).collect(),
        recommendations_refused: refused as f64 / made[RECOMMENDATIONS].max(1) as f64,
    }
}

/// The design in a few words, for table rows.
fn design_label(p: &BulkheadParams) -> String {
    match (p.design, p.recommendations_reject_when_full) {
        (Design::Shared, _) => format!("one shared pool of {}", p.shared_pool),
        (Design::Separate, true) => "separate pools, recommendations refuses when full".into(),
        (Design::Separate, false) => "separate pools, recommendations waits when full".into(),
    }
}

fn describe_pools(p: &BulkheadParams) -> String {
    match p.design {
        Design::Shared => format!("one shared pool of {} for everything", p.shared_pool),
        Design::Separate => {
            let list: Vec<String> = DOWNSTREAMS
                .iter()
                .zip(p.downstreams())
                .map(|(n, d)| format!("{n} {}", d.pool))
                .collect();
            let reject = if p.recommendations_reject_when_full {
                "refuses at once when full"
            } else {
                "waits when full"
            };
            format!(
                "separate pools: {}; recommendations {reject}",
                list.join(", ")
            )
        }
    }
}

/// Success before and after the slowdown, the connections in use and the calls waiting.
impl Outcome for BulkheadReport {
    fn what(&self) -> String {
        let slow_at = self.params.slow_at.as_secs_f64();
        format!("{}; recommendations slow from {slow_at} s", self.pools)
    }

    fn text(&self) -> String {
        let mut o = String::new();
        for (what, x) in [("before", &self.before), ("after", &self.after)] {
            let _ = writeln!(
            o,
            "{what} the slowdown: core call (posts + profile) {} of {} home loads, search {} of {}, recommendations {}{}",
            pct(x.core),
            x.home_loads,
            pct(x.search),
            x.searches,
            pct(x.per_downstream[RECOMMENDATIONS]),
            if x.recommendations_refused > 0.0 {
                format!(" ({} refused at once)", pct(x.recommendations_refused))
            } else {
                String::new()
            }
        );
        }
        let per: Vec<String> = DOWNSTREAMS
            .iter()
            .zip(&self.after.per_downstream)
            .map(|(n, s)| format!("{n} {}", pct(*s)))
            .collect();
        let _ = writeln!(
            o,
            "calls that succeeded after the slowdown: {}",
            per.join(", ")
        );
        let _ = writeln!(
            o,
            "connections in use: at most {}; calls waiting for one: at most {}",
            self.max_in_use, self.max_waiting
        );
        let row = |c: &[BulkheadSecond]| {
            let avg = |f: fn(&BulkheadSecond) -> f64| c.iter().map(f).sum::<f64>() / c.len() as f64;
            let last = &c[c.len() - 1];
            vec![
                c[0].t.to_string(),
                pct(avg(|s| s.core)),
                pct(avg(|s| s.search)),
                pct(avg(|s| s.recommendations)),
                last.in_use.to_string(),
                last.waiting.to_string(),
            ]
        };
        o.push_str(&text::windowed_table(&self.series, &COLUMNS, row, |w| {
            format!("rows of {w} s by the time the calls were made; in use and waiting at the row's end")
        }));
        o
    }

    fn chart(&self) -> Chart {
        let pts = |f: fn(&BulkheadSecond) -> f64| -> Vec<(f64, f64)> {
            self.series
                .iter()
                .map(|s| (f64::from(s.t), f(s) * 100.0))
                .collect()
        };
        let left = vec![
            Series::new(
                "core call succeeded (%)",
                RGBColor(30, 140, 30),
                pts(|s| s.core),
            ),
            Series::new(
                "search succeeded (%)",
                RGBColor(90, 120, 230),
                pts(|s| s.search),
            ),
            Series::new(
                "recommendations succeeded (%)",
                RGBColor(200, 30, 30),
                pts(|s| s.recommendations),
            ),
        ];
        Chart::new(
            format!("bulkhead: {}", self.pools),
            "time (s)",
            "success (%)",
            left,
        )
        .with_right_line(
            "connections in use",
            "connections in use",
            self.series
                .iter()
                .map(|s| (f64::from(s.t), s.in_use as f64))
                .collect(),
        )
    }

    fn figures(&self) -> Vec<Figure> {
        vec![
            Figure::share("core", "core", self.after.core),
            Figure::share("search", "search", self.after.search),
            Figure::share(
                "recommendations",
                "recommendations",
                self.after.per_downstream[RECOMMENDATIONS],
            ),
            Figure::share(
                "recommendations_refused",
                "refused at once",
                self.after.recommendations_refused,
            ),
            Figure::count("max_waiting", "max waiting", self.max_waiting),
        ]
    }
}

impl Model for BulkheadParams {
    type Report = BulkheadReport;

    fn run(&self, seed: u64) -> BulkheadReport {
        let o = model::run(self, seed);
        let slow = self.slow_at.as_micros() as u64;
        let end = self.duration.as_micros() as u64;
        let secs = self.duration.as_secs_f64().ceil() as u64;
        let series = (0..secs)
            .map(|t| {
                let r = rates(&o, t * 1_000_000, (t + 1) * 1_000_000);
                let (in_use, waiting) = o.samples.get(t as usize).copied().unwrap_or_default();
                BulkheadSecond {
                    t: t as u32,
                    core: r.core,
                    search: r.search,
                    recommendations: r.per_downstream[RECOMMENDATIONS],
                    in_use,
                    waiting,
                }
            })
            .collect();
        BulkheadReport {
            params: self.clone(),
            pools: describe_pools(self),
            before: rates(&o, 0, slow),
            after: rates(&o, slow, end),
            max_in_use: o.samples.iter().map(|s| s.0).max().unwrap_or(0),
            max_waiting: o.samples.iter().map(|s| s.1).max().unwrap_or(0),
            series,
        }
    }

    /// The shared pool, and separate pools with recommendations refusing or waiting when
    /// its own is full.
    fn alternatives(&self) -> Vec<Alternative<Self>> {
        [
            (Design::Shared, self.recommendations_reject_when_full),
            (Design::Separate, true),
            (Design::Separate, false),
        ]
        .into_iter()
        .map(|(design, reject)| {
            let q = BulkheadParams {
                design,
                recommendations_reject_when_full: reject,
                ..self.clone()
            };
            let change = format!(
                "design={} recommendations_reject_when_full={reject}",
                match design {
                    Design::Shared => "shared",
                    Design::Separate => "separate",
                }
            );
            Alternative::new(design_label(&q), change, q)
        })
        .collect()
    }

    fn compare_heading(&self) -> String {
        let separate = BulkheadParams {
            design: Design::Separate,
            ..self.clone()
        };
        format!(
            "scenario bulkhead: {} home loads/s + {} searches/s; success after recommendations slows at {} s\n{}",
            self.home_rate_per_s,
            self.search_rate_per_s,
            self.slow_at.as_secs_f64(),
            describe_pools(&separate)
        )
    }
}
