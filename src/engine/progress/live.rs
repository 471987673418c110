//! The live line under the step progress: what the checks see and what comes next.
//!
//! ```text
//! offered 120.0/s  admitted 30.0/s  rejected 90.0/s  useful 29.4/s  limit 30.0/s  p99 0.21s (timeout 2.0s)  retrying 87  queue 3 | holding 30.0 req/s, check 2/3 passed; next: raise to 45.0 req/s if it passes
//! ```
//!
//! A limit in shadow reads `limit 30.0/s (shadow)`: the gate counts what it would refuse
//! and refuses nothing, so the figures are those of traffic it did not shed.
//!
//! A pure fold over [`ProgressEvent`]s: the figures are the last ones a check or a hold
//! read, the limit the last one the engine set, and the "next" move is what
//! [`next_move`] (the function the ramp itself calls) makes of the ramp's state and the
//! latest rejected rate should the check pass. It never measures anything.

use super::{ProgressEvent, Readings};
use crate::engine::check::CheckState;
use crate::engine::ramp::{next_move, RampMove, RampParams, RampState, Seen};

/// Where a check stands, as its last measurement left it.
#[derive(Debug, Clone, PartialEq)]
struct CheckSeen {
    name: String,
    state: CheckState,
    needed: u32,
    failure_limit: Option<u32>,
}

/// The ramp's rate and what its next move will be decided from.
#[derive(Debug, Clone, PartialEq)]
struct RampSeen {
    params: RampParams,
    state: RampState,
}

/// What the live line knows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LiveView {
    readings: Option<Readings>,
    /// The limit last set: `Some(None)` is unlimited.
    limit: Option<Option<f64>>,
    /// Whether the limit last set is in shadow.
    shadow: bool,
    check: Option<CheckSeen>,
    ramp: Option<RampSeen>,
}

impl LiveView {
    /// Take one event in.
    pub fn apply(&mut self, e: &ProgressEvent) {
        match e {
            ProgressEvent::StepStarted { .. } => {
                self.check = None;
                self.ramp = None;
            }
            ProgressEvent::Observed { readings, .. } => self.readings = Some(readings.clone()),
            ProgressEvent::CheckMeasured {
                check,
                state,
                needed,
                failure_limit,
                readings,
                ..
            } => {
                self.readings = Some(readings.clone());
                self.check = Some(CheckSeen {
                    name: check.clone(),
                    state: state.clone(),
                    needed: *needed,
                    failure_limit: *failure_limit,
                });
            }
            ProgressEvent::LimitSet {
                rate_per_s, shadow, ..
            } => {
                self.limit = Some(*rate_per_s);
                self.shadow = *shadow;
            }
            ProgressEvent::RampHolding {
                check,
                check_needed,
                params,
                state,
                ..
            } => {
                self.ramp = Some(RampSeen {
                    params: *params,
                    state: state.clone(),
                });
                self.check = Some(CheckSeen {
                    name: check.clone(),
                    state: CheckState::default(),
                    needed: *check_needed,
                    failure_limit: None,
                });
            }
            ProgressEvent::RampDecided(d) => {
                if !matches!(
                    d.decision,
                    RampMove::Raise { .. } | RampMove::StepBack { .. } | RampMove::Hold { .. }
                ) {
                    self.ramp = None;
                    self.check = None;
                }
            }
            ProgressEvent::StepFinished { .. } => self.check = None,
            ProgressEvent::Finished { .. } => *self = LiveView::default(),
            ProgressEvent::Observing { .. }
            | ProgressEvent::Decided { .. }
            | ProgressEvent::Info { .. } => {}
        }
    }

    /// The line to show, once there is something to show.
    pub fn line(&self) -> Option<String> {
        let figures = self.readings.as_ref().map(|r| self.figures(r));
        let next = self.next();
        match (figures, next) {
            (None, None) => None,
            (Some(f), None) => Some(f),
            (None, Some(n)) => Some(n),
            (Some(f), Some(n)) => Some(format!("{f} | {n}")),
        }
    }

    fn figures(&self, r: &Readings) -> String {
        let rate = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}/s"));
        let count = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
        let limit = match self.limit {
            None => "-".to_string(),
            Some(None) => "none".to_string(),
            Some(Some(l)) => format!("{l:.1}/s"),
        };
        let limit = if self.shadow {
            format!("{limit} (shadow)")
        } else {
            limit
        };
        let p99 = match (r.latency_p99_s, r.client_timeout_s) {
            (None, _) => "-".to_string(),
            (Some(p), None) => format!("{p:.2}s"),
            (Some(p), Some(t)) if r.timeout_declared => {
                format!("{p:.2}s (declared timeout {t:.1}s)")
            }
            (Some(p), Some(t)) => format!("{p:.2}s (timeout {t:.1}s)"),
        };
        format!(
            "offered {}  admitted {}  rejected {}  useful {}  limit {limit}  p99 {p99}  retrying {}  queue {}",
            rate(r.offered_rate),
            rate(r.admitted_rate),
            rate(r.rejected_rate),
            rate(r.goodput),
            count(r.clients_retrying),
            count(r.queue_depth),
        )
    }

    /// Where the check stands and, during a readmission, the move it leads to.
    fn next(&self) -> Option<String> {
        let check = self.check.as_ref().map(|c| {
            let mut s = format!(
                "check {} {}/{} passed",
                c.name, c.state.consecutive_successes, c.needed
            );
            if c.state.failures > 0 {
                s.push_str(&format!(", {} failed", c.state.failures));
                if let Some(l) = c.failure_limit {
                    s.push_str(&format!(" (limit {l})"));
                }
            }
            s
        });
        let Some(ramp) = &self.ramp else {
            return check;
        };
        let rejected = self.readings.as_ref().and_then(|r| r.rejected_rate);
        let mut state = ramp.state.clone();
        let then = next_move(&ramp.params, &mut state, Ok(()), Seen::rejected(rejected));
        Some(format!(
            "holding {:.1} req/s, {}; next: {} if it passes",
            ramp.state.rate,
            check.unwrap_or_else(|| "check not started".into()),
            then.describe()
        ))
    }
}

/// The live lines a sequence of events gives, one each time the line changes.
pub fn render(events: &[ProgressEvent]) -> Vec<String> {
    let mut view = LiveView::default();
    let mut out: Vec<String> = Vec::new();
    for e in events {
        view.apply(e);
        if let Some(line) = view.line() {
            if out.last() != Some(&line) {
                out.push(line);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::check::Measurement;
    use crate::engine::ramp::RampDecision;

    fn params() -> RampParams {
        RampParams {
            from: 30.0,
            factor: 1.5,
            ceiling: 200.0,
            max_relapses: 2,
            ceiling_holds: 3,
            headroom: 0.9,
        }
    }

    fn readings(rejected: f64) -> Readings {
        Readings {
            offered_rate: Some(30.0 + rejected),
            admitted_rate: Some(30.0),
            goodput: Some(29.4),
            rejected_rate: Some(rejected),
            latency_p99_s: Some(0.21),
            client_timeout_s: Some(2.0),
            timeout_declared: false,
            clients_retrying: Some(87.0),
            queue_depth: Some(3.0),
        }
    }

    fn measured(successes: u32, rejected: f64) -> ProgressEvent {
        ProgressEvent::CheckMeasured {
            step: "readmit".into(),
            check: "healthy".into(),
            measurement: Measurement::Success,
            state: CheckState {
                measurements: successes,
                consecutive_successes: successes,
                failures: 0,
                inconclusive: 0,
            },
            needed: 3,
            failure_limit: Some(2),
            readings: readings(rejected),
        }
    }

    fn holding(rate: f64) -> ProgressEvent {
        let mut state = RampState::start(&params());
        state.rate = rate;
        ProgressEvent::RampHolding {
            step: "readmit".into(),
            check: "healthy".into(),
            check_needed: 3,
            hold_s: 5.0,
            params: params(),
            state,
        }
    }

    #[test]
    fn a_readmission_reads_as_figures_then_the_next_move() {
        let events = [
            ProgressEvent::LimitSet {
                step: "readmit".into(),
                rate_per_s: Some(30.0),
                shadow: false,
            },
            holding(30.0),
            measured(1, 0.0),
            measured(2, 0.0),
        ];
        let lines = render(&events);
        assert_eq!(
            lines.last().unwrap(),
            "offered 30.0/s  admitted 30.0/s  rejected 0.0/s  useful 29.4/s  limit 30.0/s  p99 0.21s (timeout 2.0s)  retrying 87  queue 3 | holding 30.0 req/s, check healthy 2/3 passed; next: lift the limit if it passes"
        );
        assert_eq!(
            lines[0],
            "holding 30.0 req/s, check healthy 0/3 passed; next: raise to 45.0 req/s if it passes",
            "before any figure arrives the line shows the ramp alone"
        );
    }

    #[test]
    fn the_next_move_follows_what_the_gate_rejects() {
        // 30 admitted and 60 rejected are offered: a pass raises to 99, not to 45.
        let lines = render(&[holding(30.0), measured(1, 60.0)]);
        assert!(
            lines
                .last()
                .unwrap()
                .ends_with("next: raise to 99.0 req/s if it passes"),
            "{lines:?}"
        );
    }

    #[test]
    fn a_finished_ramp_leaves_only_the_figures() {
        let done = ProgressEvent::RampDecided(RampDecision {
            step: "readmit".into(),
            at_rate: 30.0,
            rejected: Some(0.0),
            check_failed: None,
            decision: RampMove::Finish {
                reason: "nothing rejected".into(),
            },
        });
        let lift = ProgressEvent::LimitSet {
            step: "readmit".into(),
            rate_per_s: None,
            shadow: false,
        };
        let lines = render(&[holding(30.0), measured(3, 0.0), done, lift]);
        let last = lines.last().unwrap();
        assert!(last.contains("limit none") && !last.contains('|'), "{last}");
    }

    #[test]
    fn a_limit_in_shadow_says_so_beside_its_rate() {
        let watch = ProgressEvent::LimitSet {
            step: "watch".into(),
            rate_per_s: Some(30.0),
            shadow: true,
        };
        let lines = render(&[watch, measured(1, 0.0)]);
        let last = lines.last().unwrap();
        assert!(last.contains("limit 30.0/s (shadow)"), "{last}");
    }

    #[test]
    fn missing_figures_show_as_dashes_not_zeros() {
        let lines = render(&[ProgressEvent::Observed {
            step: "readmit".into(),
            readings: Readings::default(),
        }]);
        assert_eq!(
            lines,
            ["offered -  admitted -  rejected -  useful -  limit -  p99 -  retrying -  queue -"]
        );
    }
}
