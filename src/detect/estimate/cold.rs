//! The cold factor: how much more a request costs a service whose caches are cold, from
//! what the window shows where it can, from the runbook's declaration where it cannot.
//!
//! Why it exists: a declared cold factor is often stale, and both the cold capacity and
//! the cold correction of k rest on it. The window can show it: while the service stays
//! saturated (requests queued), the cost of a request is `healthy x k x m(w)` with the cold
//! multiplier `m(w) = 1 + (f - 1)(1 - w)`, and k holds still while the service warms as it
//! works. So the service time is a straight line in `1 - w`, `st = b + c (1 - w)` with
//! `b = healthy x k` and `c = b (f - 1)`, and `f = 1 + c / b` needs neither k nor the
//! healthy service time. A least-squares line over the saturated snapshots gives it when
//! they span at least half the warm range (less, and the line's value at `w = 0` is an
//! extrapolation past twice the data it rests on); otherwise the declaration stands.

use super::{Estimate, Source};
use crate::detect::DetectorConfig;
use crate::metrics::signal::{names, Snapshot};

/// The least span of `1 - w` the line must rest on.
const MIN_SPAN: f64 = 0.5;

/// The cold factor the estimates use: observed where the window allows, else declared,
/// else none. The `from` of an observed one names the declaration it replaced.
pub fn cold_factor(cfg: &DetectorConfig, window: &[Snapshot]) -> Option<Estimate> {
    let declared = cfg.cold_factor;
    match observed(window) {
        Some((f, n, span)) => {
            let instead = declared
                .map(|d| format!("; spec.detect.cold_factor {d} not used"))
                .unwrap_or_default();
            Some(Estimate::new(
                f,
                Source::Measured,
                format!(
                    "observed: service time against warm fraction over {n} saturated scrapes spanning {span:.2} of the warm range{instead}"
                ),
            ))
        }
        None => declared.map(|d| {
            Estimate::new(
                d,
                Source::Declared,
                format!(
                    "spec.detect.cold_factor (the window does not show the service warming while saturated over {MIN_SPAN} of the warm range)"
                ),
            )
        }),
    }
}

/// `(f, points, span)` from the saturated snapshots, when they allow it.
fn observed(window: &[Snapshot]) -> Option<(f64, usize, f64)> {
    // The service time is a mean over the rate window: its warmth is the window's mean too.
    let pts: Vec<(f64, f64)> = window
        .iter()
        .filter(|s| s.get(names::QUEUE_DEPTH).is_some_and(|q| q > 0.0))
        .filter_map(|s| {
            let st = s
                .get(names::SERVICE_TIME)
                .filter(|v| v.is_finite() && *v > 0.0)?;
            s.get(names::WARM_FRACTION)?;
            let w = super::warm_over_rate_window(window, s)
                .get(names::WARM_FRACTION)?
                .clamp(0.0, 1.0);
            Some((1.0 - w, st))
        })
        .collect();
    if pts.len() < 3 {
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
    Some(((1.0 + c / b).max(1.0), pts.len(), hi - lo))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::signal::Reading;
    use std::time::{Duration, UNIX_EPOCH};

    fn snap(t: u64, q: f64, st: f64, w: f64) -> Snapshot {
        Snapshot {
            at: UNIX_EPOCH + Duration::from_secs(t),
            readings: [
                (names::QUEUE_DEPTH, q),
                (names::SERVICE_TIME, st),
                (names::WARM_FRACTION, w),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), Reading::Value { value: v }))
            .collect(),
        }
    }

    /// Saturated and warming by a tenth a second, cold factor `f` and k 2.5: the service
    /// time, a mean over the 5 s rate window, is 0.04 x 2.5 x m(the window's mean warmth).
    fn warming(f: f64) -> Vec<Snapshot> {
        (0..=10u64)
            .map(|i| {
                let w = i as f64 / 10.0;
                let seen: Vec<f64> = (i.saturating_sub(5)..=i).map(|j| j as f64 / 10.0).collect();
                let mean = seen.iter().sum::<f64>() / seen.len() as f64;
                snap(i, 200.0, 0.04 * 2.5 * (1.0 + (f - 1.0) * (1.0 - mean)), w)
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
        assert!(
            f.from.contains("spec.detect.cold_factor 2 not used"),
            "{}",
            f.from
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
        // Not saturated: the cost is not one line in the warmth.
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
        assert!(cold_factor(&DetectorConfig::default(), &warm).is_none());
    }
}
