//! Progressive readmission decisions, as a pure function: given the check's result at the
//! current rate and what the gate still rejects, raise, step back and hold, finish, or fail.
//! The executor only applies what this decides, as soon as the check has its evidence (its
//! `consecutive_successes`): no rate is held longer than it takes to judge it.
//!
//! The limit is lifted only once the gate rejects (next to) nothing. Clients the gate is
//! still turning away are retrying; lifting while they are would let them all through in
//! one wave, the burst that put the service into overload in the first place. So a raise
//! goes to what is being offered (admitted plus rejected), never above the ceiling (the
//! rate the service can take), and at the ceiling the ramp holds until the rejections stop.
//!
//! A raise jumps straight to what is offered when the service's measured headroom allows
//! it: the capacity it shows now (its concurrency over its service time now, so a cold or
//! slowed service shows less) times the plan's headroom must cover the offered rate.
//! Where it does not, the raise goes no further than that measured capacity (or one step
//! factor, so a service that warms as it works still gets more).
//!
//! The same measurement can lift the ceiling: the plan's ceiling comes from a capacity
//! that may only have been declared (a service stuck before anyone looked shows no healthy
//! period to measure it in), and a declaration can be stale. Once the readmitted service
//! shows more (headroom x concurrency / service time now, under load and not overloaded),
//! the ramp may go that far: a measurement of the service at work wins over a number
//! written down before it. A service slower than declared shows less, and the plan's
//! ceiling stands.

use serde::{Deserialize, Serialize};

/// The ramp's parameters, resolved to numbers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RampParams {
    pub from: f64,
    pub factor: f64,
    /// At or above this rate the gate cannot be what limits traffic; lifting it is safe.
    pub ceiling: f64,
    pub max_relapses: u32,
    /// Holds at the ceiling with the gate still rejecting before the ramp settles there
    /// (leaves the limit at the ceiling instead of lifting it).
    pub ceiling_holds: u32,
    /// A raise may use at most this fraction of the capacity the service measures now.
    #[serde(default = "default_headroom")]
    pub headroom: f64,
}

fn default_headroom() -> f64 {
    DEFAULT_HEADROOM
}

/// The fraction of measured capacity a raise may use when the plan names none.
pub const DEFAULT_HEADROOM: f64 = 0.9;

/// What the ramp saw when its check ended.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Seen {
    /// The gate's rejected rate, req/s (None: no data, which never counts as "no longer
    /// rejecting").
    pub rejected: Option<f64>,
    /// What the service can take now, req/s: its concurrency over its service time now
    /// (None: not measured; the raise is then bounded by the ceiling alone).
    pub capacity_now: Option<f64>,
    /// The demand before the incident, first attempts/s (the run's input; None: unknown).
    /// It decides what a settle blames: only demand over the limit is missing capacity.
    pub demand: Option<f64>,
}

impl Seen {
    /// Only the rejected rate known.
    pub fn rejected(rejected: Option<f64>) -> Self {
        Seen {
            rejected,
            ..Seen::default()
        }
    }
}

/// Rejecting at most this fraction of the admitted rate counts as rejecting nothing: a
/// stray retry or a request over the burst is not a wave.
pub const NOTHING_REJECTED: f64 = 0.01;

/// Rates this close (relative) are one rate: a ceiling measured from floating-point
/// arithmetic is not a reason to raise by a rounding error.
const SAME_RATE: f64 = 1e-9;

/// A raise goes this far above the offered rate, so the retrying clients get served.
const OFFERED_MARGIN: f64 = 1.1;

/// Where the ramp is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RampState {
    pub rate: f64,
    pub relapses: u32,
    /// The highest rate that passed its check.
    pub last_good: Option<f64>,
    /// Checks passed at the ceiling while the gate still rejected.
    pub ceiling_holds: u32,
}

impl RampState {
    pub fn start(p: &RampParams) -> Self {
        RampState {
            rate: p.from,
            relapses: 0,
            last_good: None,
            ceiling_holds: 0,
        }
    }
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum RampMove {
    /// Set this rate, hold, check again.
    Raise {
        rate: f64,
    },
    /// The check failed: go back to this rate and hold.
    StepBack {
        rate: f64,
        reason: String,
    },
    /// At the ceiling, still rejecting: hold this rate and check again.
    Hold {
        rate: f64,
        reason: String,
    },
    /// The gate no longer limits anything: lift the limit.
    Finish {
        reason: String,
    },
    /// Still rejecting after every hold at the ceiling. Leave the limit at the ceiling; the
    /// reason says whether the demand explains the excess ([`settle_cause`]), and a human
    /// decides what to do about it.
    Settle {
        rate: f64,
        reason: String,
    },
    Fail {
        reason: String,
    },
}

/// One move and what it was decided from, as the journal records it and the live view
/// shows it (one value for both, so they cannot disagree).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RampDecision {
    pub step: String,
    /// The rate the check ran at.
    pub at_rate: f64,
    /// What the gate rejected then, req/s (None: no data).
    pub rejected: Option<f64>,
    /// Why the check failed (None: it passed).
    pub check_failed: Option<String>,
    pub decision: RampMove,
}

impl RampDecision {
    /// The move in words: `at 30.0 req/s, check passed; the gate rejects 12.0 req/s:
    /// raise to 45.0 req/s`.
    pub fn describe(&self) -> String {
        let check = match &self.check_failed {
            None => "check passed".to_string(),
            Some(why) => format!("check failed ({why})"),
        };
        let rejected = match self.rejected {
            Some(r) => format!("the gate rejects {r:.1} req/s"),
            None => "no data on rejections".to_string(),
        };
        format!(
            "at {:.1} req/s, {check}; {rejected}: {}",
            self.at_rate,
            self.decision.describe()
        )
    }
}

impl RampMove {
    /// What the move does, in a few words.
    pub fn describe(&self) -> String {
        match self {
            RampMove::Raise { rate } => format!("raise to {rate:.1} req/s"),
            RampMove::StepBack { rate, .. } => format!("step back to {rate:.1} req/s and hold"),
            RampMove::Hold { rate, .. } => {
                format!("hold {rate:.1} req/s while the gate still rejects")
            }
            RampMove::Finish { .. } => "lift the limit".to_string(),
            RampMove::Settle { rate, .. } => {
                format!(
                    "leave the limit at {rate:.1} req/s (the gate still rejects at the ceiling)"
                )
            }
            RampMove::Fail { reason } => format!("give up: {reason}"),
        }
    }
}

/// Decide after a check at `state.rate`, from what was [`Seen`] when it ended.
pub fn next_move(
    p: &RampParams,
    state: &mut RampState,
    passed: Result<(), String>,
    seen: Seen,
) -> RampMove {
    let rejected = seen.rejected;
    match passed {
        Ok(()) => {
            state.last_good = Some(state.rate);
            let Some(rejected) = rejected else {
                // No data: never a reason to lift, but the check passed, so keep going.
                return raise(ceiling(p, &seen), state, state.rate * p.factor);
            };
            if rejected <= NOTHING_REJECTED * state.rate {
                return RampMove::Finish {
                    reason: format!(
                        "the gate rejects {rejected:.1} req/s at {:.1} req/s (nothing to speak of)",
                        state.rate
                    ),
                };
            }
            let ceiling = ceiling(p, &seen);
            // A measured ceiling a rounding error above the rate is the same ceiling.
            if state.rate >= ceiling * (1.0 - SAME_RATE) {
                state.ceiling_holds += 1;
                if state.ceiling_holds > p.ceiling_holds {
                    return RampMove::Settle {
                        rate: state.rate,
                        reason: format!(
                            "the gate still rejects {rejected:.1} req/s at the ceiling {:.1} req/s after {} holds; {}",
                            state.rate,
                            p.ceiling_holds,
                            settle_cause(state.rate, seen.demand)
                        ),
                    };
                }
                return RampMove::Hold {
                    rate: state.rate,
                    reason: format!(
                        "at the ceiling {:.1} req/s the gate still rejects {rejected:.1} req/s; holding until the retrying clients are served",
                        state.rate
                    ),
                };
            }
            let offered = state.rate + rejected;
            let wanted = (state.rate * p.factor).max(offered * OFFERED_MARGIN);
            let to = match seen.capacity_now {
                Some(c) if c.is_finite() && c > 0.0 => {
                    wanted.min((p.headroom.clamp(0.0, 1.0) * c).max(state.rate * p.factor))
                }
                _ => wanted,
            };
            raise(ceiling, state, to)
        }
        Err(why) => {
            state.relapses += 1;
            if state.relapses > p.max_relapses {
                return RampMove::Fail {
                    reason: format!(
                        "{} relapses (limit {}); last: {why}",
                        state.relapses, p.max_relapses
                    ),
                };
            }
            let back = state
                .last_good
                .unwrap_or(p.from)
                .min(state.rate / p.factor)
                .max(p.from * 0.5);
            state.rate = back;
            RampMove::StepBack {
                rate: back,
                reason: why,
            }
        }
    }
}

fn raise(ceiling: f64, state: &mut RampState, to: f64) -> RampMove {
    state.rate = to.min(ceiling).max(state.rate);
    RampMove::Raise { rate: state.rate }
}

/// How high a raise may go: the plan's ceiling, or the headroom share of the capacity the
/// service measures now when that is more (module doc). Pure.
pub fn ceiling(p: &RampParams, seen: &Seen) -> f64 {
    match seen.capacity_now {
        Some(c) if c.is_finite() && c > 0.0 => p.ceiling.max(p.headroom.clamp(0.0, 1.0) * c),
        _ => p.ceiling,
    }
}

/// Why the gate still rejects at the ceiling `rate`, as far as the demand before the
/// incident (first attempts/s) tells: demand over the limit is more than the service can
/// take; demand under it means the excess is retries or bursts, which more capacity would
/// not stop. Unknown demand: both possibilities, neither asserted. Pure.
pub fn settle_cause(rate: f64, demand: Option<f64>) -> String {
    match known_demand(demand) {
        Some(d) if d < rate => format!(
            "demand before the incident was {d:.1} req/s, under the limit: the excess is retrying clients or bursts, not first attempts the service lacks room for, so capacity is not what held it"
        ),
        Some(d) => format!(
            "demand before the incident was {d:.1} req/s, over the limit: more is offered than the service can take"
        ),
        None => "demand before the incident is unknown: more may be offered than the service can take, or retrying clients may offer the excess".to_string(),
    }
}

/// What a person should do after the ramp settled at `rate` with the gate still rejecting,
/// following the same reading of the demand as [`settle_cause`]: add capacity only when the
/// demand does not fit under the limit. Pure.
pub fn settle_advice(rate: f64, demand: Option<f64>, capacity: Option<f64>) -> String {
    let cap = capacity
        .filter(|c| c.is_finite() && *c > 0.0)
        .map(|c| format!(" (capacity {c:.1} req/s)"))
        .unwrap_or_default();
    match known_demand(demand) {
        Some(d) if d < rate => format!(
            "Next: capacity{cap} is not what is missing. Find what still offers the excess (retrying clients, bursts), then lift the limit (the command in the run summary)"
        ),
        Some(_) => format!(
            "Next: add capacity (replicas){cap}, then lift the limit (the command in the run summary)"
        ),
        None => format!(
            "Next: add capacity (replicas){cap} if demand exceeds the limit, or find what still offers the excess, then lift the limit (the command in the run summary)"
        ),
    }
}

fn known_demand(demand: Option<f64>) -> Option<f64> {
    demand.filter(|d| d.is_finite() && *d >= 0.0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn settle_advice_adds_capacity_only_for_demand_above_the_limit() {
        let under = super::settle_advice(90.0, Some(20.0), Some(100.0));
        assert!(!under.contains("add capacity"), "{under}");
        assert!(
            under.contains("capacity (capacity 100.0 req/s) is not what is missing"),
            "{under}"
        );
        let over = super::settle_advice(18.0, Some(40.0), None);
        assert!(over.contains("add capacity (replicas)"), "{over}");
        let unknown = super::settle_advice(18.0, None, None);
        assert!(unknown.contains("if demand exceeds the limit"), "{unknown}");
    }

    use super::*;

    fn params() -> RampParams {
        RampParams {
            from: 100.0,
            factor: 2.0,
            ceiling: 500.0,
            max_relapses: 1,
            ceiling_holds: 2,
            headroom: 0.9,
        }
    }

    fn rej(r: f64) -> Seen {
        Seen::rejected(Some(r))
    }

    #[test]
    fn raises_until_nothing_is_rejected() {
        let p = params();
        let mut s = RampState::start(&p);
        assert_eq!(
            next_move(&p, &mut s, Ok(()), rej(50.0)),
            RampMove::Raise { rate: 200.0 }
        );
        assert_eq!(
            next_move(&p, &mut s, Ok(()), Seen::default()),
            RampMove::Raise { rate: 400.0 },
            "no data: keep raising, never lift"
        );
        // 1% of the admitted rate is noise, not clients being turned away.
        assert!(matches!(
            next_move(&p, &mut s, Ok(()), rej(3.9)),
            RampMove::Finish { .. }
        ));
    }

    #[test]
    fn a_raise_goes_to_what_is_offered_within_the_ceiling() {
        let p = params();
        let mut s = RampState::start(&p);
        // 100 admitted + 200 rejected are offered: go to 330, not to 200.
        assert_eq!(
            next_move(&p, &mut s, Ok(()), rej(200.0)),
            RampMove::Raise { rate: 330.0 }
        );
        assert_eq!(
            next_move(&p, &mut s, Ok(()), rej(1000.0)),
            RampMove::Raise { rate: 500.0 }
        );
    }

    #[test]
    fn a_raise_jumps_to_what_is_offered_only_within_the_measured_capacity() {
        let p = params();
        let seen = |c| Seen {
            rejected: Some(200.0),
            capacity_now: Some(c),
            demand: None,
        };
        // The service measures 400 req/s now: 0.9 x 400 = 360 covers 1.1 x 300 offered.
        let mut s = RampState::start(&p);
        assert_eq!(
            next_move(&p, &mut s, Ok(()), seen(400.0)),
            RampMove::Raise { rate: 330.0 }
        );
        // Cold or slowed down, it shows 250: no further than 0.9 x 250.
        let mut s = RampState::start(&p);
        assert_eq!(
            next_move(&p, &mut s, Ok(()), seen(250.0)),
            RampMove::Raise { rate: 225.0 }
        );
        // Showing less than a step's worth, it still gets one step factor.
        let mut s = RampState::start(&p);
        assert_eq!(
            next_move(&p, &mut s, Ok(()), seen(120.0)),
            RampMove::Raise { rate: 200.0 }
        );
    }

    #[test]
    fn at_the_ceiling_it_holds_while_rejecting_then_settles_without_lifting() {
        let p = params();
        let mut s = RampState {
            rate: 400.0,
            ..RampState::start(&p)
        };
        assert_eq!(
            next_move(&p, &mut s, Ok(()), rej(30.0)),
            RampMove::Raise { rate: 500.0 }
        );
        for _ in 0..2 {
            assert!(matches!(
                next_move(&p, &mut s, Ok(()), rej(30.0)),
                RampMove::Hold { rate, .. } if rate == 500.0
            ));
        }
        assert!(matches!(
            next_move(&p, &mut s, Ok(()), rej(30.0)),
            RampMove::Settle { rate, .. } if rate == 500.0
        ));
        // Had the retrying clients been served meanwhile, it would have lifted.
        let mut t = RampState {
            rate: 500.0,
            ..RampState::start(&p)
        };
        assert!(matches!(
            next_move(&p, &mut t, Ok(()), rej(30.0)),
            RampMove::Hold { .. }
        ));
        assert!(matches!(
            next_move(&p, &mut t, Ok(()), rej(0.0)),
            RampMove::Finish { .. }
        ));
    }

    /// A declared 100 req/s (ceiling 0.9 x 100 = 90) on a service that shows 13 slots over
    /// 40 ms = 325 req/s once readmitted: the ramp used to hold at 90 while the gate turned
    /// away 366 req/s of retrying clients, and settle there. It raises to 0.9 x 325 instead;
    /// a service showing less than declared keeps the plan's ceiling.
    #[test]
    fn a_measured_capacity_over_a_stale_declaration_lifts_the_ceiling() {
        let p = RampParams {
            from: 30.0,
            factor: 1.5,
            ceiling: 90.0,
            ..params()
        };
        let seen = |c: f64| Seen {
            rejected: Some(366.0),
            capacity_now: Some(c),
            demand: None,
        };
        let mut s = RampState {
            rate: 90.0,
            ..RampState::start(&p)
        };
        assert_eq!(
            next_move(&p, &mut s, Ok(()), seen(325.0)),
            RampMove::Raise { rate: 292.5 }
        );
        assert!(matches!(
            next_move(&p, &mut s, Ok(()), seen(325.0)),
            RampMove::Hold { rate, .. } if rate == 292.5
        ));
        let mut slow = RampState {
            rate: 90.0,
            ..RampState::start(&p)
        };
        assert!(matches!(
            next_move(&p, &mut slow, Ok(()), seen(80.0)),
            RampMove::Hold { rate, .. } if rate == 90.0
        ));
        // 0.9 x 400.0000000000083 is 360.0000000000075: at a 360 ceiling that is a hold,
        // not a raise by a rounding error.
        let at = RampParams {
            ceiling: 360.0,
            ..p
        };
        let mut s = RampState {
            rate: 360.0,
            ..RampState::start(&at)
        };
        assert!(matches!(
            next_move(&at, &mut s, Ok(()), seen(400.0000000000083)),
            RampMove::Hold { .. }
        ));
        assert_eq!(ceiling(&p, &seen(325.0)), 292.5);
        assert_eq!(ceiling(&p, &Seen::rejected(Some(1.0))), 90.0);
    }

    /// The settle at a 90 req/s ceiling with demand 20 req/s before the incident: the
    /// excess is not demand, so the reason must not blame the service's capacity; the same
    /// settle with demand over the limit does.
    #[test]
    fn a_settle_blames_capacity_only_when_demand_exceeds_the_limit() {
        let p = RampParams {
            from: 30.0,
            ceiling: 90.0,
            ceiling_holds: 0,
            ..params()
        };
        let settle = |demand: Option<f64>| {
            let mut s = RampState {
                rate: 90.0,
                ..RampState::start(&p)
            };
            let seen = Seen {
                demand,
                ..rej(40.0)
            };
            match next_move(&p, &mut s, Ok(()), seen) {
                RampMove::Settle { reason, .. } => reason,
                other => panic!("expected a settle, got {other:?}"),
            }
        };
        let under = settle(Some(20.0));
        assert!(
            under.starts_with("the gate still rejects 40.0 req/s at the ceiling 90.0 req/s"),
            "{under}"
        );
        assert!(!under.contains("more than the service can take"), "{under}");
        assert!(
            !under.contains("more is offered than the service can take"),
            "{under}"
        );
        assert!(
            under.contains("demand before the incident was 20.0 req/s, under the limit"),
            "{under}"
        );
        assert!(under.contains("capacity is not what held it"), "{under}");
        let over = settle(Some(120.0));
        assert!(
            over.contains("more is offered than the service can take"),
            "{over}"
        );
        let unknown = settle(None);
        assert!(
            unknown.contains("demand before the incident is unknown"),
            "{unknown}"
        );
        let leave = RampMove::Settle {
            rate: 90.0,
            reason: under,
        };
        assert!(
            !leave.describe().contains("service can take"),
            "{}",
            leave.describe()
        );
    }

    #[test]
    fn steps_back_on_relapse_then_fails() {
        let p = params();
        let mut s = RampState::start(&p);
        next_move(&p, &mut s, Ok(()), rej(9.0));
        assert_eq!(s.rate, 200.0);
        let d = next_move(&p, &mut s, Err("latency".into()), rej(9.0));
        assert_eq!(
            d,
            RampMove::StepBack {
                rate: 100.0,
                reason: "latency".into()
            }
        );
        assert!(matches!(
            next_move(&p, &mut s, Err("again".into()), rej(9.0)),
            RampMove::Fail { .. }
        ));
    }
}
