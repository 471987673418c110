//! Work amplification k: how much more a request costs the service while it is stuck
//! than when it is healthy, with the candidates it was chosen from.

use super::{Estimate, Source};
use crate::detect::{DetectorConfig, Evidence};
use crate::metrics::signal::{names, Snapshot};

/// k, with the range of candidates it was chosen from.
#[derive(Debug, Clone, PartialEq)]
pub struct KEstimate {
    pub chosen: Estimate,
    /// Lowest and highest candidate considered (each clamped to [1, k_max]).
    pub range: [f64; 2],
}

/// Work amplification k now. A declared k wins. Otherwise the cost-based candidates
/// (service time now / healthy; healthy capacity / completions while queued) are upper
/// bounds: a cold service is slower too, so each is divided by the cold multiplier now
/// where the cold factor is declared and the warm fraction is measured (cost falling
/// linearly as caches warm), and the smallest, the tightest bound, is used. Waste ratios
/// (completions per useful response, attempts per first attempt) count work nobody waits
/// for, not the cost of a request, so they are used only when nothing else is known.
/// Every candidate goes in `evidence`, with the range considered.
pub fn k(
    cfg: &DetectorConfig,
    now: &Snapshot,
    service_time: Option<&Estimate>,
    capacity: Option<&Estimate>,
    evidence: &mut Vec<Evidence>,
) -> Option<KEstimate> {
    let cold_now = match (cfg.cold_factor, now.get(names::WARM_FRACTION)) {
        (Some(f), Some(w)) if f > 1.0 => Some((1.0 + (f - 1.0) * (1.0 - w.clamp(0.0, 1.0)), w, f)),
        _ => None,
    };
    let uncold = |value: f64, from: String| match cold_now {
        Some((m, w, f)) if m > 1.0 + 1e-6 => Estimate::new(
            value / m,
            Source::Measured,
            format!("{from} / cold multiplier {m:.2} (warm fraction {w:.2}, cold factor {f})"),
        ),
        _ => Estimate::new(value, Source::Measured, from),
    };
    let mut cost: Vec<Estimate> = Vec::new();
    if let (Some(st), Some(h)) = (now.get(names::SERVICE_TIME), service_time) {
        if h.value > 0.0 && st > 0.0 {
            cost.push(uncold(
                st / h.value,
                format!("service time now {st:.4}s / healthy {:.4}s", h.value),
            ));
        }
    }
    if let (Some(c), Some(w), Some(q)) = (
        capacity,
        now.get(names::WORK_RATE),
        now.get(names::QUEUE_DEPTH),
    ) {
        if q > 0.0 && w > 0.0 {
            cost.push(uncold(
                c.value / w,
                format!(
                    "capacity {:.1}/s / completions {w:.1}/s while {q:.0} queued",
                    c.value
                ),
            ));
        }
    }
    let mut waste: Vec<Estimate> = Vec::new();
    if let (Some(w), Some(g)) = (now.get(names::WORK_RATE), now.get(names::GOODPUT)) {
        if g > 0.0 {
            waste.push(Estimate::new(
                w / g,
                Source::Measured,
                format!("completions {w:.1}/s per useful {g:.1}/s (waste ratio)"),
            ));
        }
    }
    if let (Some(o), Some(f)) = (
        now.get(names::OFFERED_RATE),
        now.get(names::FIRST_ATTEMPT_RATE),
    ) {
        if f > 0.0 {
            waste.push(Estimate::new(
                o / f,
                Source::Measured,
                format!("attempts {o:.1}/s per first attempt {f:.1}/s (waste ratio)"),
            ));
        }
    }
    let declared = cfg
        .k
        .map(|k| Estimate::new(k, Source::Declared, "spec.detect.k"));
    let clamp = |v: f64| {
        if v.is_finite() {
            v.clamp(1.0, cfg.k_max)
        } else {
            cfg.k_max
        }
    };
    let all: Vec<&Estimate> = declared.iter().chain(&cost).chain(&waste).collect();
    for c in &all {
        evidence.push(Evidence::new(
            "k",
            Some(c.value),
            format!("candidate: {}", c.from),
        ));
    }
    let lo = all
        .iter()
        .map(|c| clamp(c.value))
        .fold(f64::INFINITY, f64::min);
    let hi = all.iter().map(|c| clamp(c.value)).fold(0.0, f64::max);
    // The smallest bound; a later candidate must be clearly smaller (1%) to replace an
    // earlier one, so agreeing measurements keep the most direct (the service time).
    let tightest = |v: &[Estimate]| {
        v.iter()
            .fold(None, |best: Option<&Estimate>, c| match best {
                Some(b) if c.value >= 0.99 * b.value => Some(b),
                _ => Some(c),
            })
            .cloned()
    };
    let mut best = match (declared.clone(), tightest(&cost), tightest(&waste)) {
        (Some(d), _, _) => d,
        (None, Some(c), _) => c,
        (None, None, Some(w)) => Estimate {
            from: format!("{} (no cost-based estimate: likely overstated)", w.from),
            ..w
        },
        (None, None, None) => return None,
    };
    if !best.value.is_finite() || best.value < 1.0 {
        best.from = format!(
            "{} = {:.2}, raised to 1 (k < 1 means no amplification)",
            best.from, best.value
        );
        best.value = 1.0;
    } else if best.value > cfg.k_max {
        best.from = format!(
            "{} = {:.2}, capped at k_max {}",
            best.from, best.value, cfg.k_max
        );
        best.value = cfg.k_max;
    }
    if all.len() > 1 {
        evidence.push(Evidence::new(
            "k",
            Some(best.value),
            format!(
                "range considered {lo:.2} .. {hi:.2} over {} candidate(s); chose {:.2} ({})",
                all.len(),
                best.value,
                best.source.as_str()
            ),
        ));
    }
    Some(KEstimate {
        chosen: best,
        range: [lo, hi],
    })
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

    /// The demo right after a restart: cold (warm fraction 0, cold factor 2), overloaded
    /// (k = 2), so the service takes 4x its healthy time, and nearly nothing is useful.
    fn cold_and_stuck() -> Snapshot {
        snap(&[
            (names::SERVICE_TIME, 0.160),
            (names::WORK_RATE, 25.0),
            (names::QUEUE_DEPTH, 200.0),
            (names::GOODPUT, 1.0),
            (names::OFFERED_RATE, 80.0),
            (names::FIRST_ATTEMPT_RATE, 2.0),
            (names::WARM_FRACTION, 0.0),
        ])
    }

    fn st(v: f64) -> Estimate {
        Estimate::new(v, Source::Declared, "test")
    }

    #[test]
    fn k_after_a_restart_is_not_the_waste_ratio_and_corrects_for_coldness() {
        let cfg = DetectorConfig {
            cold_factor: Some(2.0),
            ..DetectorConfig::default()
        };
        let cap = st(100.0);
        let mut ev = vec![];
        let k = k(
            &cfg,
            &cold_and_stuck(),
            Some(&st(0.040)),
            Some(&cap),
            &mut ev,
        )
        .unwrap();
        assert!((k.chosen.value - 2.0).abs() < 1e-9, "{k:?}");
        assert_eq!(k.chosen.source, Source::Measured);
        assert!(
            k.chosen.from.contains("cold multiplier 2.00"),
            "{}",
            k.chosen.from
        );
        // The waste ratios (25 and 40) were considered, capped at k_max 20.
        assert_eq!(k.range, [2.0, 20.0]);
        assert!(ev
            .iter()
            .any(|e| e.note.contains("range considered 2.00 .. 20.00")));
    }

    #[test]
    fn a_declared_k_wins_over_any_measurement() {
        let cfg = DetectorConfig {
            k: Some(2.0),
            ..DetectorConfig::default()
        };
        let mut ev = vec![];
        let k = k(&cfg, &cold_and_stuck(), Some(&st(0.040)), None, &mut ev).unwrap();
        assert_eq!((k.chosen.value, k.chosen.source), (2.0, Source::Declared));
        // Without a cold factor the service-time ratio (4) stays an upper bound.
        assert_eq!(k.range, [2.0, 20.0]);
    }
}
