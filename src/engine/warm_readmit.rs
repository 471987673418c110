//! Which readmission a `cache.warm` step opens before its warm call, as a pure function of
//! the runbook's steps.
//!
//! Why it exists: after a drain with no restart nothing is queued but what each replica
//! answers before its clients' deadlines, and the service answers at the warmth its caches
//! kept (`capacity / m(w)`, [`super::restart::Drained::capacity_now`]); the overload factor
//! `k` that sized the plan's admit rate (`capacity_cold / k`) applies only to a queue
//! longer than that. Holding the plan's rate through a warm call turns away, for the whole
//! call, clients the service would answer, and each comes back a retry delay later. So a
//! warm step that runs after a drain alone first sets the gate to the readmission's first
//! limit at the warmth measured then ([`super::restart::start_rate`], with its wave-sized
//! bucket and fill): exactly what the `gate.ramp` that follows would set first at that
//! warmth, only the warm call's time earlier. A warm call only raises the warmth, so the
//! ramp then starts at or above it, its bucket carried over.
//!
//! Only where the `gate.ramp` is the next step that changes the gate or the replicas: a
//! restart in between would take capacity while the gate admits what the drained service
//! answers, and a gate step or drain in between would set or undo what this opened.
//! `notify`, `wait.until` and further warm steps change neither.

use crate::runbook::action::{Action, GateRamp};
use crate::runbook::Step;

/// The `gate.ramp` step (its name and action) the step at `warm` opens while it warms, or
/// None: no such ramp follows, or a step that changes the gate or the replicas comes
/// before it (module doc). Pure.
pub fn ramp_after(steps: &[Step], warm: usize) -> Option<(&str, &GateRamp)> {
    if !matches!(steps.get(warm)?.action, Action::CacheWarm(_)) {
        return None;
    }
    for s in &steps[warm + 1..] {
        match &s.action {
            Action::GateRamp(r) => return Some((s.name.as_str(), r)),
            Action::Notify(_) | Action::WaitUntil(_) | Action::CacheWarm(_) => {}
            Action::GateLimit(_)
            | Action::BacklogDrain(_)
            | Action::RestartBatched(_)
            | Action::GateHandback(_) => return None,
        }
    }
    None
}

/// [`ramp_after`] for the warm step named `warm`.
pub fn ramp_after_named<'a>(steps: &'a [Step], warm: &str) -> Option<(&'a str, &'a GateRamp)> {
    ramp_after(steps, steps.iter().position(|s| s.name == warm)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped() -> crate::runbook::Runbook {
        crate::runbook::find("stuck-overload", &[]).unwrap().runbook
    }

    /// The shipped runbook warms right before its readmission: the warm step opens it.
    #[test]
    fn the_shipped_warm_step_opens_the_readmission_that_follows_it() {
        let rb = shipped();
        let (name, _) = ramp_after_named(&rb.steps, "warm-caches").expect("opens readmit");
        assert_eq!(name, "readmit");
        // Only a warm step opens anything.
        assert_eq!(ramp_after_named(&rb.steps, "drain-backlog"), None);
    }

    /// A restart, a gate step or a drain between the warm step and the ramp: nothing is
    /// opened early; a notification between changes nothing.
    #[test]
    fn a_step_that_changes_the_gate_or_the_replicas_in_between_keeps_the_gate_shut() {
        let rb = shipped();
        let at = |n: &str| rb.steps.iter().position(|s| s.name == n).unwrap();
        let warm = at("warm-caches");
        for between in [
            "batched-restart",
            "block-at-edge",
            "drain-backlog",
            "announce",
        ] {
            let mut steps = rb.steps.clone();
            let s = steps[at(between)].clone();
            steps.insert(warm + 1, s);
            let opened = ramp_after(&steps, warm).map(|(n, _)| n);
            let want = (between == "announce").then_some("readmit");
            assert_eq!(opened, want, "{between} between warm and readmit");
        }
        // Warming after the readmission opens nothing.
        let mut steps = rb.steps.clone();
        let w = steps.remove(warm);
        steps.insert(at("readmit"), w);
        assert_eq!(ramp_after(&steps, at("readmit")), None);
    }
}
