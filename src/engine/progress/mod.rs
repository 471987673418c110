//! Live progress: the engine publishes [`ProgressEvent`]s as it goes, what it sees (the
//! figures each check measurement read) and what it decides (each ramp move, as the
//! journal records it); an [`Observer`] shows them. Whoever shows them renders events and
//! never measures anything itself, so what a person watches is what the engine acted on.
//!
//! - [`live`]: the live line (figures and the next decision), a pure fold over events;
//! - [`terminal`]: a spinner per step and the live line on a TTY, plain lines otherwise;
//! - [`log`]: events as log records, words for people and structured keys in JSON.

pub mod live;
pub mod log;
pub mod terminal;

pub use live::{render, LiveView};
pub use log::LogObserver;
pub use terminal::TerminalObserver;

use super::check::{CheckState, Measurement};
use super::ramp::{RampDecision, RampParams, RampState};
use super::status::{Figures, Outcome, Phase, StepOutcome};
use crate::metrics::signal::names;
use serde::Serialize;

/// The runbook parameter holding the clients' timeout, which the live line sets the p99
/// against.
pub const CLIENT_TIMEOUT_PARAM: &str = "params.client_timeout_s";

/// Something worth showing while a run goes on.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ProgressEvent {
    Observing {
        sample: u32,
        of: u32,
    },
    Decided {
        summary: String,
    },
    StepStarted {
        index: usize,
        total: usize,
        phase: Phase,
        step: String,
        action: String,
    },
    Info {
        step: String,
        message: String,
    },
    /// What the signals show now (sampled while the ramp holds a rate).
    Observed {
        step: String,
        readings: Readings,
    },
    /// One measurement of a check, with the figures it read.
    CheckMeasured {
        step: String,
        check: String,
        measurement: Measurement,
        state: CheckState,
        /// Successes in a row the check needs.
        needed: u32,
        /// None: no limit.
        failure_limit: Option<u32>,
        readings: Readings,
    },
    /// The gate's limit as the engine just set it (None: unlimited); `shadow`: decided
    /// and counted by the gate, nothing refused.
    LimitSet {
        step: String,
        rate_per_s: Option<f64>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        shadow: bool,
    },
    /// The ramp holds `state.rate`, then runs `check`; `params` and `state` are what its
    /// next move will be decided from.
    RampHolding {
        step: String,
        check: String,
        check_needed: u32,
        hold_s: f64,
        params: RampParams,
        state: RampState,
    },
    /// A ramp move, exactly as the journal records it.
    RampDecided(RampDecision),
    StepFinished {
        step: String,
        outcome: StepOutcome,
        message: Option<String>,
        figures: Figures,
    },
    Finished {
        run_id: String,
        outcome: Outcome,
    },
}

impl ProgressEvent {
    /// The step the event belongs to, if any.
    pub fn step(&self) -> Option<&str> {
        match self {
            ProgressEvent::StepStarted { step, .. }
            | ProgressEvent::Info { step, .. }
            | ProgressEvent::Observed { step, .. }
            | ProgressEvent::CheckMeasured { step, .. }
            | ProgressEvent::LimitSet { step, .. }
            | ProgressEvent::RampHolding { step, .. }
            | ProgressEvent::StepFinished { step, .. } => Some(step),
            ProgressEvent::RampDecided(d) => Some(&d.step),
            _ => None,
        }
    }

    /// Whether only the live line shows it: figures a second, the limit each raise sets
    /// (its decision has a line of its own), a check measurement that passed.
    pub fn is_live_only(&self) -> bool {
        matches!(
            self,
            ProgressEvent::Observed { .. }
                | ProgressEvent::LimitSet { .. }
                | ProgressEvent::CheckMeasured {
                    measurement: Measurement::Success,
                    ..
                }
        )
    }

    /// The event in words, for a line of its own; None for what only the live line shows
    /// ([`Self::is_live_only`]).
    pub fn words(&self) -> Option<String> {
        (!self.is_live_only()).then(|| self.describe())
    }

    /// The event in words.
    pub fn describe(&self) -> String {
        match self {
            ProgressEvent::Observing { sample, of } => {
                format!("observing metrics: sample {sample}/{of}")
            }
            ProgressEvent::Decided { summary } => summary.clone(),
            ProgressEvent::StepStarted {
                index,
                total,
                phase,
                step,
                action,
            } => {
                let p = if *phase == Phase::OnFailure {
                    " (on_failure)"
                } else {
                    ""
                };
                format!("[{index}/{total}]{p} {step} ({action})")
            }
            ProgressEvent::Info { step, message } => format!("  {step}: {message}"),
            ProgressEvent::Observed { step, readings } => format!(
                "  {step}: admitted {}, useful {}, queue {}",
                opt(readings.admitted_rate, "req/s"),
                opt(readings.goodput, "req/s"),
                opt(readings.queue_depth, "")
            ),
            ProgressEvent::RampHolding {
                step,
                check,
                check_needed,
                state,
                hold_s,
                ..
            } if *hold_s <= 0.0 => format!(
                "  {step}: holding {:.1} req/s until check {check} passes ({check_needed} in a row)",
                state.rate
            ),
            ProgressEvent::RampHolding {
                step,
                check,
                state,
                hold_s,
                ..
            } => format!(
                "  {step}: holding {:.1} req/s for {}, then check {check}",
                state.rate,
                crate::util::duration::format(std::time::Duration::from_secs_f64(*hold_s))
            ),
            ProgressEvent::CheckMeasured {
                step,
                check,
                measurement,
                state,
                failure_limit,
                ..
            } => {
                let what = match measurement {
                    Measurement::Success => "holds".to_string(),
                    Measurement::Failure => "does not hold".to_string(),
                    Measurement::Neutral => "not yet".to_string(),
                    Measurement::Inconclusive { missing } => {
                        format!("no data for {}", missing.join(", "))
                    }
                };
                let limit = failure_limit.map_or("no limit".to_string(), |l| format!("limit {l}"));
                format!(
                    "  {step}: check {check} measurement {}: {what} ({} failed, {limit})",
                    state.measurements, state.failures
                )
            }
            ProgressEvent::LimitSet {
                step,
                rate_per_s,
                shadow,
            } => match (rate_per_s, shadow) {
                (Some(r), false) => format!("  {step}: gate limit set to {r:.1} req/s"),
                (Some(r), true) => format!(
                    "  {step}: gate limit set to {r:.1} req/s in shadow (counted, nothing refused)"
                ),
                (None, false) => format!("  {step}: gate limit lifted"),
                (None, true) => format!(
                    "  {step}: gate limit in shadow (in-flight cap counted, nothing refused)"
                ),
            },
            ProgressEvent::RampDecided(d) => format!("  {}: decision {}", d.step, d.describe()),
            ProgressEvent::StepFinished {
                step,
                outcome,
                message,
                ..
            } => format!(
                "  {step}: {}{}",
                outcome.words(),
                message
                    .as_ref()
                    .map(|m| format!(" - {m}"))
                    .unwrap_or_default()
            ),
            ProgressEvent::Finished { run_id, outcome } => {
                format!("run {run_id}: {}", outcome.words())
            }
        }
    }
}

/// A figure with its unit, or "no data".
fn opt(v: Option<f64>, unit: &str) -> String {
    match v {
        Some(v) if unit.is_empty() => format!("{v:.0}"),
        Some(v) => format!("{v:.1} {unit}"),
        None => "no data".to_string(),
    }
}

/// What the signals a person watches during a readmission read at one moment. Each is
/// None when the runbook has no such signal or it had no data: never a zero.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Readings {
    /// Requests/s arriving at the gate (admitted plus rejected when not measured).
    pub offered_rate: Option<f64>,
    pub admitted_rate: Option<f64>,
    /// Useful completions/s: answered while a client still waited.
    pub goodput: Option<f64>,
    pub rejected_rate: Option<f64>,
    pub latency_p99_s: Option<f64>,
    /// The clients' timeout: what they export (`client_timeout`), else the runbook's
    /// `params.client_timeout_s`, which `timeout_declared` then says.
    pub client_timeout_s: Option<f64>,
    pub timeout_declared: bool,
    pub clients_retrying: Option<f64>,
    pub queue_depth: Option<f64>,
}

impl Readings {
    /// Read the well-known signals (and the client timeout parameter) through `lookup`.
    pub fn read(lookup: &dyn Fn(&str) -> Option<f64>) -> Self {
        let admitted = lookup(names::GATE_ADMITTED_RATE);
        let rejected = lookup(names::GATE_REJECTED_RATE);
        let measured_timeout = lookup(names::CLIENT_TIMEOUT);
        let declared_timeout = lookup(CLIENT_TIMEOUT_PARAM);
        let offered = lookup(names::OFFERED_RATE).or(match (admitted, rejected) {
            (Some(a), Some(r)) => Some(a + r),
            _ => None,
        });
        Readings {
            offered_rate: offered,
            admitted_rate: admitted,
            goodput: lookup(names::GOODPUT),
            rejected_rate: rejected,
            latency_p99_s: lookup(names::LATENCY_P99),
            client_timeout_s: measured_timeout.or(declared_timeout),
            timeout_declared: measured_timeout.is_none() && declared_timeout.is_some(),
            clients_retrying: lookup(names::CLIENTS_RETRYING),
            queue_depth: lookup(names::QUEUE_DEPTH),
        }
    }
}

/// Shows progress events. `run_id` names the run they belong to.
pub trait Observer: Send + Sync {
    fn event(&self, run_id: &str, e: &ProgressEvent);
}

/// Several observers at once (the terminal and the JSON log).
pub struct Fanout(pub Vec<std::sync::Arc<dyn Observer>>);

impl Observer for Fanout {
    fn event(&self, run_id: &str, e: &ProgressEvent) {
        for o in &self.0 {
            o.event(run_id, e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offered_is_admitted_plus_rejected_when_not_measured() {
        let r = Readings::read(&|n| match n {
            "gate_admitted_rate" => Some(30.0),
            "gate_rejected_rate" => Some(12.0),
            CLIENT_TIMEOUT_PARAM => Some(2.0),
            _ => None,
        });
        assert_eq!(r.offered_rate, Some(42.0));
        assert_eq!(r.client_timeout_s, Some(2.0));
        assert!(r.timeout_declared);
        assert_eq!(r.queue_depth, None, "no data is not a zero");
    }

    #[test]
    fn the_clients_own_timeout_wins_over_the_declared_one() {
        let r = Readings::read(&|n| match n {
            "client_timeout" => Some(1.0),
            CLIENT_TIMEOUT_PARAM => Some(2.0),
            _ => None,
        });
        assert_eq!(r.client_timeout_s, Some(1.0));
        assert!(!r.timeout_declared);
    }

    #[test]
    fn step_events_say_what_happened_in_words() {
        let e = ProgressEvent::StepFinished {
            step: "readmit".into(),
            outcome: StepOutcome::TimedOut,
            message: Some("timed out after 10m".into()),
            figures: Figures::new(),
        };
        assert_eq!(
            e.words().unwrap(),
            "  readmit: timed out - timed out after 10m"
        );
        let params = RampParams {
            from: 30.0,
            factor: 1.5,
            ceiling: 100.0,
            max_relapses: 1,
            ceiling_holds: 1,
            headroom: 0.9,
        };
        let hold = ProgressEvent::RampHolding {
            step: "readmit".into(),
            check: "healthy".into(),
            check_needed: 3,
            hold_s: 0.5,
            params,
            state: RampState::start(&params),
        };
        assert_eq!(
            hold.words().unwrap(),
            "  readmit: holding 30.0 req/s for 500ms, then check healthy"
        );
        let figures = ProgressEvent::Observed {
            step: "readmit".into(),
            readings: Readings::default(),
        };
        assert_eq!(
            figures.words(),
            None,
            "a line a second is for the live view"
        );
    }
}
