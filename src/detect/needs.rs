//! What a signal set lacks for the detector ever to say Stuck, decided from the names the
//! runbook defines, before anything is measured. `runbooks validate` refuses what the
//! dry run would refuse for want of a signal, in the words the detector uses
//! ([`super::classify`]): a runbook that cannot judge the service, or cannot tell whether
//! a trigger is active, always reads Unknown, whatever the system does. Pure.

use super::DetectorConfig;
use crate::metrics::signal::names;

/// One thing the detector cannot do with the signals defined, and what would let it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmet {
    /// What it cannot do, as the detector says it.
    pub cannot: &'static str,
    /// The signals (or settings) any one of which would let it.
    pub define: String,
}

/// What the detector (and the plan's measured-only input) cannot do with the signals
/// for which `defined` is true.
pub fn unmet(defined: &dyn Fn(&str) -> bool, cfg: &DetectorConfig) -> Vec<Unmet> {
    let mut out = Vec::new();
    let judged = (defined(names::OFFERED_RATE) && defined(names::GOODPUT))
        || defined(names::ERROR_RATIO)
        || (defined(names::LATENCY_P99) && cfg.latency_limit.is_some());
    if !judged {
        out.push(Unmet {
            cannot: "cannot judge the service",
            define: format!(
                "{} and {}, or {}, or {} with spec.detect.latency_limit",
                names::OFFERED_RATE,
                names::GOODPUT,
                names::ERROR_RATIO,
                names::LATENCY_P99
            ),
        });
    }
    let trigger = [
        names::TRIGGER_ACTIVE,
        names::REPLICAS_NOT_READY,
        names::FIRST_ATTEMPT_RATE,
    ];
    if !trigger.iter().any(|n| defined(n)) {
        out.push(Unmet {
            cannot: "cannot tell whether a trigger is active",
            define: format!(
                "{} or {} (or {}, which needs a baseline demand: a healthy period in the window or the history)",
                names::TRIGGER_ACTIVE,
                names::REPLICAS_NOT_READY,
                names::FIRST_ATTEMPT_RATE
            ),
        });
    }
    if !defined(names::OFFERED_RATE) {
        out.push(Unmet {
            cannot: "cannot measure the arrival rate the plan sheds from",
            define: format!(
                "{} (or give --assume-arrival-rate at every run)",
                names::OFFERED_RATE
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(set: &[&str]) -> Vec<Unmet> {
        let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
        unmet(&|n| set.iter().any(|s| s == n), &DetectorConfig::default())
    }

    #[test]
    fn names_what_the_detector_cannot_do_without() {
        let none = with(&["queue_depth", "goodput"]);
        let cannot: Vec<&str> = none.iter().map(|u| u.cannot).collect();
        assert_eq!(
            cannot,
            [
                "cannot judge the service",
                "cannot tell whether a trigger is active",
                "cannot measure the arrival rate the plan sheds from"
            ]
        );
        assert!(none[1]
            .define
            .starts_with("trigger_active or replicas_not_ready"));
        assert!(with(&["offered_rate", "goodput", "replicas_not_ready"]).is_empty());
        assert!(with(&["offered_rate", "error_ratio", "first_attempt_rate"]).is_empty());
    }
}
