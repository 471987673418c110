//! Where an interrupted run stands, reconstructed from its journal as a pure function:
//! which steps finished, whether it had switched to its on_failure steps, how far a
//! batched restart had come, and how to reach its target again.

use super::{ActionRecord, Decided, Entry, Event};
use crate::engine::actions::GateMemory;
use crate::engine::batches::RestartProgress;
use crate::engine::ramp::RampMove;
use crate::engine::status::{Outcome, Phase, StepOutcome};
use crate::platform::Target;
use std::collections::{BTreeMap, BTreeSet};

/// Where an interrupted run stands, reconstructed from its journal.
#[derive(Debug, Clone, PartialEq)]
pub struct ResumePoint {
    pub run_id: String,
    pub runbook_source: String,
    pub origin: String,
    pub target: String,
    /// How to reach the target again (None: the journal does not say).
    pub target_spec: Option<Target>,
    pub decided: Option<Decided>,
    /// Steps that finished, by phase.
    pub done: BTreeSet<(Phase, String)>,
    /// Set once the run switched to its on_failure steps.
    pub failing: Option<String>,
    pub restart: BTreeMap<String, RestartProgress>,
    pub finished: Option<Outcome>,
    /// What the run saw of the gate (the limit before its first gate action, a settled
    /// readmission), for the hand-back.
    pub gate: GateMemory,
}

/// A journal that cannot say where its run stands.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JournalError {
    #[error("empty journal")]
    Empty,
    #[error("journal does not start with run_started")]
    NoStart,
}

/// Reconstruct where a run stands. Pure.
pub fn resume_point(entries: &[Entry]) -> Result<ResumePoint, JournalError> {
    let first = entries.first().ok_or(JournalError::Empty)?;
    let Event::RunStarted {
        runbook_source,
        origin,
        target,
        target_spec,
        ..
    } = &first.event
    else {
        return Err(JournalError::NoStart);
    };
    let mut p = ResumePoint {
        run_id: first.run_id.clone(),
        runbook_source: runbook_source.clone(),
        origin: origin.clone(),
        target: target.clone(),
        target_spec: target_spec.clone(),
        decided: None,
        done: BTreeSet::new(),
        failing: None,
        restart: BTreeMap::new(),
        finished: None,
        gate: GateMemory::default(),
    };
    for e in entries {
        match &e.event {
            Event::Decided(d) => p.decided = Some(d.clone()),
            Event::StepFinished {
                phase,
                step,
                outcome,
                ..
            } if *outcome == StepOutcome::Succeeded => {
                p.done.insert((*phase, step.clone()));
            }
            Event::ActionFinished {
                step,
                action: ActionRecord::Restart { replica, .. },
            } => {
                let prog = p.restart.entry(step.clone()).or_default();
                prog.restarted.insert(replica.clone());
            }
            Event::ActionFinished {
                step,
                action: ActionRecord::Ready { replica, .. },
            } => {
                let prog = p.restart.entry(step.clone()).or_default();
                prog.ready.insert(replica.clone());
            }
            Event::ActionStarted {
                action: ActionRecord::SetLimit { before, .. },
                ..
            } if p.gate.before_run.is_none() => p.gate.before_run = Some(before.clone()),
            Event::RampDecided(d) => {
                if let RampMove::Settle { reason, .. } = &d.decision {
                    p.gate.settled = Some(reason.clone());
                }
            }
            Event::FailurePhase { reason } => p.failing = Some(reason.clone()),
            Event::RunFinished { outcome, .. } => p.finished = Some(*outcome),
            _ => {}
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::super::{path_for, read, Journal, FORMAT};
    use super::*;
    use crate::engine::status::Figures;
    use std::fs::OpenOptions;
    use std::io::Write;

    fn started() -> Event {
        Event::RunStarted {
            format: FORMAT,
            runbook: "x".into(),
            runbook_source: "src".into(),
            origin: "o".into(),
            target: "local:demo".into(),
            target_spec: Some(Target::Local {
                name: "demo".into(),
                inventory: "/x/inv.yaml".into(),
            }),
            started_by: None,
            pid: 1,
        }
    }

    #[test]
    fn round_trips_and_reconstructs_a_half_done_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::create(dir.path(), "run-1").unwrap();
        j.append(started()).unwrap();
        j.append(Event::StepFinished {
            phase: Phase::Main,
            step: "block".into(),
            outcome: StepOutcome::Succeeded,
            message: None,
            figures: Figures::new(),
        })
        .unwrap();
        let restart = |r: &str| ActionRecord::Restart {
            replica: r.into(),
            seconds: Some(1.0),
        };
        let ready = |r: &str| ActionRecord::Ready {
            replica: r.into(),
            seconds: 2.0,
        };
        for action in [restart("a"), ready("a"), restart("b")] {
            j.append(Event::ActionFinished {
                step: "restart".into(),
                action,
            })
            .unwrap();
        }
        // Started, not finished: not counted as restarted.
        j.append(Event::ActionStarted {
            step: "restart".into(),
            action: ActionRecord::Restart {
                replica: "c".into(),
                seconds: None,
            },
        })
        .unwrap();
        drop(j);
        // A torn write at the end is ignored.
        let path = path_for(dir.path(), "run-1");
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"seq\":7,\"ts").unwrap();
        let entries = read(&path).unwrap();
        assert_eq!(entries.len(), 6);
        let p = resume_point(&entries).unwrap();
        assert!(p.done.contains(&(Phase::Main, "block".to_string())));
        let r = &p.restart["restart"];
        assert_eq!(r.restarted.iter().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(r.ready.iter().collect::<Vec<_>>(), ["a"]);
        assert_eq!(p.finished, None);
        let (mut j, old) = Journal::reopen(&path).unwrap();
        assert_eq!(old.len(), 6);
        assert_eq!(j.append(Event::Resumed { pid: 2 }).unwrap().seq, 7);
    }

    #[test]
    fn the_records_on_disk_name_the_action_and_its_replica() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::create(dir.path(), "run-2").unwrap();
        j.append(started()).unwrap();
        j.append(Event::ActionFinished {
            step: "restart".into(),
            action: ActionRecord::Restart {
                replica: "svc-0".into(),
                seconds: Some(0.5),
            },
        })
        .unwrap();
        let text = std::fs::read_to_string(path_for(dir.path(), "run-2")).unwrap();
        let line: serde_json::Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
        assert_eq!(line["event"], "action_finished");
        assert_eq!(line["action"], "replica.restart");
        assert_eq!(line["replica"], "svc-0");
        assert_eq!(line["seconds"], 0.5);
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(first["format"], FORMAT);
    }

    #[test]
    fn a_journal_of_another_format_is_refused_with_its_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.jsonl");
        let old = r#"{"seq":1,"ts":"2024-01-01T00:00:00Z","run_id":"r","event":"run_started","runbook":"x","runbook_source":"s","origin":"o","target":"local:demo","pid":1}
{"seq":2,"ts":"2024-01-01T00:00:01Z","run_id":"r","event":"action_started","step":"s","action":"replica.restart","subject":"a","before":{}}
"#;
        std::fs::write(&path, old).unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(
            e.contains("journal format 1") && e.contains(&format!("format {FORMAT} only")),
            "{e}"
        );
    }
}
