//! The grid report: one row per point (true k, estimated k or unknown, k error, predicted,
//! simulated, prediction error), the shares within 15% and 20%, and the points outside
//! with their reasons. Text for people, JSON for tools; both byte for byte the same for a
//! seed (no wall time in it).

use super::point::{Measured, K_WITHIN, PREDICTION_WITHIN};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Counts over the grid.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub points: usize,
    /// k within 15% of the true k.
    pub k_within: usize,
    /// k unknown (with a reason).
    pub k_unknown: usize,
    /// The prediction within 20% of the simulated time.
    pub prediction_within: usize,
    pub prediction_unknown: usize,
    /// Both.
    pub within: usize,
    /// The share of points with both, against the 95% goal.
    pub within_share: f64,
    /// Points outside, by the first thing that put them there.
    pub outside_by_reason: BTreeMap<&'static str, usize>,
}

/// The first thing that put a point outside, as a category.
fn category(m: &Measured) -> Option<&'static str> {
    if m.outside.is_empty() {
        None
    } else if m.detected_after_s.is_none() {
        Some("no Stuck verdict (the simulated system was not stuck when looked at, or the detector did not say so)")
    } else if m.k.is_none() {
        Some("k unknown")
    } else if !m.k_within() {
        Some("k beyond 15%")
    } else if m.prediction_error.is_none() {
        Some("prediction unknown")
    } else {
        Some("prediction beyond 20%")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GridReport {
    pub seed: u64,
    pub runbook: String,
    pub k_within: f64,
    pub prediction_within: f64,
    pub summary: Summary,
    pub points: Vec<Measured>,
}

impl GridReport {
    pub fn new(seed: u64, runbook: &str, points: Vec<Measured>) -> Self {
        let n = points.len();
        let count = |f: &dyn Fn(&Measured) -> bool| points.iter().filter(|m| f(m)).count();
        let within = count(&|m| m.outside.is_empty());
        let mut outside_by_reason = BTreeMap::new();
        for c in points.iter().filter_map(category) {
            *outside_by_reason.entry(c).or_insert(0) += 1;
        }
        let summary = Summary {
            points: n,
            k_within: count(&|m| m.k_within()),
            k_unknown: count(&|m| m.k.is_none()),
            prediction_within: count(&|m| m.prediction_within()),
            prediction_unknown: count(&|m| m.prediction_error.is_none()),
            within,
            within_share: if n == 0 {
                0.0
            } else {
                within as f64 / n as f64
            },
            outside_by_reason,
        };
        GridReport {
            seed,
            runbook: runbook.to_string(),
            k_within: K_WITHIN,
            prediction_within: PREDICTION_WITHIN,
            summary,
            points,
        }
    }

    pub fn json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self).map(|s| s + "\n")
    }

    pub fn text(&self) -> String {
        let opt =
            |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |v| format!("{v:.prec$}"));
        let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:+.0}%", 100.0 * v));
        let mut o = String::new();
        let _ = writeln!(
            o,
            "scenario grid, seed {}, runbook {}: {} points; k error = (estimated - true) / true, prediction error = (predicted - simulated) / simulated",
            self.seed, self.runbook, self.summary.points
        );
        let _ = writeln!(
            o,
            "{:<9} {:<52} {:>6} {:>6} {:>6} {:>8} {:>8} {:>8}  outside",
            "point",
            "cold k replicas concurrency header attached",
            "k",
            "k_est",
            "k_err",
            "pred_s",
            "sim_s",
            "pred_err"
        );
        for m in &self.points {
            let _ = writeln!(
                o,
                "{:<9} {:<52} {:>6.2} {:>6} {:>6} {:>8} {:>8} {:>8}  {}",
                m.point.name(),
                m.point.describe(),
                m.k_true,
                opt(m.k, 2),
                pct(m.k_error),
                opt(m.predicted_s, 1),
                opt(m.simulated_s, 1),
                pct(m.prediction_error),
                if m.outside.is_empty() { "-" } else { "yes" }
            );
        }
        let s = &self.summary;
        let share = |n: usize| {
            if s.points == 0 {
                0.0
            } else {
                100.0 * n as f64 / s.points as f64
            }
        };
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "k within {:.0}%: {}/{} ({:.1}%), unknown {}; prediction within {:.0}%: {}/{} ({:.1}%), unknown {}; both: {}/{} ({:.1}%, goal 95%)",
            100.0 * self.k_within,
            s.k_within,
            s.points,
            share(s.k_within),
            s.k_unknown,
            100.0 * self.prediction_within,
            s.prediction_within,
            s.points,
            share(s.prediction_within),
            s.prediction_unknown,
            s.within,
            s.points,
            share(s.within)
        );
        let outside: Vec<&Measured> = self
            .points
            .iter()
            .filter(|m| !m.outside.is_empty())
            .collect();
        if !outside.is_empty() {
            let _ = writeln!(
                o,
                "\npoints outside ({}), by the first reason:",
                outside.len()
            );
            for (why, n) in &s.outside_by_reason {
                let _ = writeln!(o, "  {n:>4}  {why}");
            }
            let _ = writeln!(o);
            for m in outside {
                let _ = writeln!(o, "  {}: {}", m.point.name(), m.outside.join("; "));
            }
        }
        o
    }
}
