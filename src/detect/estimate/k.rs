//! Work amplification k: how much more a request costs the service while it is stuck
//! than when it is healthy, with the candidates it was chosen from.

use super::{Estimate, Source, Warmth};
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
/// (service time now / healthy; healthy capacity / completions while queued) each measure
/// the cost of a request now over the healthy cost: a cold service is slower too, so each
/// is divided by the cold multiplier where the cold factor is known (`cold`: observed, else
/// declared, see [`super::cold`]) and the warm fraction is measured (cost falling linearly
/// as caches warm), the multiplier the rate window's cost carries (`warmth`: harmonic
/// while requests are queued, see [`super::warmth`]). They are combined into
/// one estimate, their geometric mean (each is a ratio, and each errs by a factor: noise in
/// a rate window, the warm fraction changing within it), and the range they span is the
/// estimate's uncertainty; a plan sizes its shed for the top of it. Waste ratios
/// (completions per useful response, attempts per first attempt) count work nobody waits
/// for, not the cost of a request (they run to tens in a stuck state), so they are used
/// only when nothing else is known. Every candidate goes in `evidence`, with the range.
///
/// `Err` says why k is unknown, never a number standing in for it: no evidence at all; a
/// waste ratio of 1 or less (in a stuck state the waste is there, so a ratio at 1 says the
/// signal cannot see it: clients without an attempt header make every retry a first
/// attempt); or a request costing less now than its healthy cost (k < 1 is impossible, so
/// the healthy reference, a declared capacity or healthy service time, is stale).
pub fn k(
    cfg: &DetectorConfig,
    now: &Snapshot,
    warmth: Option<&Warmth>,
    service_time: Option<&Estimate>,
    capacity: Option<&Estimate>,
    cold: Option<&Estimate>,
    evidence: &mut Vec<Evidence>,
) -> Result<KEstimate, String> {
    // Requests queued: every slot is busy through the window (the capacity candidate
    // rests on it too), so the rate window's cost carries the harmonic mean multiplier.
    let saturated = now.get(names::QUEUE_DEPTH).is_some_and(|q| q > 0.0);
    let cold_now = match (cold, warmth) {
        (Some(c), Some(w)) if c.value > 1.0 => Some((
            w.multiplier(c.value, saturated),
            w.describe(saturated),
            c.value,
            c.source,
        )),
        _ => None,
    };
    let uncold = |value: f64, from: String| match &cold_now {
        Some((m, w, f, src)) if *m > 1.0 + 1e-6 => Estimate::new(
            value / m,
            Source::Measured,
            format!(
                "{from} / cold multiplier {m:.2} ({w}, cold factor {f:.2}, {})",
                src.as_str()
            ),
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
    // A waste ratio at or under 1 measures nothing (see above): evidence, not a candidate.
    let (waste, blind): (Vec<Estimate>, Vec<Estimate>) =
        waste.into_iter().partition(|w| w.value > 1.0);
    for b in &blind {
        evidence.push(Evidence::new(
            "k",
            Some(b.value),
            format!(
                "not a candidate: {} (at 1 the signal cannot see the waste; clients without an attempt header make every retry a first attempt)",
                b.from
            ),
        ));
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
    // The range is over what the estimate rests on: the declaration and the cost-based
    // candidates, or the waste ratios when there is nothing else.
    let ranged: Vec<&Estimate> = if cost.is_empty() {
        declared.iter().chain(&waste).collect()
    } else {
        declared.iter().chain(&cost).collect()
    };
    let lo = ranged
        .iter()
        .map(|c| clamp(c.value))
        .fold(f64::INFINITY, f64::min);
    let hi = ranged.iter().map(|c| clamp(c.value)).fold(0.0, f64::max);
    let combined = |v: &[Estimate]| -> Option<Estimate> {
        match v {
            [] => None,
            [one] => Some(one.clone()),
            many => {
                let logs: f64 = many.iter().map(|c| clamp(c.value).ln()).sum();
                Some(Estimate::new(
                    (logs / many.len() as f64).exp(),
                    Source::Measured,
                    format!(
                        "geometric mean of {}",
                        many.iter()
                            .map(|c| format!("{:.2} ({})", c.value, c.from))
                            .collect::<Vec<_>>()
                            .join(" and ")
                    ),
                ))
            }
        }
    };
    let mut best = match (declared.clone(), combined(&cost), combined(&waste)) {
        (Some(d), _, _) => d,
        (None, Some(c), _) => c,
        (None, None, Some(w)) => Estimate {
            from: format!("{} (no cost-based estimate: likely overstated)", w.from),
            ..w
        },
        (None, None, None) if blind.is_empty() => {
            return Err("no evidence: no spec.detect.k, no healthy service time or capacity to compare the cost of a request with, no completion or attempt counts".into())
        }
        (None, None, None) => {
            return Err(format!(
                "no retry evidence: {} (the clients send no attempt header, or the signal cannot tell retries from demand), and nothing to compare the cost of a request with",
                blind.iter().map(|b| format!("{} = {:.2}", b.from, b.value)).collect::<Vec<_>>().join("; ")
            ))
        }
    };
    if best.source == Source::Measured && best.value < 1.0 {
        return Err(format!(
            "a request costs less now than its healthy cost ({} = {:.2}): the healthy reference (a declared capacity or healthy service time) is stale, so k is not measured",
            best.from, best.value
        ));
    }
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
                "range considered {lo:.2} .. {hi:.2} over {} of {} candidate(s); chose {:.2} ({})",
                ranged.len(),
                all.len(),
                best.value,
                best.source.as_str()
            ),
        ));
    }
    Ok(KEstimate {
        chosen: best,
        range: [lo, hi],
    })
}

/// The warm fraction of `s` as a mean over the rate window ending at it, when `s` has one:
/// a service time is a mean over that window, so its warmth is the window's too.
pub fn warmth_over_rate_window(window: &[Snapshot], s: &Snapshot) -> Option<f64> {
    s.get(names::WARM_FRACTION)?;
    mean_warmth(window, s).or_else(|| s.get(names::WARM_FRACTION))
}

/// The mean warm fraction over the rate window ending at `last`, when any scrape in it
/// has one. Windows are oldest first, so the rate window is a slice.
fn mean_warmth(window: &[Snapshot], last: &Snapshot) -> Option<f64> {
    let v: Vec<f64> = rate_window(window, last)
        .iter()
        .filter_map(|s| s.get(names::WARM_FRACTION))
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The scrapes of `window` (oldest first) in the built-in signals' rate window ending at
/// `last`: the ones a rate read at `last` spans.
pub(super) fn rate_window<'a>(window: &'a [Snapshot], last: &Snapshot) -> &'a [Snapshot] {
    let span = crate::util::duration::parse(crate::detect::default_signals::RATE_WINDOW)
        .unwrap_or_default();
    let from = last.at.checked_sub(span).unwrap_or(last.at);
    let lo = window.partition_point(|s| s.at < from);
    let hi = window.partition_point(|s| s.at <= last.at);
    &window[lo..hi.max(lo)]
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
        let cfg = DetectorConfig::default();
        let cap = st(100.0);
        let mut ev = vec![];
        let k = k(
            &cfg,
            &cold_and_stuck(),
            Some(&Warmth::at(0.0)),
            Some(&st(0.040)),
            Some(&cap),
            Some(&st(2.0)),
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
        // The waste ratios (25 and 40) are evidence, outside the range of the estimate.
        assert_eq!(k.range, [2.0, 2.0]);
        assert!(ev
            .iter()
            .any(|e| e.note.contains("range considered 2.00 .. 2.00 over 2 of 4")));
    }

    #[test]
    fn a_declared_k_wins_over_any_measurement() {
        let cfg = DetectorConfig {
            k: Some(2.0),
            ..DetectorConfig::default()
        };
        let mut ev = vec![];
        let k = k(
            &cfg,
            &cold_and_stuck(),
            Some(&Warmth::at(0.0)),
            Some(&st(0.040)),
            None,
            None,
            &mut ev,
        )
        .unwrap();
        assert_eq!((k.chosen.value, k.chosen.source), (2.0, Source::Declared));
        // Without a cold factor the service-time ratio (4) stays an upper bound.
        assert_eq!(k.range, [2.0, 4.0]);
    }

    #[test]
    fn disagreeing_cost_candidates_combine_into_their_geometric_mean_and_span_the_range() {
        let cfg = DetectorConfig::default();
        // Service time says 4.5 (0.180 / 0.040), capacity over completions says 2 (100 / 50).
        let now = snap(&[
            (names::SERVICE_TIME, 0.180),
            (names::WORK_RATE, 50.0),
            (names::QUEUE_DEPTH, 200.0),
        ]);
        let mut ev = vec![];
        let k = k(
            &cfg,
            &now,
            None,
            Some(&st(0.040)),
            Some(&st(100.0)),
            None,
            &mut ev,
        )
        .unwrap();
        assert!((k.chosen.value - 3.0).abs() < 1e-9, "{k:?}");
        assert_eq!(k.range, [2.0, 4.5]);
        assert!(
            k.chosen.from.starts_with("geometric mean of 4.50"),
            "{}",
            k.chosen.from
        );
    }

    #[test]
    fn no_retry_evidence_is_unknown_with_its_reason_not_one() {
        let cfg = DetectorConfig::default();
        // Clients without an attempt header: every attempt is a first attempt.
        let now = snap(&[
            (names::OFFERED_RATE, 80.0),
            (names::FIRST_ATTEMPT_RATE, 80.0),
        ]);
        let mut ev = vec![];
        let e = k(&cfg, &now, None, None, None, None, &mut ev).unwrap_err();
        assert!(e.starts_with("no retry evidence"), "{e}");
        assert!(e.contains("attempt header"), "{e}");
        assert!(ev.iter().any(|e| e.note.starts_with("not a candidate")));
        // With abandoned work visible, the blind ratio is left out, not averaged in.
        let now = snap(&[
            (names::OFFERED_RATE, 80.0),
            (names::FIRST_ATTEMPT_RATE, 80.0),
            (names::WORK_RATE, 40.0),
            (names::GOODPUT, 4.0),
        ]);
        let got = k(&cfg, &now, None, None, None, None, &mut vec![]).unwrap();
        assert!((got.chosen.value - 10.0).abs() < 1e-9, "{got:?}");
        // Nothing at all.
        let e = k(&cfg, &snap(&[]), None, None, None, None, &mut vec![]).unwrap_err();
        assert!(e.starts_with("no evidence"), "{e}");
    }

    #[test]
    fn a_cost_under_the_healthy_one_says_the_reference_is_stale() {
        let cfg = DetectorConfig::default();
        // Completions 150/s against a declared capacity of 100/s while queued.
        let now = snap(&[(names::WORK_RATE, 150.0), (names::QUEUE_DEPTH, 50.0)]);
        let e = k(&cfg, &now, None, None, Some(&st(100.0)), None, &mut vec![]).unwrap_err();
        assert!(e.contains("stale"), "{e}");
    }

    /// One replica, 8 slots x 0.04 s (200 req/s), calm and warm, then down, then back
    /// cold (cold factor 3.7, declared) with the retrying clients' backlog queued (k 2.5),
    /// warming by its work (160 completions) within the 5 s rate window it is judged over,
    /// scraped every 0.5 s. Saturated, it finishes requests at 200 / (2.5 m(w)): the
    /// window's service time and completions are the fluid model's, integrated by the
    /// millisecond.
    fn warming_while_saturated() -> Vec<Snapshot> {
        let (conc, healthy, f, k, warm_after) = (8.0, 0.040, 3.7, 2.5, 160.0);
        let capacity = conc / healthy;
        // Completions since the restart at each half second after it.
        let mut done = vec![0.0];
        let mut n: f64 = 0.0;
        for ms in 1..=5_000 {
            let w = (n / warm_after).min(1.0);
            n += capacity / (k * (1.0 + (f - 1.0) * (1.0 - w))) / 1000.0;
            if ms % 500 == 0 {
                done.push(n);
            }
        }
        let warm = |i: usize| (done[i] / warm_after).min(1.0);
        (0..=50usize)
            .map(|t| {
                let mut r = vec![
                    (names::CONCURRENCY_LIMIT, conc),
                    (names::REPLICAS_READY, 1.0),
                    (names::CLIENT_TIMEOUT, 1.0),
                    (names::FIRST_ATTEMPT_RATE, 100.0),
                ];
                match t {
                    0..30 => r.extend([
                        (names::OFFERED_RATE, 100.0),
                        (names::GOODPUT, 100.0),
                        (names::WORK_RATE, 100.0),
                        (names::ERROR_RATIO, 0.0),
                        (names::SERVICE_TIME, healthy),
                        (names::QUEUE_DEPTH, 0.0),
                        (names::WARM_FRACTION, 1.0),
                    ]),
                    30..40 => r.extend([(names::OFFERED_RATE, 300.0), (names::ERROR_RATIO, 1.0)]),
                    _ => {
                        let i = t - 40;
                        let from = i.saturating_sub(10);
                        let count = done[i] - done[from];
                        let span = (i - from) as f64 / 2.0;
                        r.extend([
                            (names::OFFERED_RATE, 400.0),
                            (names::ERROR_RATIO, 0.95),
                            (names::QUEUE_DEPTH, 800.0),
                            (names::WARM_FRACTION, warm(i)),
                        ]);
                        if i > 0 {
                            r.extend([
                                (names::GOODPUT, 0.05 * count / span),
                                (names::WORK_RATE, count / span),
                                // Every slot busy: busy slot-seconds over completions.
                                (names::SERVICE_TIME, conc * span / count),
                            ]);
                        }
                    }
                }
                Snapshot {
                    at: UNIX_EPOCH + Duration::from_millis(1_000_000 + 500 * t as u64),
                    readings: r
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), Reading::Value { value: v }))
                        .collect(),
                }
            })
            .collect()
    }

    /// The warm seconds of the window finish more requests than the cold ones, so its
    /// cost carries the harmonic mean of the cold multiplier, not the multiplier at the
    /// mean warm fraction (0.44 here, 2.50): divided by that one, k read 2.17 for 2.5 (-13%).
    #[test]
    fn a_service_warming_while_saturated_reads_its_k_not_low() {
        let cfg = DetectorConfig {
            cold_factor: Some(3.7),
            ..DetectorConfig::default()
        };
        let window = warming_while_saturated();
        let last = window.last().unwrap();
        let w = last.get(names::WARM_FRACTION).unwrap();
        assert!(w > 0.9, "warm fraction {w}: not warm by the window's end");
        let v = crate::detect::detect_with(&window, &cfg, None, last.at);
        assert!(
            (v.healthy_service_time.unwrap() - 0.040).abs() < 1e-9,
            "{v:?}"
        );
        assert_eq!(v.sources.cold_factor, Some(Source::Declared), "{v:?}");
        let got = v.k.unwrap();
        assert!((got / 2.5 - 1.0).abs() < 0.02, "k {got}: {:?}", v.k_from);
    }
}
