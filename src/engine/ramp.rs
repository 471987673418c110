//! Progressive readmission decisions, as a pure function: given the check's result at the
//! current rate and whether the gate still rejects anything, raise, step back and hold,
//! finish, or fail. The executor only applies what this decides.

use serde::Serialize;

/// The ramp's parameters, resolved to numbers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RampParams {
    pub from: f64,
    pub factor: f64,
    /// At or above this rate the gate cannot be what limits traffic; lifting it is safe.
    pub ceiling: f64,
    pub max_relapses: u32,
}

/// Where the ramp is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RampState {
    pub rate: f64,
    pub relapses: u32,
    /// The highest rate that passed its check.
    pub last_good: Option<f64>,
}

impl RampState {
    pub fn start(p: &RampParams) -> Self {
        RampState {
            rate: p.from,
            relapses: 0,
            last_good: None,
        }
    }
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum RampDecision {
    /// Set this rate, hold, check again.
    Raise {
        rate: f64,
    },
    /// The check failed: go back to this rate and hold.
    StepBack {
        rate: f64,
        reason: String,
    },
    /// The gate no longer limits anything: lift the limit.
    Finish {
        reason: String,
    },
    Fail {
        reason: String,
    },
}

/// Decide after a check at `state.rate`. `rejected` is the gate's rejected rate (None: no
/// data, which never counts as "no longer rejecting").
pub fn decide(
    p: &RampParams,
    state: &mut RampState,
    passed: Result<(), String>,
    rejected: Option<f64>,
) -> RampDecision {
    match passed {
        Ok(()) => {
            state.last_good = Some(state.rate);
            if rejected.is_some_and(|r| r < 0.01) {
                return RampDecision::Finish {
                    reason: format!("the gate rejects nothing at {:.1} req/s", state.rate),
                };
            }
            if state.rate >= p.ceiling {
                return RampDecision::Finish {
                    reason: format!(
                        "admitting {:.1} req/s, at the ceiling {:.1}",
                        state.rate, p.ceiling
                    ),
                };
            }
            state.rate = (state.rate * p.factor).min(p.ceiling);
            RampDecision::Raise { rate: state.rate }
        }
        Err(why) => {
            state.relapses += 1;
            if state.relapses > p.max_relapses {
                return RampDecision::Fail {
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
            RampDecision::StepBack {
                rate: back,
                reason: why,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> RampParams {
        RampParams {
            from: 100.0,
            factor: 2.0,
            ceiling: 500.0,
            max_relapses: 1,
        }
    }

    #[test]
    fn raises_until_nothing_is_rejected() {
        let p = params();
        let mut s = RampState::start(&p);
        assert_eq!(
            decide(&p, &mut s, Ok(()), Some(50.0)),
            RampDecision::Raise { rate: 200.0 }
        );
        assert_eq!(
            decide(&p, &mut s, Ok(()), None),
            RampDecision::Raise { rate: 400.0 }
        );
        assert!(matches!(
            decide(&p, &mut s, Ok(()), Some(0.0)),
            RampDecision::Finish { .. }
        ));
    }

    #[test]
    fn stops_at_the_ceiling() {
        let p = params();
        let mut s = RampState {
            rate: 400.0,
            relapses: 0,
            last_good: None,
        };
        assert_eq!(
            decide(&p, &mut s, Ok(()), Some(3.0)),
            RampDecision::Raise { rate: 500.0 }
        );
        assert!(matches!(
            decide(&p, &mut s, Ok(()), Some(3.0)),
            RampDecision::Finish { .. }
        ));
    }

    #[test]
    fn steps_back_on_relapse_then_fails() {
        let p = params();
        let mut s = RampState::start(&p);
        decide(&p, &mut s, Ok(()), Some(9.0));
        assert_eq!(s.rate, 200.0);
        let d = decide(&p, &mut s, Err("latency".into()), Some(9.0));
        assert_eq!(
            d,
            RampDecision::StepBack {
                rate: 100.0,
                reason: "latency".into()
            }
        );
        assert!(matches!(
            decide(&p, &mut s, Err("again".into()), Some(9.0)),
            RampDecision::Fail { .. }
        ));
    }
}
