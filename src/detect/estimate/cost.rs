//! The cost model fitted over the calm and the overloaded scrapes of one window at once:
//! the healthy service time, the cold factor and k, for a service never seen both healthy
//! and warm.
//!
//! Why it exists: the healthy service time is read where the service was healthy and warm
//! ([`super::healthy_service_time`]). A service that started or restarted shortly before
//! the incident is healthy but cold, so none is read, capacity falls back to the
//! runbook's declaration, and k is measured against it: a declaration written for 4 slots
//! on a service with 13 made k read 1.1 against a true 3.5. The window still shows the
//! cost model. A request costs `s x m(x) x K` ([`super::cold`]): `s` the healthy warm
//! service time, `m(x) = 1 + g x` with `x = 1 - w` and `g` the cold factor less 1, `K`
//! 1 while the service is calm and k while it is overloaded. Calm is nothing queued (the
//! model's overload test, queue over what the service answers within the clients'
//! timeout, is false at 0) or queued and not overloaded ([`super::regime`]); a
//! service time is the work of a request, whatever the load, so an idle scrape's is as
//! good as a busy one's. In logs, `ln st = ln s + [overloaded] ln k + ln(1 + g x)`: for
//! one `g`, `ln s` is the calm scrapes' mean residual and `ln k` the overloaded ones' less
//! it, so the fit is a search over `g` alone for the least squared residual. Both regimes
//! share `s` and `g`, so each regime's slope in `x` says something of `g` and the gap
//! between them at equal warmth is k; where their warmths do not overlap, k leans on `g`
//! to carry one across, so the slopes must rest on enough of the warm range: the regimes'
//! spans of `x` (each over whole rate windows, as in [`super::cold`]) must add up to half
//! of it. A fit that cannot tell is an `Err` with the reason, never a number.

use super::regime::{held_over_rate_window, regime, Regime};
use crate::metrics::signal::{names, Snapshot};

/// The least the two regimes' spans of `1 - w` add up to.
const MIN_SPAN: f64 = 0.5;
/// The least scrapes each regime brings.
const MIN_POINTS: usize = 3;
/// The steepest `g` searched: a cold factor of 21, far past any cache.
const G_MAX: f64 = 20.0;

/// What the window shows of the cost model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostFit {
    /// Healthy warm service time, seconds.
    pub healthy: f64,
    pub cold_factor: f64,
    pub k: f64,
    /// Scrapes calm and overloaded over their whole rate window.
    pub calm: usize,
    pub overloaded: usize,
    /// The regimes' spans of `1 - w`, added.
    pub span: f64,
}

impl CostFit {
    /// In words, for an estimate's `from`.
    pub fn describe(&self) -> String {
        format!(
            "the cost model fitted over {} calm and {} overloaded scrapes (their warm ranges add up to {:.2}): healthy service time {:.4}s, cold factor {:.2}, k {:.2}",
            self.calm, self.overloaded, self.span, self.healthy, self.cold_factor, self.k
        )
    }
}

/// Calm or overloaded, by the model's test; `None` when it cannot tell.
fn class(s: &Snapshot) -> Option<Regime> {
    if s.get(names::QUEUE_DEPTH)? <= 0.0 {
        return Some(Regime::Queued);
    }
    regime(s).ok()
}

/// The class of `s` if every scrape of the rate window ending at `s` has it.
fn held(window: &[Snapshot], s: &Snapshot) -> Option<Regime> {
    held_over_rate_window(window, s, class).flatten()
}

/// The fit over `window`, or why it says nothing.
pub fn fit(window: &[Snapshot]) -> Result<CostFit, String> {
    // (x, ln service time, overloaded)
    let mut pts: Vec<(f64, f64, bool)> = Vec::new();
    for s in window {
        let Some(r) = held(window, s) else { continue };
        let Some(st) = s
            .get(names::SERVICE_TIME)
            .filter(|v| v.is_finite() && *v > 0.0)
        else {
            continue;
        };
        let Some(w) = super::warmth_over_rate_window(window, s) else {
            continue;
        };
        pts.push((1.0 - w.clamp(0.0, 1.0), st.ln(), r == Regime::Overloaded));
    }
    let span_of = |over: bool| {
        let xs = pts.iter().filter(|p| p.2 == over).map(|p| p.0);
        let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| {
            (l.min(x), h.max(x))
        });
        (hi - lo).max(0.0)
    };
    let calm = pts.iter().filter(|p| !p.2).count();
    let overloaded = pts.len() - calm;
    let span = span_of(false) + span_of(true);
    if calm < MIN_POINTS || overloaded < MIN_POINTS || span < MIN_SPAN {
        return Err(format!(
            "{calm} calm and {overloaded} overloaded scrapes over whole rate windows, their warm ranges adding up to {span:.2}; the fit needs {MIN_POINTS} in each and {MIN_SPAN}"
        ));
    }
    // For one g: (ln s, ln k, squared residual).
    let at = |g: f64| {
        let r = |p: &(f64, f64, bool)| p.1 - (1.0 + g * p.0).ln();
        let mean = |over: bool, n: usize| {
            pts.iter().filter(|p| p.2 == over).map(r).sum::<f64>() / n as f64
        };
        let ln_s = mean(false, calm);
        let ln_k = mean(true, overloaded) - ln_s;
        let sse: f64 = pts
            .iter()
            .map(|p| (r(p) - ln_s - if p.2 { ln_k } else { 0.0 }).powi(2))
            .sum();
        (ln_s, ln_k, sse)
    };
    let step = 0.01;
    let coarse = (0..=(G_MAX / step) as usize)
        .map(|i| i as f64 * step)
        .min_by(|a, b| at(*a).2.total_cmp(&at(*b).2))
        .unwrap_or(0.0);
    if coarse >= G_MAX - step {
        return Err(format!(
            "the fit's cold factor runs to the end of the search ({}): the scrapes do not follow the cost model",
            G_MAX + 1.0
        ));
    }
    // Golden section within the coarse step either side.
    let (mut lo, mut hi) = ((coarse - step).max(0.0), coarse + step);
    let phi = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..40 {
        let (a, b) = (hi - phi * (hi - lo), lo + phi * (hi - lo));
        if at(a).2 <= at(b).2 {
            hi = b;
        } else {
            lo = a;
        }
    }
    let g = (lo + hi) / 2.0;
    let (ln_s, ln_k, _) = at(g);
    let k = ln_k.exp();
    if k < 1.0 {
        return Err(format!(
            "the overloaded scrapes cost less than the calm ones at equal warmth (k {k:.2}): the scrapes do not follow the cost model"
        ));
    }
    Ok(CostFit {
        healthy: ln_s.exp(),
        cold_factor: 1.0 + g,
        k,
        calm,
        overloaded,
        span,
    })
}

/// The cold factor from the calm scrapes' service time against a healthy warm service
/// time known otherwise (`healthy`: measured, or the concurrency limit over a capacity):
/// each calm scrape costs `healthy x (1 + g x)`, so `g` is the least-squares slope through
/// the origin of `st / healthy - 1` against `x`. Only scrapes at least half cold count
/// (the line's cold end is then at most twice the data away), 3 of them. Where the
/// overloaded scrapes sit at about the calm ones' warmth, k read through this factor
/// leans on the reference hardly at all: capacity / completions over `m(x)` is then
/// close to the overloaded service time over the calm one.
pub fn cold_against(window: &[Snapshot], healthy: f64) -> Result<(f64, usize), String> {
    if !(healthy.is_finite() && healthy > 0.0) {
        return Err("no healthy service time to compare the cold one with".into());
    }
    let pts: Vec<(f64, f64)> = window
        .iter()
        .filter(|s| held(window, s) == Some(Regime::Queued))
        .filter_map(|s| {
            let st = s
                .get(names::SERVICE_TIME)
                .filter(|v| v.is_finite() && *v > 0.0)?;
            let w = super::warmth_over_rate_window(window, s)?;
            Some((1.0 - w.clamp(0.0, 1.0), st / healthy - 1.0))
        })
        .filter(|p| p.0 >= 0.5)
        .collect();
    if pts.len() < MIN_POINTS {
        return Err(format!(
            "{} calm scrapes at least half cold over whole rate windows; the comparison needs {MIN_POINTS}",
            pts.len()
        ));
    }
    let g = pts.iter().map(|p| p.0 * p.1).sum::<f64>() / pts.iter().map(|p| p.0 * p.0).sum::<f64>();
    if g < 0.0 {
        return Err(format!(
            "the calm cold scrapes cost less than the healthy reference ({healthy:.4}s): the reference is stale"
        ));
    }
    Ok((1.0 + g, pts.len()))
}

#[cfg(test)]
#[path = "cost_tests.rs"]
mod tests;
