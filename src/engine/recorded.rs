//! The report of a run rebuilt from its journal, after the fact: the same [`RunReport`]
//! the run returned (steps, figures, decision, outcome, what it left on the gate), so a
//! postmortem written a day later reads the run's own record, not a second account of it.
//! Pure. A run still going, or cut off, has no `run_finished`: its outcome is then
//! `failed` with a message saying the journal ends there, and a step that started without
//! finishing is `aborted` with the same words.

use super::journal::{ActionRecord, Entry, Event};
use super::report::{RunReport, StepRecord};
use super::status::StepOutcome;
use crate::platform::Known;

/// Rebuild the report of the run whose journal is `entries` (`journal`: where it was read).
pub fn from_journal(entries: &[Entry], journal: Option<String>) -> RunReport {
    let first = entries.first();
    let mut r = RunReport::new(
        first.map_or("", |e| &e.run_id),
        "",
        "",
        first.map_or("", |e| &e.ts),
    );
    r.journal = journal;
    let mut finished = false;
    for e in entries {
        match &e.event {
            Event::RunStarted {
                runbook, target, ..
            } => {
                r.runbook = runbook.clone();
                r.target = target.clone();
            }
            Event::Decided(d) => r.record_decision(d),
            Event::StepStarted {
                phase,
                step,
                action,
                ..
            } => r.steps.push(StepRecord {
                name: step.clone(),
                action: action.clone(),
                phase: *phase,
                started_at: Some(e.ts.clone()),
                finished_at: None,
                outcome: StepOutcome::Aborted,
                message: Some("the journal ends before this step finished".into()),
                actions: Vec::new(),
                figures: Default::default(),
            }),
            Event::ActionFinished { step, action } => {
                if let Some(s) = open_step(&mut r, step) {
                    s.actions.push(describe(action));
                }
            }
            Event::RampDecided(d) => {
                if let Some(s) = open_step(&mut r, &d.step) {
                    s.actions.push(d.describe());
                }
            }
            Event::StepFinished {
                step,
                outcome,
                message,
                figures,
                ..
            } => {
                if let Some(s) = open_step(&mut r, step) {
                    s.finished_at = Some(e.ts.clone());
                    s.outcome = *outcome;
                    s.message = message.clone();
                    s.figures = figures.clone();
                }
            }
            Event::RunFinished {
                outcome,
                message,
                gate,
            } => {
                finished = true;
                r.outcome = *outcome;
                r.message = message.clone();
                r.gate = gate.clone();
                r.finished_at = e.ts.clone();
            }
            Event::ActionStarted { .. } | Event::Resumed { .. } | Event::FailurePhase { .. } => {}
        }
    }
    if !finished {
        r.finished_at = entries.last().map(|e| e.ts.clone()).unwrap_or_default();
        r.message = Some(format!(
            "the journal ends at {} without run_finished: the run is still going or was cut off (recover history says which)",
            r.finished_at
        ));
    }
    r
}

/// The latest record of `step` that has not finished (a resumed run starts its
/// interrupted step again).
fn open_step<'r>(r: &'r mut RunReport, step: &str) -> Option<&'r mut StepRecord> {
    r.steps
        .iter_mut()
        .rev()
        .find(|s| s.name == step && s.finished_at.is_none())
}

/// One action in words, with what it observed.
pub fn describe(a: &ActionRecord) -> String {
    fn known<T: std::fmt::Display>(k: &Option<Known<T>>) -> String {
        match k {
            Some(Known::Value(v)) => v.to_string(),
            Some(Known::Unknown { unknown }) => format!("unknown ({unknown})"),
            None => "unknown (not recorded)".into(),
        }
    }
    match a {
        ActionRecord::Drain {
            replica,
            drained,
            kept,
        } => match kept {
            None => format!("drained {replica}: {} requests dropped", known(drained)),
            Some(_) => format!(
                "drained {replica}: {} requests dropped, {} kept (answered before their deadlines)",
                known(drained),
                known(kept)
            ),
        },
        ActionRecord::Restart { replica, seconds } => match seconds {
            Some(s) => format!("restarted {replica} in {s:.1} s"),
            None => format!("restarted {replica}"),
        },
        ActionRecord::Ready { replica, seconds } => {
            format!("{replica} ready after {seconds:.1} s")
        }
        ActionRecord::Warm {
            replica,
            warm_fraction,
        } => format!("warmed {replica}: warm fraction {}", known(warm_fraction)),
        ActionRecord::SetLimit { new, after, .. } => {
            let after = match after {
                Some(Known::Value(l)) => super::actions::describe_limit(l),
                Some(Known::Unknown { unknown }) => format!("unknown ({unknown})"),
                None => "not confirmed".into(),
            };
            format!(
                "set the gate limit to {}{}; the gate then said {after}",
                super::actions::describe_limit(&new.limit),
                match new.fill.tokens(new.limit.burst) {
                    None => String::new(),
                    Some(n) if n == new.limit.burst => ", its bucket full".into(),
                    Some(n) => format!(", its bucket starting with {n} tokens"),
                }
            )
        }
        ActionRecord::Notify { message } => format!("notified: {message}"),
    }
}
