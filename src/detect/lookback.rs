//! The last healthy period in the metrics history: when the observed window holds no
//! healthy moment (the service was stuck before anyone looked), capacity, the healthy
//! service time, the cold factor and the demand baseline can still be measured, from the
//! last time the service was healthy by the detector's own rules. A service that started
//! (or restarted) before that period shows it calm and cold, then calm and warm: the warm
//! scrapes give the healthy service time, the cold ones against it the cold factor
//! ([`super::estimate::cold_against`]), so neither rests on a declaration written for
//! another service.
//!
//! Pure: it judges snapshots a history source ([`crate::metrics::source::MetricSource`]
//! with a history, i.e. Prometheus) produced; the detector's `observe::look_back` fetches
//! them. What it found is [`super::history`]'s, which the estimator reads.

use super::classify::{health, trigger, Health, Trigger};
use super::estimate::{cold_against, warm_throughout};
use super::DetectorConfig;
use crate::metrics::signal::{names, Snapshot};
use std::time::{Duration, SystemTime};

/// A healthy period needs at least this many consecutive healthy snapshots: one good
/// instant between failures is a blip, not a baseline.
pub const MIN_HEALTHY_SNAPSHOTS: usize = 2;

pub use super::history::{HealthyPeriod, Lookback, Peak};

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

fn peak(history: &[Snapshot], signal: &str) -> Option<Peak> {
    history
        .iter()
        .filter_map(|s| s.get(signal).map(|v| (v, s.at)))
        .fold(
            None,
            |best: Option<(f64, SystemTime)>, (v, at)| match best {
                Some((b, _)) if b >= v => best,
                _ => Some((v, at)),
            },
        )
        .map(|(value, at)| Peak {
            value,
            at: rfc3339(at),
        })
}

fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = xs.collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Judge `history` (oldest first, one snapshot every `step` over `span`) by the
/// detector's rules and find the last period that was healthy with no trigger active.
pub fn find(
    history: &[Snapshot],
    cfg: &DetectorConfig,
    span: Duration,
    step: Duration,
) -> Lookback {
    let ok: Vec<bool> = history
        .iter()
        .map(|s| {
            health(s, cfg) == Health::Healthy
                && !matches!(trigger(s, cfg, cfg.demand_per_s), Trigger::Active(_))
        })
        .collect();
    let points = history
        .iter()
        .filter(|s| s.readings.values().any(|r| r.value().is_some()))
        .count();
    let mut found = None;
    let mut end = ok.len();
    while end > 0 {
        let Some(last) = ok[..end].iter().rposition(|h| *h) else {
            break;
        };
        let first = ok[..=last].iter().rposition(|h| !*h).map_or(0, |i| i + 1);
        if last + 1 - first >= MIN_HEALTHY_SNAPSHOTS {
            found = Some((first, last));
            break;
        }
        end = first;
    }
    let healthy = found.map(|(first, last)| {
        let period = &history[first..=last];
        let newest = history.last().map_or(history[last].at, |s| s.at);
        let service_time = mean(
            period
                .iter()
                .filter(|s| warm_throughout(period, s))
                .filter_map(|s| s.get(names::SERVICE_TIME)),
        )
        .filter(|v| *v > 0.0);
        let cold = match service_time {
            Some(st) => cold_against(period, st),
            None => Err("no scrape warm throughout its rate window to compare with".into()),
        };
        let range = format!(
            "{} .. {} (metrics history)",
            rfc3339(history[first].at),
            rfc3339(history[last].at)
        );
        HealthyPeriod {
            from: rfc3339(history[first].at),
            to: rfc3339(history[last].at),
            ended_ago_s: newest
                .duration_since(history[last].at)
                .unwrap_or_default()
                .as_secs_f64(),
            snapshots: period.len(),
            capacity: period
                .iter()
                .filter_map(|s| s.get(names::WORK_RATE).or_else(|| s.get(names::GOODPUT)))
                .filter(|v| *v > 0.0)
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v)))),
            service_time,
            cold_factor: cold.as_ref().ok().map(|c| c.0),
            cold_factor_from: Some(match cold {
                Ok((_, n)) => format!(
                    "the service time of {n} calm cold scrapes against the warm one in the last healthy period {}",
                    range
                ),
                Err(why) => format!("not measured in the last healthy period: {why}"),
            }),
            demand: mean(
                period
                    .iter()
                    .filter_map(|s| s.get(names::FIRST_ATTEMPT_RATE)),
            )
            .filter(|v| *v > 0.0),
        }
    });
    let fmt = crate::util::duration::format;
    let note = match &healthy {
        Some(h) => format!(
            "last healthy period in the {} of metrics history: {} ({} snapshots {} apart)",
            fmt(span),
            h.range(),
            h.snapshots,
            fmt(step)
        ),
        None if points == 0 => format!("the metrics history holds no data in the last {}", fmt(span)),
        None => format!(
            "no healthy period (at least {MIN_HEALTHY_SNAPSHOTS} healthy snapshots {} apart) in the last {} of metrics history ({points} snapshots with data)",
            fmt(step),
            fmt(span)
        ),
    };
    Lookback {
        span,
        step,
        points,
        healthy,
        peak_goodput: peak(history, names::GOODPUT),
        peak_work: peak(history, names::WORK_RATE),
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::signal::Reading;
    use std::collections::BTreeMap;
    use std::time::UNIX_EPOCH;

    fn snap(t: u64, offered: f64, goodput: f64, work: f64, st: f64) -> Snapshot {
        let mut readings = BTreeMap::new();
        for (k, v) in [
            (names::OFFERED_RATE, offered),
            (names::GOODPUT, goodput),
            (names::WORK_RATE, work),
            (names::SERVICE_TIME, st),
            (names::FIRST_ATTEMPT_RATE, offered),
            (names::REPLICAS_NOT_READY, 0.0),
        ] {
            readings.insert(k.to_string(), Reading::Value { value: v });
        }
        Snapshot {
            at: UNIX_EPOCH + Duration::from_secs(1_800_000_000 + t),
            readings,
        }
    }

    #[test]
    fn finds_the_last_healthy_period_and_measures_it() {
        let mut h = vec![];
        // An older healthy stretch, a failure, the last healthy stretch, then stuck.
        h.extend((0..5).map(|t| snap(t * 60, 10.0, 10.0, 10.0, 0.040)));
        h.extend((5..8).map(|t| snap(t * 60, 80.0, 1.0, 50.0, 0.080)));
        h.extend((8..12).map(|t| {
            snap(
                t * 60,
                20.0 + t as f64,
                20.0 + t as f64,
                20.0 + t as f64,
                0.042,
            )
        }));
        h.push(snap(12 * 60, 25.0, 25.0, 25.0, 0.040)); // one blip between failures
        h.extend((13..20).map(|t| snap(t * 60, 80.0, 0.5, 50.0, 0.080)));
        let lb = find(
            &h,
            &DetectorConfig::default(),
            Duration::from_secs(3600),
            Duration::from_secs(60),
        );
        let p = lb.healthy.expect("a healthy period");
        assert_eq!(p.snapshots, 5, "{p:?}"); // 8..=12: the blip is part of the same run
        assert_eq!(p.capacity, Some(31.0));
        assert!((p.service_time.unwrap() - 0.0416).abs() < 1e-9);
        assert!(p.from.starts_with("2027-01-15T08:"), "{}", p.from);
        assert_eq!(p.ended_ago_s, 7.0 * 60.0);
        assert_eq!(lb.peak_goodput.unwrap().value, 31.0);
        assert!(lb.note.contains("last healthy period"), "{}", lb.note);
    }

    #[test]
    fn a_lone_healthy_snapshot_is_not_a_period_and_no_data_says_so() {
        let mut h: Vec<Snapshot> = (0..5)
            .map(|t| snap(t * 60, 80.0, 1.0, 50.0, 0.08))
            .collect();
        h[2] = snap(120, 20.0, 20.0, 20.0, 0.04);
        let lb = find(
            &h,
            &DetectorConfig::default(),
            Duration::from_secs(300),
            Duration::from_secs(60),
        );
        assert_eq!(lb.healthy, None);
        assert!(lb.note.contains("no healthy period"), "{}", lb.note);
        assert_eq!(lb.peak_goodput.unwrap().value, 20.0);
        let empty: Vec<Snapshot> = (0..3)
            .map(|t| Snapshot {
                at: UNIX_EPOCH + Duration::from_secs(t),
                readings: BTreeMap::new(),
            })
            .collect();
        let lb = find(
            &empty,
            &DetectorConfig::default(),
            Duration::from_secs(3),
            Duration::from_secs(1),
        );
        assert!(lb.note.contains("holds no data"), "{}", lb.note);
    }

    /// A snapshot of the service alone at `t` s: first-attempt demand `offered`, the
    /// useful and all completions, the service time, the queue and the warm fraction.
    fn svc(t: u64, offered: f64, goodput: f64, work: f64, st: f64, queue: f64, w: f64) -> Snapshot {
        let mut s = snap(t, offered, goodput, work, st);
        for (k, v) in [
            (names::QUEUE_DEPTH, queue),
            (names::WARM_FRACTION, w),
            (names::CONCURRENCY_LIMIT, 16.0),
            (names::REPLICAS_READY, 1.0),
            (names::CLIENT_TIMEOUT, 1.0),
        ] {
            s.readings
                .insert(k.to_string(), Reading::Value { value: v });
        }
        s
    }

    /// A service started cold (cold factor 3: a request costs 0.04 s x (1 + 2 (1 - w)),
    /// over the 5 s rate window's mean warmth), calm while it warms over 20 s, warm and
    /// calm for 15 s more, then stuck (k 2.5) when someone looks.
    fn started_cold_then_stuck() -> Vec<Snapshot> {
        let w = |i: u64| (i as f64 / 20.0).min(1.0);
        let mean_w = |i: u64| {
            let seen: Vec<f64> = (i.saturating_sub(5)..=i).map(w).collect();
            seen.iter().sum::<f64>() / seen.len() as f64
        };
        let mut h: Vec<Snapshot> = (0..35u64)
            .map(|i| {
                let st = 0.040 * (1.0 + 2.0 * (1.0 - mean_w(i)));
                svc(i, 30.0, 30.0, 30.0, st, 0.0, w(i))
            })
            .collect();
        h.extend((35..50u64).map(|i| svc(i, 400.0, 5.0, 160.0, 0.100, 900.0, 1.0)));
        h
    }

    #[test]
    fn the_healthy_period_gives_the_warm_service_time_and_the_cold_factor() {
        let h = started_cold_then_stuck();
        let lb = find(
            &h,
            &DetectorConfig::default(),
            Duration::from_secs(3600),
            Duration::from_secs(1),
        );
        let p = lb.healthy.expect("a healthy period");
        // The warm scrapes only: the cold ones cost up to three times as much (warm is
        // 0.95 and up, so the first warm windows carry a little of the last cold work).
        assert!(
            (p.service_time.unwrap() - 0.040).abs() < 0.040 * 0.005,
            "{p:?}"
        );
        let f = p.cold_factor.expect("the calm cold scrapes show it");
        assert!((f - 3.0).abs() < 3.0 * 0.005, "{p:?}");
        let from = p.cold_factor_from.unwrap();
        assert!(from.contains("calm cold scrapes"), "{from}");
        assert!(from.contains("(metrics history)"), "{from}");
    }

    /// Attached after the service got stuck, on a runbook declaring another service's
    /// numbers (100 req/s per replica, cold factor 2): the window alone leaves the
    /// healthy reference to the declarations, so the detector looks back, and the
    /// history's warm service time (16 slots / 0.04 s = 400 req/s by Little's law) and
    /// cold factor 3 replace them, each saying it came from the metrics history.
    #[test]
    fn a_late_window_takes_its_healthy_reference_from_the_history_before_the_declarations() {
        let cfg = DetectorConfig {
            capacity_per_replica: Some(100.0),
            cold_factor: Some(2.0),
            ..DetectorConfig::default()
        };
        let h = started_cold_then_stuck();
        let window = &h[35..];
        let now = window.last().unwrap().at;
        let alone = crate::detect::detect_with(window, &cfg, None, now);
        assert_eq!(alone.capacity, Some(100.0), "{alone:?}");
        let declared = alone.capacity_from.clone().unwrap_or_default();
        assert!(declared.starts_with("spec.detect."), "{declared}");
        let lb = find(&h, &cfg, Duration::from_secs(3600), Duration::from_secs(1));
        let v = crate::detect::detect_with(window, &cfg, Some(&lb), now);
        let cap = v.capacity.unwrap();
        assert!((cap - 400.0).abs() < 400.0 * 0.005, "{v:?}");
        let from = v.capacity_from.unwrap();
        assert!(
            from.contains("metrics history") && from.contains("not used"),
            "{from}"
        );
        assert_eq!(v.sources.cold_factor, Some(crate::detect::Source::Measured));
        let cold = v.capacity_cold_from.unwrap();
        assert!(
            cold.contains("cold factor 3.0") && cold.contains("metrics history"),
            "{cold}"
        );
        // Warm and stuck now: k is the cost now over the healthy cost, 0.1 / 0.04.
        assert!((v.k.unwrap() - 2.5).abs() < 2.5 * 0.005, "{:?}", v.k_from);
    }
}
