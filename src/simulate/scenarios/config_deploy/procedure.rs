//! The recovery procedure of a plan, as the model runs it: close the gate to the admit
//! rate (`gate.limit`) and drain (and optionally restart), then readmit as the engine's
//! `gate.ramp` does: start where [`crate::engine::restart::start_rate`] says (what a
//! drained service answers, after a drain alone), with the burst
//! [`crate::engine::restart::wave_burst`] gives and a full bucket at that first limit where
//! [`crate::engine::restart::fill_reason`] allows one (set while the caches warm, after a
//! drain alone, where the runbook's warm step opens it: [`Procedure::open_while_warming`]);
//! hold each rate for the step's hold, then measure on the check's interval
//! until its consecutive passes ([`crate::engine::check::record`], only passes counting
//! while the readmission settles), and decide with the engine's own
//! [`crate::engine::ramp::next_move`] from the rejected rate over the signal's window cut at
//! the readmission's start. So `check_plan` predicts what the real controller would do
//! with the same plan, at the times it would do it.

use super::gate::LimitChange;
use super::readmission::Readmission;
use crate::engine::check::{record, record_settling, CheckState, CheckStatus, Measurement};
use crate::engine::ramp::{next_move, RampMove, RampParams, RampState, Seen};
use crate::engine::restart::{fill_reason, start_rate, wave_burst, Drained};
use crate::gate::limit::Fill;
use crate::plan::Plan;
use std::time::Duration;

/// The window the engine's rejected rate is read over (the built-in `gate_rejected_rate`
/// rates over 5 s; the check's windows are cut at the readmission's start besides).
pub const REJECTED_WINDOW: Duration = crate::runbook::action::DEFAULT_RAMP_SETTLE;

/// Where the procedure is, in the model's ticks.
#[derive(Debug, Clone)]
pub struct Procedure {
    params: RampParams,
    state: RampState,
    r: Readmission,
    tick: Duration,
    /// The service after a drain alone, when the readmission started (else none).
    drained: Option<Drained>,
    /// When the readmission started, and when only passes count until.
    ramp_from: Option<u32>,
    settle_until: u32,
    /// The next measurement of the check.
    next_at: u32,
    check: CheckState,
    /// Timeouts (cumulative) at the last measurement: a measurement fails on any since.
    timeouts_seen: u64,
    /// (tick, rejected so far) at each measurement since the readmission started: the
    /// scrapes a rate over them reads.
    samples: Vec<(u32, u64)>,
    finished: bool,
    opened: bool,
    /// The rate a warm step opened the readmission at after a drain alone, if it did.
    opened_early: Option<f64>,
}

fn ticks(d: Duration, tick: Duration) -> u32 {
    (d.as_nanos() / tick.as_nanos().max(1)).min(u128::from(u32::MAX / 4)) as u32
}

impl Procedure {
    /// The plan's ramp (from its admit rate, its step factor, up to its end rate) with the
    /// readmission's step and check (`r`), on ticks of `tick`.
    pub fn new(plan: &Plan, r: Readmission, tick: Duration) -> Self {
        let factor = match plan.ramp.as_slice() {
            [a, b, ..] if a.rate_per_s > 0.0 && b.rate_per_s > a.rate_per_s => {
                b.rate_per_s / a.rate_per_s
            }
            _ => crate::plan::PlanConfig::default().step_factor,
        };
        let last = plan.ramp.last().map_or(plan.admit_rate, |s| s.rate_per_s);
        let params = RampParams {
            from: plan.admit_rate,
            factor,
            ceiling: plan.ramp_end_rate.max(last).max(plan.admit_rate),
            max_relapses: r.max_relapses,
            ceiling_holds: r.ceiling_holds,
            headroom: r.headroom,
        };
        Procedure {
            state: RampState::start(&params),
            params,
            r,
            tick,
            drained: None,
            ramp_from: None,
            settle_until: 0,
            next_at: u32::MAX,
            check: CheckState::default(),
            timeouts_seen: 0,
            samples: Vec::new(),
            finished: false,
            opened: false,
            opened_early: None,
        }
    }

    /// The procedure starts: the gate closes to the admit rate (`gate.limit`: the gate's
    /// default burst, the bucket as the runbook's block starts it).
    pub fn start(&mut self) -> LimitChange {
        LimitChange {
            fill: self.r.block_fill,
            ..LimitChange::rate(Some(self.params.from))
        }
    }

    /// A warm step after a drain alone (`drained`, the service as it left it, warmth and
    /// all) opens the readmission before its warm call, as the engine's `cache.warm` does
    /// ([`crate::engine::warm_readmit`]): the first limit the ramp would set at that
    /// warmth, bucket and all; none when the ramp would start no higher than the plan's
    /// rate (or nothing was drained alone).
    pub fn open_while_warming(&mut self, drained: Option<Drained>) -> Option<LimitChange> {
        let d = drained?;
        let rate = start_rate(&self.params, Some(d));
        if rate <= self.params.from {
            return None;
        }
        self.opened_early = Some(rate);
        Some(self.first_limit(rate, Some(d)))
    }

    /// The readmission's first limit at `rate`: the wave-sized burst, the bucket filled as
    /// [`fill_reason`] says when that burst is the wave-sized one the step did not fix.
    fn first_limit(&self, rate: f64, drained: Option<Drained>) -> LimitChange {
        let burst = self
            .r
            .burst
            .or_else(|| wave_burst(&self.params, drained, rate));
        let fill = self
            .r
            .burst
            .is_none()
            .then(|| {
                let b = burst.unwrap_or_else(|| crate::gate::limit::default_burst(rate));
                fill_reason(&self.params, drained, rate, b)
            })
            .flatten()
            .map_or(Fill::Carried, |(fill, _)| fill);
        LimitChange {
            rate_per_s: Some(rate),
            burst,
            fill,
        }
    }

    /// The readmission starts at tick `now` (after the drain, the restart and any warming),
    /// `drained` the service as a drain alone left it (none after a restart), `timeouts`
    /// how many attempts have timed out so far. Its first limit: the start rate with the
    /// wave-sized burst, the bucket full when that burst is the wave-sized one after a
    /// drain alone (the queue is known empty).
    pub fn begin_ramp(&mut self, now: u32, drained: Option<Drained>, timeouts: u64) -> LimitChange {
        self.drained = drained;
        self.ramp_from = Some(now);
        self.settle_until = now + ticks(self.r.settle, self.tick);
        // Opened by a warm step: on from there, its bucket carried over.
        self.state.rate = start_rate(&self.params, drained).max(self.opened_early.unwrap_or(0.0));
        self.timeouts_seen = timeouts;
        let first = self.set_rate(now);
        if self.opened_early.is_some() {
            return first;
        }
        LimitChange {
            fill: self.first_limit(self.state.rate, drained).fill,
            ..first
        }
    }

    /// The limit for the ramp's rate now, as `gate.ramp` sets each one; its check starts
    /// after the step's hold.
    fn set_rate(&mut self, now: u32) -> LimitChange {
        self.check = CheckState::default();
        self.next_at = now + ticks(self.r.hold.unwrap_or_default(), self.tick);
        LimitChange {
            rate_per_s: Some(self.state.rate),
            burst: self
                .r
                .burst
                .or_else(|| wave_burst(&self.params, self.drained, self.state.rate)),
            fill: Fill::Carried,
        }
    }

    /// The check measures at this tick (the readmission has started and not ended).
    pub fn due(&self, now: u32) -> bool {
        !self.finished && self.ramp_from.is_some() && now >= self.next_at
    }

    /// One measurement of the check at tick `now` ([`Procedure::due`]): `timeouts` and
    /// `rejected` are how many attempts timed out and how many the gate turned away so
    /// far. A measurement fails on any timeout since the last one (the relapse signal;
    /// rejections are the procedure working, not failing), and has no data when nothing
    /// was scraped since the readmission started before it (a rate needs two scrapes: the
    /// check's own, and any other every [`Readmission::scrape`]).
    /// Returns a gate change if the ramp decided one.
    pub fn measure(&mut self, now: u32, timeouts: u64, rejected: u64) -> Option<LimitChange> {
        let from = self.ramp_from?;
        let scraped_besides = self
            .r
            .scrape
            .is_some_and(|s| now - from >= ticks(s, self.tick));
        let m = if self.samples.is_empty() && !scraped_besides {
            Measurement::Inconclusive {
                missing: vec!["a rate over one scrape".into()],
            }
        } else if timeouts > self.timeouts_seen {
            Measurement::Failure
        } else {
            Measurement::Success
        };
        self.samples.push((now, rejected));
        self.timeouts_seen = timeouts;
        let status = if now < self.settle_until {
            record_settling(&self.r.check, &mut self.check, &m)
        } else {
            record(&self.r.check, &mut self.check, &m)
        };
        let passed = match status {
            CheckStatus::Running => {
                self.next_at = now + ticks(self.r.check.interval, self.tick).max(1);
                return None;
            }
            CheckStatus::Passed => Ok(()),
            CheckStatus::Failed(why) => Err(why),
        };
        let seen = Seen::rejected(self.rejected_rate(now, from));
        match next_move(&self.params, &mut self.state, passed, seen) {
            RampMove::Raise { .. } | RampMove::StepBack { .. } => Some(self.set_rate(now)),
            RampMove::Hold { .. } => {
                self.set_rate(now);
                None
            }
            RampMove::Finish { .. } => {
                self.finished = true;
                self.opened = true;
                Some(LimitChange::rate(None))
            }
            RampMove::Settle { .. } | RampMove::Fail { .. } => {
                self.finished = true;
                None
            }
        }
    }

    /// The rejected rate as the engine reads it at `now`: over the scrapes within the
    /// signal's window, none before the readmission's start (`from`); none from fewer than
    /// two scrapes.
    fn rejected_rate(&self, now: u32, from: u32) -> Option<f64> {
        let since = now
            .saturating_sub(ticks(REJECTED_WINDOW, self.tick))
            .max(from);
        let &(t0, r0) = self.samples.iter().find(|(t, _)| *t >= since)?;
        let &(t1, r1) = self.samples.last()?;
        (t1 > t0)
            .then(|| r1.saturating_sub(r0) as f64 / (f64::from(t1 - t0) * self.tick.as_secs_f64()))
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

    const TICK: Duration = Duration::from_millis(10);

    fn plan() -> Plan {
        Plan {
            shed_fraction: 0.9,
            admit_rate: 20.0,
            ramp: [20.0, 30.0, 45.0]
                .into_iter()
                .map(|rate_per_s| RampStep {
                    rate_per_s,
                    hold: Duration::from_millis(1500),
                })
                .collect(),
            ramp_end_rate: 1000.0,
            ..Default::default()
        }
    }

    /// The shipped runbook's readmission: 3 passes 0.5 s apart, 5 s of settling.
    fn shipped() -> Readmission {
        super::super::readmission::shipped_for_tests()
    }

    /// Run the procedure tick by tick from a readmission at tick 0, the gate rejecting
    /// `rejected_per_tick` and `timeouts` saying how many timed out by each tick; the
    /// ticks of its gate changes.
    fn changes(
        p: &mut Procedure,
        until: u32,
        rejected_per_tick: u64,
        timeouts: impl Fn(u32) -> u64,
    ) -> Vec<(u32, LimitChange)> {
        let mut out = vec![(0, p.begin_ramp(0, None, 0))];
        for now in 0..until {
            if p.due(now) {
                if let Some(c) = p.measure(now, timeouts(now), u64::from(now) * rejected_per_tick) {
                    out.push((now, c));
                }
            }
        }
        out
    }

    /// The engine raises as soon as its check has 3 passes 0.5 s apart: the first rate
    /// after 1.5 s (its first measurement has one scrape since the readmission began, no
    /// rate), each later one 1 s after it was set (its first measurement is at once), a
    /// tick for the limit change besides. The model decided once a second, each rate held
    /// for the plan's 1.5 s rounded up to 2 s.
    #[test]
    fn the_ramp_decides_at_the_engines_cadence() {
        let r = Readmission {
            settle: Duration::ZERO,
            ..shipped()
        };
        let mut p = Procedure::new(&plan(), r, TICK);
        let at: Vec<u32> = changes(&mut p, 300, 1, |_| 0)
            .iter()
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(at, [0, 150, 251]);
    }

    /// A drain alone that kept nothing, warm, at 100 req/s warm and 50 cold, clients timing
    /// out after 1 s.
    fn warm_drained() -> Drained {
        Drained {
            kept: Some(0),
            capacity: Some(100.0),
            capacity_cold: 50.0,
            warm_fraction: Some(1.0),
            client_timeout_s: Some(1.0),
        }
    }

    /// After a drain alone the readmission starts at what the drained service answers
    /// (0.9 x 100 req/s warm) with a bucket the size of what it answers within the clients'
    /// 1 s timeout, full at once; after a restart, at the plan's rate with the gate's
    /// default burst and no fill.
    #[test]
    fn after_a_drain_alone_the_first_limit_is_a_full_wave_sized_bucket() {
        let drained = warm_drained();
        let mut p = Procedure::new(&plan(), shipped(), TICK);
        // The shipped block starts its bucket full (`fill: full`).
        assert_eq!(
            p.start(),
            LimitChange {
                fill: Fill::Full,
                ..LimitChange::rate(Some(20.0))
            }
        );
        assert_eq!(
            p.begin_ramp(0, Some(drained), 0),
            LimitChange {
                rate_per_s: Some(90.0),
                burst: Some(90),
                fill: Fill::Full
            }
        );
        let mut p = Procedure::new(&plan(), shipped(), TICK);
        assert_eq!(p.begin_ramp(0, None, 0), LimitChange::rate(Some(20.0)));
    }

    /// A drain that kept requests left a queue: the first limit is the same rate and
    /// wave-sized burst, its bucket starting with the room the kept requests leave (the
    /// engine's `fill_reason`), none when a replica did not say how many it kept.
    #[test]
    fn after_a_drain_that_kept_requests_the_first_limit_fills_the_room_they_leave() {
        let drained = warm_drained();
        let first = |d: Drained| Procedure::new(&plan(), shipped(), TICK).begin_ramp(0, Some(d), 0);
        assert_eq!(first(drained).fill, Fill::Full);
        for (kept, fill) in [
            (Some(40), Fill::Tokens(50)),
            (Some(90), Fill::Carried),
            (None, Fill::Carried),
        ] {
            let got = first(Drained { kept, ..drained });
            assert_eq!(
                got,
                LimitChange {
                    rate_per_s: Some(90.0),
                    burst: Some(90),
                    fill
                },
                "{kept:?}"
            );
        }
    }

    /// While the readmission settles (5 s) a timeout only resets the passes; after it,
    /// the third failed measurement in a row (failure limit 2) steps back.
    #[test]
    fn timeouts_step_back_only_after_the_settle_and_the_checks_failure_limit() {
        let mut p = Procedure::new(&plan(), shipped(), TICK);
        let got = changes(&mut p, 700, 0, u64::from);
        let back: Vec<u32> = got.iter().skip(1).map(|(t, _)| *t).collect();
        // Settling until 500: measurements at 0, 50, ..., 500 pass none; 500, 550, 600
        // fail, the third failing the check.
        assert_eq!(back, [600]);
        assert_eq!(p.relapses(), 1);
    }

    #[test]
    fn opens_once_the_gate_rejects_nothing() {
        let r = Readmission {
            settle: Duration::ZERO,
            ..shipped()
        };
        let mut p = Procedure::new(&plan(), r, TICK);
        let got = changes(&mut p, 300, 0, |_| 0);
        assert_eq!(got.last(), Some(&(150, LimitChange::rate(None))));
        assert!(p.completed());
    }
}
