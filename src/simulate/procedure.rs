//! The recovery procedure of a plan, as the model runs it: close the gate to the admit
//! rate, drain (and optionally restart), then raise the rate step by step; on a relapse step
//! back and hold; finish by opening the gate. Pure decisions, fed one second at a time, so
//! `check_plan` predicts what the real controller would do with the same plan.

use crate::plan::Plan;
use std::time::Duration;

/// A gate change the procedure asks for: `Some(rate)` limits, `None` opens the gate.
pub type GateChange = Option<f64>;

#[derive(Debug, Clone)]
pub struct Procedure {
    admit_rate: f64,
    /// (rate, hold in seconds) for every ramp step.
    steps: Vec<(f64, u32)>,
    admit_hold_s: u32,
    /// -1 while holding the admit rate, then the index of the ramp step.
    step: isize,
    step_started_s: u32,
    seen_clean: bool,
    relapses: u32,
    max_relapses: u32,
    finished: bool,
}

fn whole_seconds(d: Duration) -> u32 {
    d.as_secs_f64().ceil().clamp(1.0, f64::from(u32::MAX)) as u32
}

impl Procedure {
    /// `admit_hold`: how long the admit rate is held; none uses the first step's hold (or
    /// 10 s without a ramp).
    pub fn new(plan: &Plan, admit_hold: Option<Duration>) -> Self {
        let steps: Vec<(f64, u32)> = plan
            .ramp
            .iter()
            .map(|s| (s.rate_per_s, whole_seconds(s.hold)))
            .collect();
        let admit_hold_s = admit_hold
            .map(whole_seconds)
            .or_else(|| steps.first().map(|s| s.1))
            .unwrap_or(10);
        Procedure {
            admit_rate: plan.admit_rate,
            max_relapses: 2 * steps.len() as u32 + 2,
            steps,
            admit_hold_s,
            step: -1,
            step_started_s: 0,
            seen_clean: false,
            relapses: 0,
            finished: false,
        }
    }

    /// The procedure starts at second `now_s`: the gate closes to the admit rate.
    pub fn start(&mut self, now_s: u32) -> GateChange {
        self.step_started_s = now_s;
        Some(self.admit_rate)
    }

    fn rate(&self) -> f64 {
        usize::try_from(self.step)
            .ok()
            .and_then(|i| self.steps.get(i))
            .map_or(self.admit_rate, |s| s.0)
    }

    fn hold(&self) -> u32 {
        usize::try_from(self.step)
            .ok()
            .and_then(|i| self.steps.get(i))
            .map_or(self.admit_hold_s, |s| s.1)
    }

    /// After each simulated second: `timeouts` is how many admitted attempts went
    /// unanswered within the client timeout in that second (the relapse signal; gate
    /// rejections are the procedure working, not failing). Returns a gate change if any.
    pub fn after_second(&mut self, now_s: u32, timeouts: u64) -> Option<GateChange> {
        if self.finished {
            return None;
        }
        if timeouts > 0 {
            if self.seen_clean {
                self.relapses += 1;
                self.seen_clean = false;
                if self.relapses > self.max_relapses {
                    // Give up ramping: hold where we are; the run will not count as recovered.
                    self.finished = true;
                    return None;
                }
                self.step = (self.step - 1).max(-1);
                self.step_started_s = now_s;
                return Some(Some(self.rate()));
            }
            return None;
        }
        self.seen_clean = true;
        if now_s.saturating_sub(self.step_started_s) < self.hold() {
            return None;
        }
        self.step += 1;
        self.step_started_s = now_s;
        if self.step as usize >= self.steps.len() {
            self.finished = true;
            return Some(None);
        }
        Some(Some(self.rate()))
    }

    pub fn relapses(&self) -> u32 {
        self.relapses
    }

    /// The gate is open again: the procedure ran to its end.
    pub fn completed(&self) -> bool {
        self.finished && self.step as usize >= self.steps.len()
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
                    rate_per_s: 40.0,
                    hold: Duration::from_secs(2),
                },
                RampStep {
                    rate_per_s: 80.0,
                    hold: Duration::from_secs(2),
                },
            ],
            arithmetic: vec![],
            ..Default::default()
        }
    }

    #[test]
    fn ramps_after_each_clean_hold_then_opens_the_gate() {
        let mut p = Procedure::new(&plan(), None);
        assert_eq!(p.start(100), Some(20.0));
        assert_eq!(p.after_second(101, 3), None); // leftovers before the first clean second
        assert_eq!(p.after_second(102, 0), Some(Some(40.0)));
        assert_eq!(p.after_second(103, 0), None);
        assert_eq!(p.after_second(104, 0), Some(Some(80.0)));
        assert_eq!(p.after_second(106, 0), Some(None));
        assert!(p.completed());
        assert_eq!(p.relapses(), 0);
    }

    #[test]
    fn relapse_steps_back_and_holds() {
        let mut p = Procedure::new(&plan(), None);
        p.start(0);
        assert_eq!(p.after_second(2, 0), Some(Some(40.0)));
        assert_eq!(p.after_second(3, 5), Some(Some(20.0)));
        assert_eq!(p.relapses(), 1);
        assert_eq!(p.after_second(4, 5), None); // still bad: no double count
        assert_eq!(p.after_second(5, 0), Some(Some(40.0)));
    }
}
