//! Where an interrupted run stands, reconstructed from its journal as a pure function:
//! which steps finished, whether it had switched to its on_failure steps, how far a
//! batched restart had come, and how to reach its target again (also from journals
//! written by older versions).

use super::{Entry, Event};
use crate::detect::Verdict;
use crate::engine::batches::RestartProgress;
use crate::engine::report::{Outcome, Phase, StepOutcome};
use crate::plan::{Plan, PlanInputs, SourcedInputs};
use crate::platform::kube::Workload;
use crate::platform::{KubeTarget, Target};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The decision a journal recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    pub verdict: Verdict,
    pub inputs: Option<PlanInputs>,
    pub sources: Option<SourcedInputs>,
    pub plan: Option<Plan>,
    pub assumed: bool,
}

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
        invocation,
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
        target_spec: target_spec
            .clone()
            .or_else(|| legacy_target(target, invocation)),
        decided: None,
        done: BTreeSet::new(),
        failing: None,
        restart: BTreeMap::new(),
        finished: None,
    };
    for e in entries {
        match &e.event {
            Event::Decided {
                verdict,
                inputs,
                sources,
                plan,
                assumed,
            } => {
                p.decided = Some(Decided {
                    verdict: verdict.clone(),
                    inputs: *inputs,
                    sources: sources.clone(),
                    plan: plan.clone(),
                    assumed: *assumed,
                })
            }
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
                action,
                subject: Some(r),
                ..
            } => {
                let prog = p.restart.entry(step.clone()).or_default();
                match action.as_str() {
                    "replica.restart" => {
                        prog.restarted.insert(r.clone());
                    }
                    "replica.ready" => {
                        prog.ready.insert(r.clone());
                    }
                    _ => {}
                }
            }
            Event::FailurePhase { reason } => p.failing = Some(reason.clone()),
            Event::RunFinished { outcome, .. } => p.finished = Some(*outcome),
            _ => {}
        }
    }
    Ok(p)
}

/// The target of a journal written before targets were recorded as [`Target`]: from the
/// CLI's flags (`{"target": "local", "inventory": ...}`, `{"target": "kube", ...}`),
/// `recover serve`'s route target (`{"target": {"platform": ...}}`) or a rehearsal's run
/// directory (which holds its `inventory.yaml`). `id` is the recorded target id.
pub fn legacy_target(id: &str, invocation: &serde_json::Value) -> Option<Target> {
    let field = |k: &str| invocation.get(k).and_then(|v| v.as_str()).map(String::from);
    let local = |inventory: PathBuf| {
        Some(Target::Local {
            name: id.strip_prefix("local:")?.to_string(),
            inventory,
        })
    };
    if let Some(dir) = field("rehearsal") {
        return local(Path::new(&dir).join("inventory.yaml"));
    }
    match invocation.get("target")? {
        serde_json::Value::String(kind) if kind == "local" => local(field("inventory")?.into()),
        serde_json::Value::String(kind) if kind == "kube" => {
            let workload = match (field("selector"), field("deployment")) {
                (Some(s), _) => Workload::Selector(s),
                (None, Some(d)) => Workload::Deployment(d),
                (None, None) => return None,
            };
            Some(Target::Kube(KubeTarget {
                namespace: field("namespace")?,
                workload,
                context: field("context"),
                prometheus: field("prometheus"),
            }))
        }
        spec @ serde_json::Value::Object(_) => serde_json::from_value(spec.clone()).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{path_for, read, Figures, Journal};
    use super::*;
    use std::fs::OpenOptions;
    use std::io::Write;

    fn started() -> Event {
        Event::RunStarted {
            runbook: "x".into(),
            runbook_source: "src".into(),
            origin: "o".into(),
            target: "local:demo".into(),
            target_spec: Some(Target::Local {
                name: "demo".into(),
                inventory: "/x/inv.yaml".into(),
            }),
            started_by: None,
            invocation: serde_json::Value::Null,
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
        for (action, r) in [
            ("replica.restart", "a"),
            ("replica.ready", "a"),
            ("replica.restart", "b"),
        ] {
            j.append(Event::ActionFinished {
                step: "restart".into(),
                action: action.into(),
                subject: Some(r.into()),
                after: serde_json::Value::Null,
                figures: Figures::new(),
            })
            .unwrap();
        }
        j.append(Event::ActionStarted {
            step: "restart".into(),
            action: "replica.restart".into(),
            subject: Some("c".into()),
            before: serde_json::Value::Null,
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
    fn journals_of_older_versions_name_their_target() {
        let line = r#"{"seq":1,"ts":"2024-01-01T00:00:00Z","run_id":"r","event":"run_started","runbook":"x","runbook_source":"s","origin":"o","target":"local:demo","invocation":{"target":"local","inventory":"/x/inv.yaml"},"pid":1}"#;
        let e: Entry = serde_json::from_str(line).unwrap();
        let p = resume_point(&[e]).unwrap();
        assert_eq!(
            p.target_spec,
            Some(Target::Local {
                name: "demo".into(),
                inventory: "/x/inv.yaml".into()
            })
        );
        let kube = serde_json::json!({"target": "kube", "namespace": "shop", "context": null,
            "deployment": "cs", "selector": null, "prometheus": "http://p:9090"});
        let t = legacy_target("kube:shop/cs", &kube).unwrap();
        assert_eq!(t.id(), "kube:shop/cs");
        assert!(matches!(
            t,
            Target::Kube(KubeTarget {
                prometheus: Some(_),
                ..
            })
        ));
        let serve = serde_json::json!({"by": "recover serve", "route": "stuck",
            "target": {"platform": "local", "name": "demo", "inventory": "/x/inv.yaml"}});
        assert_eq!(
            legacy_target("local:demo", &serve).unwrap().id(),
            "local:demo"
        );
        let rehearsal = serde_json::json!({"rehearsal": "/runs/1"});
        assert_eq!(
            legacy_target("local:rehearsal", &rehearsal),
            Some(Target::Local {
                name: "rehearsal".into(),
                inventory: "/runs/1/inventory.yaml".into()
            })
        );
        assert_eq!(legacy_target("local:x", &serde_json::Value::Null), None);
    }
}
