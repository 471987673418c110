//! Per-instant judgements the detector strings together: is the service failing at this
//! snapshot, and is a trigger active? Kept apart from the verdict logic so each rule and
//! its threshold can be read (and tested) on its own.

use super::DetectorConfig;
use crate::metrics::signal::{names, Snapshot};

/// The service's state at one snapshot.
#[derive(Debug, Clone, PartialEq)]
pub enum Health {
    Healthy,
    /// Failing, with the reasons (one per rule that fired).
    Failing(Vec<String>),
    /// No failure rule could be evaluated; the reason lists what was missing.
    NoData(String),
}

/// The trigger's state at one snapshot.
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    Active(String),
    Gone,
    NoData(String),
}

fn missing(s: &Snapshot, name: &str) -> String {
    match s.readings.get(name) {
        Some(crate::metrics::signal::Reading::Missing { reason }) => format!("{name}: {reason}"),
        Some(_) => format!("{name}: not a finite number"),
        None => format!("{name}: not defined"),
    }
}

/// Failing if goodput is far below the offered rate, the error ratio is high, or p99
/// latency is above the configured limit.
pub fn health(s: &Snapshot, cfg: &DetectorConfig) -> Health {
    let mut evaluated = false;
    let mut reasons = Vec::new();
    if let (Some(offered), Some(good)) = (s.get(names::OFFERED_RATE), s.get(names::GOODPUT)) {
        evaluated = true;
        if goodput_short(s, cfg) == Some(true) {
            reasons.push(format!(
                "goodput {good:.1} req/s is {:.0}% of the offered {offered:.1} req/s (below {:.0}%)",
                100.0 * good / offered,
                100.0 * cfg.min_goodput_ratio
            ));
        }
    }
    if let Some(err) = s.get(names::ERROR_RATIO) {
        evaluated = true;
        if err > cfg.max_error_ratio {
            reasons.push(format!(
                "error ratio {:.0}% above {:.0}%",
                100.0 * err,
                100.0 * cfg.max_error_ratio
            ));
        }
    }
    if let (Some(p99), Some(limit)) = (s.get(names::LATENCY_P99), cfg.latency_limit) {
        evaluated = true;
        if p99 > limit.as_secs_f64() {
            reasons.push(format!(
                "p99 latency {p99:.3}s above {:.3}s",
                limit.as_secs_f64()
            ));
        }
    }
    if !reasons.is_empty() {
        Health::Failing(reasons)
    } else if evaluated {
        Health::Healthy
    } else {
        Health::NoData(format!(
            "cannot judge the service: {}; {}",
            missing(s, names::GOODPUT),
            missing(s, names::ERROR_RATIO)
        ))
    }
}

/// Is goodput far below the offered rate (`None`: either is unknown)? A service that
/// keeps up with its load is not in a stuck overload, whatever its p99.
pub fn goodput_short(s: &Snapshot, cfg: &DetectorConfig) -> Option<bool> {
    let (offered, good) = (s.get(names::OFFERED_RATE)?, s.get(names::GOODPUT)?);
    Some(offered >= cfg.min_offered_per_s && good < cfg.min_goodput_ratio * offered)
}

/// Active if `trigger_active` is non-zero, replicas are not ready, or first-attempt
/// demand is above `spike_factor` x the baseline demand (when a baseline is known).
pub fn trigger(s: &Snapshot, cfg: &DetectorConfig, baseline_demand: Option<f64>) -> Trigger {
    let mut evaluated = false;
    if let Some(v) = s.get(names::TRIGGER_ACTIVE) {
        evaluated = true;
        if v != 0.0 {
            return Trigger::Active(format!("trigger_active = {v}"));
        }
    }
    if let Some(n) = s.get(names::REPLICAS_NOT_READY) {
        evaluated = true;
        if n > 0.0 {
            return Trigger::Active(format!("{n} replica(s) not ready (restart in progress?)"));
        }
    }
    if let (Some(first), Some(base)) = (s.get(names::FIRST_ATTEMPT_RATE), baseline_demand) {
        evaluated = true;
        if base > 0.0 && first > cfg.spike_factor * base {
            return Trigger::Active(format!(
                "first-attempt demand {first:.1} req/s is above {} x the baseline {base:.1} req/s (spike on)",
                cfg.spike_factor
            ));
        }
    }
    if evaluated {
        Trigger::Gone
    } else {
        Trigger::NoData(format!(
            "cannot tell whether a trigger is active: {}; {}; first_attempt_rate needs a baseline demand",
            missing(s, names::TRIGGER_ACTIVE),
            missing(s, names::REPLICAS_NOT_READY)
        ))
    }
}
