//! The cold factor: how much more a request costs a service whose caches are cold, from
//! what the window shows where it can, from the runbook's declaration where it cannot.
//!
//! Why it exists: a declared cold factor is often stale, and both the cold capacity and
//! the cold correction of k rest on it. The window can show it: a request's cost is
//! `healthy x m(w) x k_now` with the cold multiplier `m(w) = 1 + (f - 1)(1 - w)`, where
//! `k_now` is the overload factor while the service is overloaded and 1 while it is not.
//! Within one regime `k_now` holds still while the service warms as it works, so the
//! service time is a straight line in `1 - w`, `st = b + c (1 - w)` with `b = healthy x k_now`
//! and `c = b (f - 1)`, and `f = 1 + c / b` needs neither k nor the healthy service time.
//! Mixing the regimes breaks the line (the queue fills as the service warms, so the warmer
//! scrapes carry k and the colder not: the slope came out negative).
//!
//! The regimes are told apart by [`super::regime`]. A line over one regime's scrapes gives
//! `f` when they span at least half the warm range (less, and the line's value at `w = 0` is
//! an extrapolation past twice the data); otherwise the declaration stands, and without
//! one the cold factor is unknown, each with the reason.

use super::regime::{held_regime, NoRegime, Regime};
use super::{Estimate, Source};
use crate::detect::history::HealthyPeriod;
use crate::detect::DetectorConfig;
use crate::metrics::signal::{names, Snapshot};

/// The least span of `1 - w` the line must rest on.
const MIN_SPAN: f64 = 0.5;
/// The least scrapes a line rests on.
const MIN_POINTS: usize = 3;

/// The cold factor the estimates use: observed where the window allows (one regime's
/// line, else the cost model over both, [`super::cost`]), else declared, else unknown
/// (`Err` with the reason). The `from` of an observed one names the declaration it
/// replaced; of a declared one, why the window did not show it.
pub fn cold_factor(cfg: &DetectorConfig, window: &[Snapshot]) -> Result<Estimate, String> {
    cold_factor_against(cfg, window, None, None)
}

/// [`cold_factor`], and where neither the line nor the fit shows it, the calm cold
/// scrapes against a healthy service time known otherwise (`reference`, see
/// [`super::cost::cold_against`]), then what the metrics history's last healthy period
/// showed (`history`, [`crate::detect::lookback`]), all before the declaration.
pub fn cold_factor_against(
    cfg: &DetectorConfig,
    window: &[Snapshot],
    reference: Option<&Estimate>,
    history: Option<&HealthyPeriod>,
) -> Result<Estimate, String> {
    let declared = cfg.cold_factor;
    match observed(window) {
        Ok(fit) => {
            let instead = declared
                .map(|d| format!("; spec.detect.cold_factor {d} not used"))
                .unwrap_or_default();
            Ok(Estimate::new(
                fit.f,
                Source::Measured,
                format!(
                    "observed: service time against warm fraction over {} {} scrapes spanning {:.2} of the warm range{instead}",
                    fit.points,
                    match fit.regime {
                        Regime::Overloaded => "overloaded",
                        Regime::Queued => "busy, not overloaded,",
                    },
                    fit.span
                ),
            ))
        }
        Err(why) => match (super::cost::fit(window), declared) {
            (Ok(fit), _) => {
                let instead = declared
                    .map(|d| format!("; spec.detect.cold_factor {d} not used"))
                    .unwrap_or_default();
                Ok(Estimate::new(
                    fit.cold_factor,
                    Source::Measured,
                    format!(
                        "observed: {}{instead} (within one regime: {why})",
                        fit.describe()
                    ),
                ))
            }
            (Err(joint), _)
                if reference
                    .and_then(|r| super::cost::cold_against(window, r.value).ok())
                    .is_some() =>
            {
                let r = reference.expect("checked above");
                let (f, n) = super::cost::cold_against(window, r.value).expect("checked above");
                let instead = declared
                    .map(|d| format!("; spec.detect.cold_factor {d} not used"))
                    .unwrap_or_default();
                Ok(Estimate::new(
                    f,
                    Source::Measured,
                    format!(
                        "observed: the service time of {n} calm cold scrapes against the healthy {:.4}s ({}, {}){instead} (within one regime: {why}; both: {joint})",
                        r.value,
                        r.source.as_str(),
                        r.from
                    ),
                ))
            }
            (Err(joint), _) if history.is_some_and(|h| h.cold_factor.is_some()) => {
                let h = history.expect("checked above");
                let instead = declared
                    .map(|d| format!("; spec.detect.cold_factor {d} not used"))
                    .unwrap_or_default();
                Ok(Estimate::new(
                    h.cold_factor.expect("checked above"),
                    Source::Measured,
                    format!(
                        "observed: {}{instead} (not in the window: {why}; {joint})",
                        h.cold_factor_from
                            .as_deref()
                            .unwrap_or("the metrics history")
                    ),
                ))
            }
            (Err(joint), Some(d)) => Ok(Estimate::new(
                d,
                Source::Declared,
                format!(
                    "declared in spec.detect.cold_factor; not observed: {why}; {joint}{}",
                    history_why(history)
                ),
            )),
            (Err(joint), None) => Err(format!(
                "unknown: not observed ({why}; {joint}{}) and spec.detect.cold_factor not declared",
                history_why(history)
            )),
        },
    }
}

/// Why the history did not give the cold factor either, for a declared or unknown one.
fn history_why(history: Option<&HealthyPeriod>) -> String {
    match history.and_then(|h| h.cold_factor_from.as_deref()) {
        Some(why) => format!("; metrics history: {why}"),
        None => String::new(),
    }
}

/// A line over one regime's scrapes.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Fit {
    f: f64,
    points: usize,
    span: f64,
    regime: Regime,
}

/// The fit over the regime whose scrapes span more of the warm range, or why none does.
fn observed(window: &[Snapshot]) -> Result<Fit, String> {
    let mut missing = None;
    let mut by: [Vec<(f64, f64)>; 2] = [Vec::new(), Vec::new()];
    for s in window {
        let r = match held_regime(window, s) {
            Ok(r) => r,
            Err(NoRegime::Missing(name)) => {
                missing = Some(name);
                continue;
            }
            Err(NoRegime::Idle) => continue,
        };
        let Some(w) = super::warmth_over_rate_window(window, s) else {
            missing = Some(names::WARM_FRACTION);
            continue;
        };
        let st = s.get(names::SERVICE_TIME).unwrap_or(0.0);
        by[(r == Regime::Queued) as usize].push((1.0 - w.clamp(0.0, 1.0), st));
    }
    let fits: Vec<Fit> = [Regime::Overloaded, Regime::Queued]
        .into_iter()
        .zip(&by)
        .filter_map(|(regime, pts)| {
            line(pts).map(|(f, span)| Fit {
                f,
                points: pts.len(),
                span,
                regime,
            })
        })
        .collect();
    if let Some(best) = fits.iter().max_by(|a, b| a.span.total_cmp(&b.span)) {
        return Ok(*best);
    }
    let span = |pts: &[(f64, f64)]| {
        let lo = pts.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let hi = pts.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
        (hi - lo).max(0.0)
    };
    Err(match (missing, by[0].len() + by[1].len()) {
        (Some(name), 0) => format!(
            "signal {name} absent: busy scrapes cannot be told overloaded or not, and k differs between them"
        ),
        _ => format!(
            "{} overloaded scrapes spanning {:.2} of the warm range, {} busy but not overloaded spanning {:.2}, each held over the rate window; a line needs {MIN_POINTS} in one regime spanning {MIN_SPAN}",
            by[0].len(),
            span(&by[0]),
            by[1].len(),
            span(&by[1])
        ),
    })
}

/// `(f, span)` of the least-squares line through `(1 - w, service time)`, when the points
/// allow it.
fn line(pts: &[(f64, f64)]) -> Option<(f64, f64)> {
    if pts.len() < MIN_POINTS {
        return None;
    }
    let lo = pts.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let hi = pts.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    if hi - lo < MIN_SPAN {
        return None;
    }
    let n = pts.len() as f64;
    let (mx, my) = (
        pts.iter().map(|p| p.0).sum::<f64>() / n,
        pts.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let c = sxy / sxx;
    let b = my - c * mx;
    if b <= 0.0 || !c.is_finite() {
        return None;
    }
    Some(((1.0 + c / b).max(1.0), hi - lo))
}

#[cfg(test)]
mod tests {
    use super::super::regime::regime;
    use super::*;
    use crate::metrics::signal::Reading;
    use std::time::{Duration, UNIX_EPOCH};

    /// A busy scrape of a service with 4 slots whose clients time out after 1 s.
    fn snap(t: u64, q: f64, st: f64, w: f64) -> Snapshot {
        Snapshot {
            at: UNIX_EPOCH + Duration::from_secs(t),
            readings: [
                (names::QUEUE_DEPTH, q),
                (names::SERVICE_TIME, st),
                (names::WARM_FRACTION, w),
                (names::CONCURRENCY_LIMIT, 4.0),
                (names::CLIENT_TIMEOUT, 1.0),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), Reading::Value { value: v }))
            .collect(),
        }
    }

    fn without(mut s: Snapshot, name: &str) -> Snapshot {
        s.readings.remove(name);
        s
    }

    /// The mean warmth over the 5 s rate window ending at scrape `i` (a tenth a second).
    fn window_mean(i: u64, step: f64) -> f64 {
        let seen: Vec<f64> = (i.saturating_sub(5)..=i).map(|j| j as f64 * step).collect();
        seen.iter().sum::<f64>() / seen.len() as f64
    }

    /// Overloaded (queue 200 against at most 40 answered within the timeout) and warming
    /// by a tenth a second, cold factor `f` and k 2.5: the service time, a mean over the
    /// 5 s rate window, is 0.04 x 2.5 x m(the window's mean warmth).
    fn warming(f: f64) -> Vec<Snapshot> {
        (0..=10u64)
            .map(|i| {
                let m = 1.0 + (f - 1.0) * (1.0 - window_mean(i, 0.1));
                snap(i, 200.0, 0.04 * 2.5 * m, i as f64 / 10.0)
            })
            .collect()
    }

    #[test]
    fn the_window_overrules_a_stale_declaration() {
        let cfg = DetectorConfig {
            cold_factor: Some(2.0),
            ..DetectorConfig::default()
        };
        let f = cold_factor(&cfg, &warming(3.0)).unwrap();
        assert!((f.value - 3.0).abs() < 1e-9, "{f:?}");
        assert_eq!(f.source, Source::Measured);
        assert!(f.from.contains("overloaded scrapes"), "{}", f.from);
        assert!(
            f.from.contains("spec.detect.cold_factor 2 not used"),
            "{}",
            f.from
        );
    }

    /// Busy but not overloaded throughout (queue 2, under the 4 / 0.12 x 1 s = 33 the
    /// service answers within the timeout even cold): the line is `healthy x m(w)`.
    #[test]
    fn a_busy_service_that_is_not_overloaded_shows_it_too() {
        let f = 2.5;
        let window: Vec<Snapshot> = (0..=10u64)
            .map(|i| {
                let m = 1.0 + (f - 1.0) * (1.0 - window_mean(i, 0.1));
                snap(i, 2.0, 0.04 * m, i as f64 / 10.0)
            })
            .collect();
        let got = cold_factor(&DetectorConfig::default(), &window).unwrap();
        assert!((got.value - f).abs() < 1e-9, "{got:?}");
        assert!(got.from.contains("not overloaded"), "{}", got.from);
    }

    /// The queue fills as the service warms: the coldest scrapes busy but not overloaded
    /// (cost `healthy x m(w)`), the warmer ones overloaded (`healthy x k x m(w)`). One line
    /// through both rises as the service warms and read a cold factor of 1 against a true
    /// 3; neither regime alone spans half the warm range over whole rate windows, but the
    /// two together do, and the cost model over both (one healthy service time and cold
    /// factor, k apart) reads the true 3 over the stale declaration.
    #[test]
    fn queued_and_overloaded_scrapes_are_not_one_line() {
        let (f, k) = (3.0, 2.5);
        let window: Vec<Snapshot> = (0..=20u64)
            .map(|i| {
                let w = i as f64 / 20.0;
                let m = 1.0 + (f - 1.0) * (1.0 - window_mean(i, 0.05));
                if i <= 10 {
                    snap(i, 5.0, 0.04 * m, w)
                } else {
                    snap(i, 200.0, 0.04 * k * m, w)
                }
            })
            .collect();
        let cfg = DetectorConfig {
            cold_factor: Some(2.0),
            ..DetectorConfig::default()
        };
        let got = cold_factor(&cfg, &window).unwrap();
        assert!((got.value - f).abs() < 1e-6, "{got:?}");
        assert_eq!(got.source, Source::Measured);
        assert!(got.from.contains("cost model fitted"), "{}", got.from);
        assert!(
            got.from.contains("overloaded scrapes spanning 0.20"),
            "{}",
            got.from
        );
    }

    #[test]
    fn without_the_warming_in_view_the_declaration_stands() {
        let cfg = DetectorConfig {
            cold_factor: Some(2.0),
            ..DetectorConfig::default()
        };
        // Attached late: warm throughout.
        let warm: Vec<Snapshot> = (0..10).map(|i| snap(i, 200.0, 0.1, 1.0)).collect();
        let f = cold_factor(&cfg, &warm).unwrap();
        assert_eq!((f.value, f.source), (2.0, Source::Declared));
        // Not busy: the service time is not the cost of saturated work.
        let idle: Vec<Snapshot> = warming(3.0)
            .into_iter()
            .map(|mut s| {
                s.readings.insert(
                    names::QUEUE_DEPTH.to_string(),
                    Reading::Value { value: 0.0 },
                );
                s
            })
            .collect();
        assert_eq!(cold_factor(&cfg, &idle).unwrap().source, Source::Declared);
        let unknown = cold_factor(&DetectorConfig::default(), &warm).unwrap_err();
        assert!(unknown.starts_with("unknown"), "{unknown}");
        assert!(unknown.contains("not declared"), "{unknown}");
    }

    /// Without the clients' timeout a busy scrape cannot be told overloaded or not.
    #[test]
    fn without_the_client_timeout_the_regime_is_unknown() {
        let window: Vec<Snapshot> = warming(3.0)
            .into_iter()
            .map(|s| without(s, names::CLIENT_TIMEOUT))
            .collect();
        assert_eq!(
            regime(&window[0]),
            Err(NoRegime::Missing(names::CLIENT_TIMEOUT))
        );
        let why = cold_factor(&DetectorConfig::default(), &window).unwrap_err();
        assert!(why.contains("client_timeout absent"), "{why}");
    }
}
