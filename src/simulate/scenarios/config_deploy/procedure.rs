//! The recovery procedure of a plan, as the model runs it: close the gate to the admit
//! rate, drain (and optionally restart), then readmit with the engine's own ramp decisions
//! ([`crate::engine::ramp::next_move`]): raise after each clean hold, step back on a relapse,
//! lift the limit once the gate rejects nothing, hold at the ceiling while it still does.
//! Fed one second at a time, so `check_plan` predicts what the real controller would do
//! with the same plan.

use crate::engine::ramp::{next_move, RampMove, RampParams, RampState, Seen, DEFAULT_HEADROOM};
use crate::plan::Plan;
use std::time::Duration;

/// A gate change the procedure asks for: `Some(rate)` limits, `None` opens the gate.
pub type GateChange = Option<f64>;

#[derive(Debug, Clone)]
pub struct Procedure {
    params: RampParams,
    state: RampState,
    /// Hold of the first rate (the admit rate, while the backlog drains) and of each later one.
    admit_hold_s: u32,
    step_hold_s: u32,
    first_hold: bool,
    step_started_s: u32,
    /// Rejections since the rate last changed, and over how many seconds.
    rejected: u64,
    seconds: u32,
    seen_clean: bool,
    finished: bool,
    opened: bool,
}

fn whole_seconds(d: Duration) -> u32 {
    d.as_secs_f64().ceil().clamp(1.0, f64::from(u32::MAX)) as u32
}

impl Procedure {
    /// `admit_hold`: how long the admit rate is held; none uses the first step's hold (or
    /// 10 s without a ramp).
    pub fn new(plan: &Plan, admit_hold: Option<Duration>) -> Self {
        let step_hold_s = plan.ramp.first().map_or(10, |s| whole_seconds(s.hold));
        let factor = match plan.ramp.as_slice() {
            [a, b, ..] if a.rate_per_s > 0.0 && b.rate_per_s > a.rate_per_s => {
                b.rate_per_s / a.rate_per_s
            }
            _ => 1.5,
        };
        let last = plan.ramp.last().map_or(plan.admit_rate, |s| s.rate_per_s);
        let params = RampParams {
            from: plan.admit_rate,
            factor,
            ceiling: plan.ramp_end_rate.max(last).max(plan.admit_rate),
            max_relapses: 2 * plan.ramp.len() as u32 + 2,
            ceiling_holds: 3,
            headroom: DEFAULT_HEADROOM,
        };
        Procedure {
            state: RampState::start(&params),
            params,
            admit_hold_s: admit_hold.map_or(step_hold_s, whole_seconds),
            step_hold_s,
            first_hold: true,
            step_started_s: 0,
            rejected: 0,
            seconds: 0,
            seen_clean: false,
            finished: false,
            opened: false,
        }
    }

    /// The procedure starts at second `now_s`: the gate closes to the admit rate.
    pub fn start(&mut self, now_s: u32) -> GateChange {
        self.step_started_s = now_s;
        Some(self.state.rate)
    }

    fn hold(&self) -> u32 {
        if self.first_hold {
            self.admit_hold_s
        } else {
            self.step_hold_s
        }
    }

    fn rate_changed(&mut self, now_s: u32) {
        self.step_started_s = now_s;
        self.rejected = 0;
        self.seconds = 0;
    }

    /// After each simulated second: `timeouts` is how many admitted attempts went
    /// unanswered within the client timeout in that second (the relapse signal; gate
    /// rejections are the procedure working, not failing), `rejected` how many the gate
    /// turned away. Returns a gate change if any.
    pub fn after_second(&mut self, now_s: u32, timeouts: u64, rejected: u64) -> Option<GateChange> {
        if self.finished {
            return None;
        }
        // The first second after a change still carries what came before it.
        if now_s > self.step_started_s + 1 {
            self.rejected += rejected;
            self.seconds += 1;
        }
        if timeouts > 0 {
            if !self.seen_clean {
                return None;
            }
            self.seen_clean = false;
            self.first_hold = false;
            return match next_move(
                &self.params,
                &mut self.state,
                Err("timeouts".into()),
                Seen::default(),
            ) {
                RampMove::StepBack { rate, .. } => {
                    self.rate_changed(now_s);
                    Some(Some(rate))
                }
                // Give up ramping: hold where we are; the run will not count as recovered.
                _ => {
                    self.finished = true;
                    None
                }
            };
        }
        self.seen_clean = true;
        if now_s.saturating_sub(self.step_started_s) < self.hold() {
            return None;
        }
        self.first_hold = false;
        let rejected_per_s = self.rejected as f64 / f64::from(self.seconds.max(1));
        match next_move(
            &self.params,
            &mut self.state,
            Ok(()),
            Seen::rejected(Some(rejected_per_s)),
        ) {
            RampMove::Raise { rate } | RampMove::StepBack { rate, .. } => {
                self.rate_changed(now_s);
                Some(Some(rate))
            }
            RampMove::Hold { .. } => {
                self.rate_changed(now_s);
                None
            }
            RampMove::Finish { .. } => {
                self.finished = true;
                self.opened = true;
                Some(None)
            }
            RampMove::Settle { .. } | RampMove::Fail { .. } => {
                self.finished = true;
                None
            }
        }
    }

    pub fn relapses(&self) -> u32 {
        self.state.relapses
    }

    /// The gate is open again: the procedure ran to its end.
    pub fn completed(&self) -> bool {
        self.opened
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::RampStep;

    fn plan() -> Plan {
        Plan {
            shed_fraction: 0.9,
            admit_rate: 20.0,
            ramp: vec![
                RampStep {
                    rate_per_s: 20.0,
                    hold: Duration::from_secs(2),
                },
                RampStep {
                    rate_per_s: 40.0,
                    hold: Duration::from_secs(2),
                },
                RampStep {
                    rate_per_s: 80.0,
                    hold: Duration::from_secs(2),
                },
            ],
            ramp_end_rate: 80.0,
            arithmetic: vec![],
            ..Default::default()
        }
    }

    #[test]
    fn raises_while_the_gate_rejects_and_opens_once_it_rejects_nothing() {
        let mut p = Procedure::new(&plan(), None);
        assert_eq!(p.start(100), Some(20.0));
        assert_eq!(p.after_second(101, 3, 30), None); // leftovers before the first clean second
        assert_eq!(p.after_second(102, 0, 10), Some(Some(40.0)));
        assert_eq!(p.after_second(103, 0, 5), None);
        assert_eq!(
            p.after_second(104, 0, 0),
            Some(None),
            "nothing rejected: open"
        );
        assert!(p.completed());
        assert_eq!(p.relapses(), 0);
    }

    #[test]
    fn holds_at_the_ceiling_while_rejecting() {
        let mut p = Procedure::new(&plan(), None);
        p.start(0);
        assert_eq!(p.after_second(1, 0, 100), None);
        // 20 admitted + 100 rejected offered: straight to the ceiling.
        assert_eq!(p.after_second(2, 0, 100), Some(Some(80.0)));
        assert_eq!(p.after_second(3, 0, 9), None);
        assert_eq!(
            p.after_second(4, 0, 9),
            None,
            "still rejecting: hold, not open"
        );
        assert!(!p.completed());
        assert_eq!(p.after_second(5, 0, 0), None);
        assert_eq!(p.after_second(6, 0, 0), Some(None));
        assert!(p.completed());
    }

    #[test]
    fn relapse_steps_back_and_holds() {
        let mut p = Procedure::new(&plan(), None);
        p.start(0);
        assert_eq!(p.after_second(2, 0, 10), Some(Some(40.0)));
        assert_eq!(p.after_second(3, 5, 0), Some(Some(20.0)));
        assert_eq!(p.relapses(), 1);
        assert_eq!(p.after_second(4, 5, 0), None); // still bad: no double count
        assert_eq!(p.after_second(5, 0, 10), Some(Some(40.0)));
    }
}
