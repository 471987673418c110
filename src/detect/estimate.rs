//! Estimates the plan needs: work amplification k, healthy capacity and cold capacity.
//! Each estimate says where it came from, because a plan built on a guess must say so.

use super::{DetectorConfig, Evidence};
use crate::metrics::signal::{names, Snapshot};
use serde::{Deserialize, Serialize};

/// Where a number the plan rests on came from. A plan built on a guess must say so, and a
/// number declared by someone who knows the service is trusted over a few seconds of
/// measurement, so the kind of source travels with the number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Estimated from the observed window.
    Measured,
    /// Configured: the runbook's `spec.detect` (or settings standing in for it).
    Declared,
    /// Given by the operator for this run (`--assume-*`, `recover plan` flags).
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

/// Healthy capacity: configured, or the highest work rate seen while healthy (a lower
/// bound: a healthy service is rarely saturated).
pub fn capacity(cfg: &DetectorConfig, healthy: &[&Snapshot]) -> Option<Estimate> {
    if let Some(c) = cfg.capacity_per_s {
        return Some(Estimate {
            value: c,
            source: Source::Declared,
            from: "configured (spec.detect.capacity_per_s)".into(),
        });
    }
    let best = healthy
        .iter()
        .filter_map(|s| s.get(names::WORK_RATE).or_else(|| s.get(names::GOODPUT)))
        .fold(None, |acc: Option<f64>, v| {
            Some(acc.map_or(v, |a| a.max(v)))
        })?;
    (best > 0.0).then(|| Estimate {
        value: best,
        source: Source::Measured,
        from: "measured: highest work rate while healthy (a lower bound)".into(),
    })
}

/// Cold capacity: capacity / cold_factor when configured; else the highest completion
/// rate right after a restart finished while work was queued (the service was saturated
/// and cold); else capacity itself, flagged as an optimistic assumption.
pub fn capacity_cold(
    cfg: &DetectorConfig,
    window: &[Snapshot],
    capacity: Option<&Estimate>,
) -> Option<Estimate> {
    if let (Some(f), Some(c)) = (cfg.cold_factor, capacity) {
        // A declared cold factor on a measured capacity is as good as the capacity.
        return Some(Estimate {
            value: c.value / f.max(1.0),
            source: c.source,
            from: format!("capacity {:.1} / configured cold factor {f}", c.value),
        });
    }
    if let Some(v) = measured_cold(window) {
        return Some(Estimate {
            value: v,
            source: Source::Measured,
            from:
                "measured: highest completion rate within 10s after the last restart, while queued"
                    .into(),
        });
    }
    capacity.map(|c| Estimate {
        value: c.value,
        source: Source::Assumed,
        from: "assumed equal to capacity (no cold factor configured or measured): optimistic"
            .into(),
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
        .filter_map(|s| s.get(names::WORK_RATE))
        .fold(None, |acc: Option<f64>, v| {
            Some(acc.map_or(v, |a| a.max(v)))
        })
        .filter(|v| *v > 0.0)
}

/// Work amplification k at `now`, from the first available of: configured; service time
/// now vs healthy; configured capacity vs the completion rate while saturated; completions
/// per useful response; attempts per demanded request. Every candidate goes in `evidence`.
pub fn k(
    cfg: &DetectorConfig,
    now: &Snapshot,
    healthy: &[&Snapshot],
    evidence: &mut Vec<Evidence>,
) -> Option<Estimate> {
    let mut candidates: Vec<Estimate> = Vec::new();
    if let Some(k) = cfg.k {
        candidates.push(Estimate {
            value: k,
            source: Source::Declared,
            from: "configured (spec.detect.k)".into(),
        });
    }
    let healthy_st = cfg
        .healthy_service_time
        .map(|d| d.as_secs_f64())
        .or_else(|| {
            let v: Vec<f64> = healthy
                .iter()
                .filter_map(|s| s.get(names::SERVICE_TIME))
                .collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        });
    if let (Some(st), Some(h)) = (now.get(names::SERVICE_TIME), healthy_st) {
        if h > 0.0 {
            candidates.push(Estimate {
                value: st / h,
                source: Source::Measured,
                from: format!("service time now {st:.4}s / healthy {h:.4}s"),
            });
        }
    }
    if let (Some(c), Some(w), Some(q)) = (
        cfg.capacity_per_s,
        now.get(names::WORK_RATE),
        now.get(names::QUEUE_DEPTH),
    ) {
        if q > 0.0 && w > 0.0 {
            candidates.push(Estimate {
                value: c / w,
                source: Source::Measured,
                from: format!(
                    "configured capacity {c:.1}/s / completions {w:.1}/s while {q:.0} queued"
                ),
            });
        }
    }
    if let (Some(w), Some(g)) = (now.get(names::WORK_RATE), now.get(names::GOODPUT)) {
        if g > 0.0 {
            candidates.push(Estimate {
                value: w / g,
                source: Source::Measured,
                from: format!("completions {w:.1}/s per useful {g:.1}/s (includes wasted work)"),
            });
        }
    }
    if let (Some(o), Some(f)) = (
        now.get(names::OFFERED_RATE),
        now.get(names::FIRST_ATTEMPT_RATE),
    ) {
        if f > 0.0 {
            candidates.push(Estimate {
                value: o / f,
                source: Source::Measured,
                from: format!("attempts {o:.1}/s per first attempt {f:.1}/s"),
            });
        }
    }
    for c in &candidates {
        evidence.push(Evidence::new(
            "k",
            Some(c.value),
            format!("candidate: {}", c.from),
        ));
    }
    let mut best = candidates.into_iter().next()?;
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
    Some(best)
}
