//! Estimates the plan needs: healthy capacity, cold capacity, work amplification k, the
//! healthy service time and the demand baseline. Each estimate says where it came from,
//! because a plan built on a guess must say so.
//!
//! The healthy reference (healthy service time, capacity by Little's law, cold factor) is
//! measured before it is declared: the healthy part of the observed window, else the last
//! healthy period in the metrics history ([`super::lookback`]), and only then what the
//! runbook declares (`spec.detect`), which is often stale. The demand baseline and k take
//! a declaration first (an operator's statement of what the service sees). What none of
//! them gives is missing, and the plan asks the operator.

mod cold;
mod cost;
mod k;
mod regime;
mod warmth;

pub use cold::{cold_factor, cold_factor_against};
pub use cost::{cold_against, fit as cost_fit, CostFit};
pub use k::{k, warmth_over_rate_window, KEstimate};
pub use warmth::Warmth;

use super::history::Lookback;
use super::{DetectorConfig, Evidence};
use crate::metrics::signal::{names, Snapshot};
use serde::{Deserialize, Serialize};

/// Where a number the plan rests on came from. A plan built on a guess must say so, and a
/// number declared by someone who knows the service is trusted over a few seconds of
/// measurement, so the kind of source travels with the number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Estimated from metrics: the observed window or the metrics history.
    Measured,
    /// Configured: the runbook's `spec.detect` (or settings standing in for it).
    Declared,
    /// Given by the operator for this run (`--assume-*`, `recover plan` flags, a prompt).
    Operator,
    /// Neither measured nor declared: a fallback the evidence names as optimistic.
    Assumed,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Measured => "measured",
            Source::Declared => "declared",
            Source::Operator => "given by the operator",
            Source::Assumed => "assumed",
        }
    }
}

/// A number and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    pub value: f64,
    pub source: Source,
    /// In words: which setting, or which signals.
    pub from: String,
}

impl Estimate {
    fn new(value: f64, source: Source, from: impl Into<String>) -> Self {
        Estimate {
            value,
            source,
            from: from.into(),
        }
    }
}

/// What the window (and the history) tell about the service, before any plan.
pub struct Inputs<'a> {
    pub cfg: &'a DetectorConfig,
    pub window: &'a [Snapshot],
    /// Snapshots judged healthy with no trigger active.
    pub healthy: &'a [&'a Snapshot],
    pub lookback: Option<&'a Lookback>,
}

impl Inputs<'_> {
    /// The newest value of a signal in the window.
    fn latest(&self, name: &str) -> Option<f64> {
        self.window.iter().rev().find_map(|s| s.get(name))
    }
}

fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = xs.collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// A scrape of a warm service: the warm fraction (where exported) at least 0.95 at every
/// scrape of the rate window ending at `s`, since the service time is a mean over that
/// window and a scrape just warm still carries the colder work before it. Without the
/// signal the service is taken as warm: nothing says otherwise.
pub fn warm_throughout(window: &[Snapshot], s: &Snapshot) -> bool {
    let warm = |o: &Snapshot| o.get(names::WARM_FRACTION).is_none_or(|w| w >= 0.95);
    regime::held_over_rate_window(window, s, warm) == Some(true)
}

/// Healthy mean service time, seconds, measured before declared: the mean while healthy
/// and warm in the window, else in the last healthy period of the history (a Prometheus
/// retaining the scrapes from before anyone looked), else the cost model fitted over the
/// window ([`cost`]), else declared.
pub fn healthy_service_time(i: &Inputs) -> Option<Estimate> {
    // A service just restarted is healthy and slow (cold caches): its service time is not
    // the healthy one. Where the warm fraction is measured, only warm moments count.
    if let Some(m) = mean(
        i.healthy
            .iter()
            .filter(|s| warm_throughout(i.window, s))
            .filter_map(|s| s.get(names::SERVICE_TIME)),
    ) {
        return Some(Estimate::new(
            m,
            Source::Measured,
            "mean service time while healthy and warm in the observed window",
        ));
    }
    if let Some(v) = i.lookback.and_then(|l| {
        let h = l.healthy.as_ref()?;
        h.service_time.map(|v| (v, h.range()))
    }) {
        return Some(Estimate::new(
            v.0,
            Source::Measured,
            format!(
                "mean service time while warm in the last healthy period {}",
                v.1
            ),
        ));
    }
    // Healthy only while cold (started or restarted just before): the cost model over
    // the window's calm and overloaded scrapes carries the calm ones to warm.
    if let Ok(f) = cost::fit(i.window) {
        return Some(Estimate::new(f.healthy, Source::Measured, f.describe()));
    }
    i.cfg.healthy_service_time.map(|d| {
        Estimate::new(
            d.as_secs_f64(),
            Source::Declared,
            "spec.detect.healthy_service_time",
        )
    })
}

/// Baseline first-attempt demand, req/s: declared, else the mean while healthy in the
/// window (`window_mean`, judged without the trigger rule), else the history's.
pub fn demand(i: &Inputs, window_mean: Option<f64>) -> Option<Estimate> {
    if let Some(d) = i.cfg.demand_per_s {
        return Some(Estimate::new(
            d,
            Source::Declared,
            "spec.detect.demand_per_s",
        ));
    }
    if let Some(m) = window_mean {
        return Some(Estimate::new(
            m,
            Source::Measured,
            "mean first-attempt rate while healthy in the observed window",
        ));
    }
    let h = i.lookback?.healthy.as_ref()?;
    h.demand.map(|v| {
        Estimate::new(
            v,
            Source::Measured,
            format!(
                "mean first-attempt rate in the last healthy period {}",
                h.range()
            ),
        )
    })
}

/// Healthy capacity, req/s. Little's law (concurrency / healthy service time) from a
/// service time measured while healthy and the concurrency the service exports is the
/// service's own model, so it wins over a declaration, which may be stale (the declared
/// figure is named in its `from`). Otherwise declared (per replica times the replicas
/// ready now, or the total). Otherwise measured: the highest work rate while healthy (in
/// the window, else in the history) is only a lower bound, since a healthy service is
/// rarely saturated, so Little's law with a declared service time wins when it says more.
/// Every candidate goes in `evidence`.
pub fn capacity(
    i: &Inputs,
    service_time: Option<&Estimate>,
    evidence: &mut Vec<Evidence>,
) -> Option<Estimate> {
    let cfg = i.cfg;
    let ready = i.latest(names::REPLICAS_READY);
    let little = match (i.latest(names::CONCURRENCY_LIMIT), service_time) {
        (Some(c), Some(st)) if c > 0.0 && st.value > 0.0 => Some(Estimate::new(
            c / st.value,
            Source::Measured,
            format!(
                "Little's law: concurrency limit {c:.0} / healthy service time {:.4}s ({})",
                st.value, st.from
            ),
        )),
        _ => None,
    };
    let declared = cfg
        .capacity_per_replica
        .zip(ready.filter(|n| *n >= 1.0))
        .map(|(per, n)| {
            (
                per * n,
                format!("spec.detect.capacity_per_replica {per} x {n:.0}"),
            )
        })
        .or_else(|| {
            cfg.capacity_per_s
                .map(|c| (c, "spec.detect.capacity_per_s".to_string()))
        });
    if let (Some(ll), Some((d, what)), Some(Source::Measured)) =
        (&little, &declared, service_time.map(|s| s.source))
    {
        return Some(Estimate::new(
            ll.value,
            Source::Measured,
            format!("{}; {what} = {d:.1} declared, not used", ll.from),
        ));
    }
    if let Some(per) = cfg.capacity_per_replica {
        match ready {
            Some(n) if n >= 1.0 => {
                return Some(Estimate::new(
                    per * n,
                    Source::Declared,
                    format!("spec.detect.capacity_per_replica {per} x {n:.0} replica(s) ready now"),
                ))
            }
            _ => evidence.push(Evidence::new(
                "capacity",
                None,
                format!(
                    "spec.detect.capacity_per_replica {per} declared, but the signal {} has no value above 0: cannot multiply",
                    names::REPLICAS_READY
                ),
            )),
        }
    }
    if let Some(c) = cfg.capacity_per_s {
        return Some(Estimate::new(
            c,
            Source::Declared,
            "spec.detect.capacity_per_s",
        ));
    }
    let highest = |snaps: &mut dyn Iterator<Item = &Snapshot>| {
        snaps
            .filter_map(|s| s.get(names::WORK_RATE).or_else(|| s.get(names::GOODPUT)))
            .filter(|v| *v > 0.0)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    };
    let lower = highest(&mut i.healthy.iter().copied())
        .map(|v| {
            Estimate::new(
                v,
                Source::Measured,
                "highest work rate while healthy in the observed window (a lower bound)",
            )
        })
        .or_else(|| {
            let h = i.lookback?.healthy.as_ref()?;
            h.capacity.map(|v| {
                Estimate::new(
                    v,
                    Source::Measured,
                    format!(
                        "highest work rate in the last healthy period {} (a lower bound)",
                        h.range()
                    ),
                )
            })
        });
    for c in lower.iter().chain(little.iter()) {
        evidence.push(Evidence::new(
            "capacity",
            Some(c.value),
            format!("candidate: {}", c.from),
        ));
    }
    match (lower, little) {
        (Some(l), Some(ll)) if ll.value >= l.value => Some(ll),
        (Some(l), _) => Some(l),
        (None, ll) => ll,
    }
}

/// The healthy warm service time a cold one is compared with: the healthy service time
/// where known, else what the capacity implies by Little's law (the concurrency limit
/// over it), as trusted as the capacity is.
pub fn healthy_reference(
    i: &Inputs,
    service_time: Option<&Estimate>,
    capacity: Option<&Estimate>,
) -> Option<Estimate> {
    if let Some(st) = service_time {
        return Some(st.clone());
    }
    let (c, cap) = (i.latest(names::CONCURRENCY_LIMIT)?, capacity?);
    (c > 0.0 && cap.value > 0.0).then(|| {
        Estimate::new(
            c / cap.value,
            cap.source,
            format!(
                "concurrency limit {c:.0} / capacity {:.1} ({})",
                cap.value, cap.from
            ),
        )
    })
}

/// Cold capacity: capacity / cold factor when the cold factor is known (`cold`: observed
/// in the window, else declared; see [`cold_factor`]); else the highest completion rate
/// right after a restart finished while work was queued (the service was saturated and
/// cold); else capacity itself, flagged as an optimistic assumption.
pub fn capacity_cold(
    window: &[Snapshot],
    capacity: Option<&Estimate>,
    cold: Option<&Estimate>,
) -> Option<Estimate> {
    if let (Some(f), Some(c)) = (cold, capacity) {
        // A known cold factor on a capacity is as good as the capacity.
        let via = format!("cold factor {:.2} ({})", f.value, f.from);
        return Some(Estimate::new(
            c.value / f.value.max(1.0),
            c.source,
            format!("capacity {:.1} / {via}", c.value),
        ));
    }
    if let Some(v) = measured_cold(window) {
        return Some(Estimate::new(
            v,
            Source::Measured,
            "highest completion rate within 10s after the last restart, while queued and not seen overloaded",
        ));
    }
    capacity.map(|c| {
        Estimate::new(
            c.value,
            Source::Assumed,
            "equal to capacity (no cold factor declared or measured): optimistic",
        )
    })
}

fn measured_cold(window: &[Snapshot]) -> Option<f64> {
    let restarted = window.windows(2).rposition(|w| {
        w[0].get(names::REPLICAS_NOT_READY).unwrap_or(0.0) > 0.0
            && w[1].get(names::REPLICAS_NOT_READY) == Some(0.0)
    })? + 1;
    let t0 = window[restarted].at;
    window[restarted..]
        .iter()
        .take_while(|s| {
            s.at.duration_since(t0)
                .map(|d| d.as_secs() < 10)
                .unwrap_or(false)
        })
        .filter(|s| s.get(names::QUEUE_DEPTH).unwrap_or(0.0) > 0.0)
        // Overloaded, completions are the cold capacity over k.
        .filter(|s| regime::regime(s) != Ok(regime::Regime::Overloaded))
        .filter_map(|s| s.get(names::WORK_RATE))
        .fold(None, |acc: Option<f64>, v| {
            Some(acc.map_or(v, |a| a.max(v)))
        })
        .filter(|v| *v > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::signal::Reading;
    use std::collections::BTreeMap;
    use std::time::{Duration, UNIX_EPOCH};

    fn snap(vals: &[(&str, f64)]) -> Snapshot {
        Snapshot {
            at: UNIX_EPOCH + Duration::from_secs(1000),
            readings: vals
                .iter()
                .map(|(k, v)| (k.to_string(), Reading::Value { value: *v }))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    fn st(v: f64) -> Estimate {
        Estimate::new(v, Source::Declared, "test")
    }

    #[test]
    fn the_healthy_service_time_leaves_out_a_cold_start() {
        let cold = snap(&[(names::SERVICE_TIME, 0.080), (names::WARM_FRACTION, 0.2)]);
        let warm = snap(&[(names::SERVICE_TIME, 0.040), (names::WARM_FRACTION, 1.0)]);
        let healthy = [&cold, &warm, &warm];
        let cfg = DetectorConfig::default();
        let i = Inputs {
            cfg: &cfg,
            window: &[],
            healthy: &healthy,
            lookback: None,
        };
        let st = healthy_service_time(&i).unwrap();
        assert!((st.value - 0.040).abs() < 1e-12, "{st:?}");
    }

    #[test]
    fn capacity_per_replica_times_ready_then_little_over_the_lower_bound() {
        let now = snap(&[
            (names::REPLICAS_READY, 3.0),
            (names::CONCURRENCY_LIMIT, 12.0),
        ]);
        let window = [now.clone()];
        let healthy_snap = snap(&[(names::WORK_RATE, 20.0)]);
        let healthy = [&healthy_snap];
        let cfg = DetectorConfig {
            capacity_per_replica: Some(100.0),
            capacity_per_s: Some(1.0),
            ..DetectorConfig::default()
        };
        let i = Inputs {
            cfg: &cfg,
            window: &window,
            healthy: &healthy,
            lookback: None,
        };
        let mut ev = vec![];
        let c = capacity(&i, None, &mut ev).unwrap();
        assert_eq!((c.value, c.source), (300.0, Source::Declared));
        assert!(c.from.contains("3 replica(s) ready"), "{}", c.from);
        // Nothing declared: the healthy work rate (20) is a lower bound; Little's law
        // (12 / 0.04 = 300) says more and wins.
        let cfg = DetectorConfig::default();
        let i = Inputs { cfg: &cfg, ..i };
        let c = capacity(&i, Some(&st(0.040)), &mut ev).unwrap();
        assert!((c.value - 300.0).abs() < 1e-9, "{c:?}");
        assert!(c.from.starts_with("Little's law"), "{}", c.from);
        let c = capacity(&i, None, &mut ev).unwrap();
        assert_eq!(c.value, 20.0);
    }

    /// A runbook declaring the demo's 4 x 40 ms = 100 req/s per replica, on a service
    /// running 16 slots: its own numbers (16 / 40 ms measured while healthy) say 400, and
    /// the plan must not rest on the stale declaration. A declared service time is no
    /// measurement and leaves the declaration standing.
    #[test]
    fn the_service_own_numbers_overrule_a_stale_declared_capacity() {
        let now = snap(&[
            (names::REPLICAS_READY, 1.0),
            (names::CONCURRENCY_LIMIT, 16.0),
        ]);
        let window = [now.clone()];
        let cfg = DetectorConfig {
            capacity_per_replica: Some(100.0),
            ..DetectorConfig::default()
        };
        let i = Inputs {
            cfg: &cfg,
            window: &window,
            healthy: &[],
            lookback: None,
        };
        let mut ev = vec![];
        let measured_st = Estimate::new(0.040, Source::Measured, "while healthy");
        let c = capacity(&i, Some(&measured_st), &mut ev).unwrap();
        assert!((c.value - 400.0).abs() < 1e-9, "{c:?}");
        assert_eq!(c.source, Source::Measured);
        assert!(
            c.from
                .contains("spec.detect.capacity_per_replica 100 x 1 = 100.0 declared, not used"),
            "{}",
            c.from
        );
        let declared_st =
            Estimate::new(0.040, Source::Declared, "spec.detect.healthy_service_time");
        let c = capacity(&i, Some(&declared_st), &mut ev).unwrap();
        assert_eq!((c.value, c.source), (100.0, Source::Declared));
    }
}
