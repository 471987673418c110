//! What the engine's readmission (`gate.ramp`) decides from, as the model takes it: the
//! ramp step and the check it waits on (their cadence: a fixed hold, then measurements an
//! interval apart until `consecutive_successes` in a row; only passes count while the
//! readmission settles), and the numbers the engine's plan had (warm and cold capacity,
//! headroom), from which it derives the start rate and the wave-sized burst after a drain
//! alone ([`crate::engine::restart::start_rate`], [`crate::engine::restart::wave_burst`]).
//!
//! Why it exists: a model that decides on its own cadence, or sizes its bucket its own way,
//! predicts a different procedure from the one the engine runs; it takes the runbook's
//! step and check themselves, and the engine's own pure functions, so the two cannot drift.

use crate::gate::limit::Fill;
use crate::plan::{Plan, PlanInputs};
use crate::runbook::action::{Action, DrainKeep};
use crate::runbook::expr::Expr;
use crate::runbook::{Check, Runbook};
use std::time::Duration;

/// The engine's readmission as the model runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Readmission {
    /// The step's fixed wait at each rate before its check (none: the check alone).
    pub hold: Option<Duration>,
    /// How long after the readmission starts only the check's passes count.
    pub settle: Duration,
    pub max_relapses: u32,
    pub ceiling_holds: u32,
    /// The step's burst (none: the wave-sized one after a drain alone, else the gate's
    /// default).
    pub burst: Option<u32>,
    /// The check each rate waits on: its interval, passes, failure and count limits.
    pub check: Check,
    /// The plan's headroom (`spec.plan.headroom`).
    pub headroom: f64,
    /// How often something besides the engine scrapes the source it reads (a rehearsal's
    /// feed, every scrape interval); none: only the check's own measurements do. A rate
    /// over a window cut at the readmission's start needs two scrapes after it.
    pub scrape: Option<Duration>,
    /// Warm and cold capacity, req/s, as the plan's inputs had them (none: the model's own
    /// service's, which is what `recover plan --check-with-sim` built it from).
    pub capacity: Option<f64>,
    pub capacity_cold: Option<f64>,
    /// What the runbook's `backlog.drain` keeps of each replica's queue (none: a runbook
    /// without the step, or one that keeps nothing).
    pub drain_keep: DrainKeep,
    /// A `cache.warm` step opens this readmission before its warm call after a drain
    /// alone ([`crate::engine::warm_readmit::ramp_after`]).
    pub while_warming: bool,
    /// How the runbook's first `gate.limit` (the block) starts its bucket: carried, empty
    /// after an open gate, or `fill: full`, when the requests arriving as it is set pass.
    pub block_fill: Fill,
}

impl Readmission {
    /// The runbook's `gate.ramp` step and its check, with the plan's inputs; none when the
    /// runbook has no such step or names a check it does not define.
    pub fn of(rb: &Runbook, inputs: &PlanInputs) -> Option<Readmission> {
        let ramp = first_step(rb, |a| match a {
            Action::GateRamp(r) => Some(r),
            _ => None,
        })?;
        let drain_keep = first_step(rb, |a| match a {
            Action::BacklogDrain(d) => Some(d.keep),
            _ => None,
        })
        .unwrap_or_default();
        let block_fill = first_step(rb, |a| match a {
            Action::GateLimit(l) => Some(l.fill),
            _ => None,
        })
        .unwrap_or_default();
        let while_warming = (0..rb.steps.len())
            .any(|i| crate::engine::warm_readmit::ramp_after(&rb.steps, i).is_some());
        Some(Readmission {
            hold: ramp.hold,
            settle: ramp.settle(),
            max_relapses: ramp.max_relapses,
            ceiling_holds: ramp.ceiling_holds,
            burst: ramp.burst,
            check: rb.checks.get(&ramp.check)?.clone(),
            headroom: rb.plan.headroom,
            scrape: None,
            capacity: inputs.capacity,
            capacity_cold: Some(inputs.capacity_cold),
            drain_keep,
            while_warming,
            block_fill,
        })
    }

    /// Without a runbook (`recover plan --check-with-sim`, a scenario file's `plan:`): a
    /// ramp step that holds each rate for the plan's step hold and then checks once, on a
    /// source scraped at least that often, the engine's defaults otherwise (`gate.ramp`'s
    /// three relapses and ceiling holds, no settle after a fixed hold, the plan's default
    /// headroom).
    pub fn for_plan(plan: &Plan) -> Readmission {
        let hold = plan
            .ramp
            .first()
            .map_or(Duration::from_secs(10), |s| s.hold);
        Readmission {
            hold: Some(hold),
            settle: Duration::ZERO,
            max_relapses: 3,
            ceiling_holds: 3,
            burst: None,
            check: Check {
                interval: hold,
                count: None,
                success: Expr::parse("no_timeouts").expect("a bare name parses"),
                failure: None,
                failure_limit: Some(0),
                consecutive_successes: 1,
                inconclusive: Default::default(),
                inconclusive_limit: u32::MAX,
            },
            headroom: crate::plan::PlanConfig::default().headroom,
            scrape: Some(hold),
            capacity: None,
            capacity_cold: None,
            drain_keep: DrainKeep::None,
            while_warming: false,
            block_fill: Fill::Carried,
        }
    }
}

/// What `pick` reads from the first of `rb`'s steps it reads anything from.
fn first_step<'a, T>(rb: &'a Runbook, pick: impl Fn(&'a Action) -> Option<T>) -> Option<T> {
    rb.steps.iter().find_map(|s| pick(&s.action))
}

/// The shipped runbook (`runbooks/stuck-overload.yaml`), for the model's tests.
#[cfg(test)]
pub(crate) fn shipped_runbook_for_tests() -> crate::runbook::Runbook {
    crate::runbook::load_file(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/runbooks/stuck-overload.yaml"
    )))
    .unwrap()
    .runbook
}

/// A plan of 300 req/s arriving, cold capacity 50, warm 100, k 3.
#[cfg(test)]
fn inputs_for_tests() -> PlanInputs {
    PlanInputs {
        arrival_rate: 300.0,
        capacity_cold: 50.0,
        k: 3.0,
        capacity: Some(100.0),
        demand: None,
    }
}

/// The shipped runbook's readmission on [`inputs_for_tests`]: the model's tests run the
/// procedure the engine would.
#[cfg(test)]
pub(crate) fn shipped_for_tests() -> Readmission {
    Readmission::of(&shipped_runbook_for_tests(), &inputs_for_tests()).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_runbook_readmits_on_its_checks_cadence() {
        let r = shipped_for_tests();
        assert_eq!(r.hold, None);
        assert_eq!(r.settle, crate::runbook::action::DEFAULT_RAMP_SETTLE);
        assert_eq!(r.check.interval, Duration::from_millis(500));
        assert_eq!(r.check.consecutive_successes, 3);
        assert_eq!((r.capacity, r.capacity_cold), (Some(100.0), Some(50.0)));
        assert!(r.while_warming, "its warm step opens the readmission");
    }

    /// The drain keeps what the runbook's `backlog.drain` says, so the model drains as
    /// the engine will.
    #[test]
    fn the_drain_keeps_what_the_runbooks_step_says() {
        let mut rb = shipped_runbook_for_tests();
        let inputs = inputs_for_tests();
        for keep in [DrainKeep::None, DrainKeep::Answerable] {
            for s in &mut rb.steps {
                if let Action::BacklogDrain(d) = &mut s.action {
                    d.keep = keep;
                }
            }
            assert_eq!(Readmission::of(&rb, &inputs).unwrap().drain_keep, keep);
        }
    }
}
