//! The run journal: one append-only JSONL file per run, fsync'd before and after every
//! action, so that after a crash (or SIGKILL) the file says exactly what was done and what
//! was in progress. `recover resume` and `recover history` read it back; [`resume_point`]
//! turns the entries into where to carry on, as a pure function.

use super::batches::RestartProgress;
use super::report::{Outcome, Phase, StepOutcome};
use crate::detect::Verdict;
use crate::plan::{Plan, PlanInputs, SourcedInputs};
use crate::platform::kube::Workload;
use crate::platform::{KubeTarget, Target};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

/// Figures recorded with an action or step (dropped requests, rates, counts).
pub type Figures = BTreeMap<String, f64>;

/// One line of the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub seq: u64,
    /// RFC 3339 UTC.
    pub ts: String,
    pub run_id: String,
    #[serde(flatten)]
    pub event: Event,
}

/// What happened.
// Entries are built one per action and written at once; their size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    RunStarted {
        runbook: String,
        /// The runbook text, so a resumed run follows the same procedure.
        runbook_source: String,
        origin: String,
        /// The target id (`local:demo`).
        target: String,
        /// How to reach the target again, for `recover resume`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target_spec: Option<Target>,
        /// Who started the run, when not a person at a terminal (`recover serve`, a
        /// rehearsal).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        started_by: Option<String>,
        /// What older versions wrote instead of `target_spec` (their CLI flags as JSON);
        /// read only, see [`legacy_target`].
        #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
        invocation: serde_json::Value,
        pid: u32,
    },
    Resumed {
        pid: u32,
    },
    Decided {
        verdict: Verdict,
        inputs: Option<PlanInputs>,
        /// Where each input came from (absent in journals of older versions).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sources: Option<SourcedInputs>,
        plan: Option<Plan>,
        /// True when the plan inputs were given by the operator, not measured.
        assumed: bool,
    },
    StepStarted {
        phase: Phase,
        index: usize,
        step: String,
        action: String,
    },
    ActionStarted {
        step: String,
        action: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subject: Option<String>,
        #[serde(default)]
        before: serde_json::Value,
    },
    ActionFinished {
        step: String,
        action: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subject: Option<String>,
        #[serde(default)]
        after: serde_json::Value,
        #[serde(default)]
        figures: Figures,
    },
    StepFinished {
        phase: Phase,
        step: String,
        outcome: StepOutcome,
        #[serde(default)]
        message: Option<String>,
        #[serde(default)]
        figures: Figures,
    },
    FailurePhase {
        reason: String,
    },
    RunFinished {
        outcome: Outcome,
        #[serde(default)]
        message: Option<String>,
    },
}

/// An open journal, appending.
#[derive(Debug)]
pub struct Journal {
    file: File,
    path: PathBuf,
    run_id: String,
    seq: u64,
}

pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// A new run id: sortable by start time, unique enough for one machine's runs.
pub fn new_run_id() -> String {
    let ts = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let compact: String = ts.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    format!("{compact}-{:04x}", rand::random::<u16>())
}

/// The journal file of `run_id` in `dir`.
pub fn path_for(dir: &Path, run_id: &str) -> PathBuf {
    dir.join(format!("{run_id}.jsonl"))
}

impl Journal {
    /// Create the journal of a new run; fails if it exists.
    pub fn create(dir: &Path, run_id: &str) -> io::Result<Journal> {
        std::fs::create_dir_all(dir)?;
        let path = path_for(dir, run_id);
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&path)?;
        File::open(dir)?.sync_all()?;
        Ok(Journal {
            file,
            path,
            run_id: run_id.to_string(),
            seq: 0,
        })
    }

    /// Reopen an existing journal to continue it.
    pub fn reopen(path: &Path) -> io::Result<(Journal, Vec<Entry>)> {
        let entries = read(path)?;
        let run_id = entries.first().map(|e| e.run_id.clone()).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: empty journal", path.display()),
            )
        })?;
        let seq = entries.last().map(|e| e.seq).unwrap_or(0);
        // Cut a torn last line off, so the next entry starts on a line of its own.
        let bytes = std::fs::read(path)?;
        let keep = bytes
            .iter()
            .rposition(|b| *b == b'\n')
            .map(|i| i + 1)
            .unwrap_or(0);
        let file = OpenOptions::new().append(true).open(path)?;
        if keep < bytes.len() {
            file.set_len(keep as u64)?;
            file.sync_data()?;
        }
        Ok((
            Journal {
                file,
                path: path.to_path_buf(),
                run_id,
                seq,
            },
            entries,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Append one event and fsync before returning.
    pub fn append(&mut self, event: Event) -> io::Result<Entry> {
        self.seq += 1;
        let entry = Entry {
            seq: self.seq,
            ts: now_rfc3339(),
            run_id: self.run_id.clone(),
            event,
        };
        let mut line = serde_json::to_string(&entry).map_err(io::Error::other)?;
        line.push('\n');
        self.file.write_all(line.as_bytes())?;
        self.file.sync_data()?;
        Ok(entry)
    }
}

/// Read a journal. A torn last line (the writer died mid-write) is ignored; a bad line
/// elsewhere is an error.
pub fn read(path: &Path) -> io::Result<Vec<Entry>> {
    let f = File::open(path)?;
    let lines: Vec<String> = io::BufReader::new(f).lines().collect::<Result<_, _>>()?;
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Entry>(line) {
            Ok(e) => out.push(e),
            Err(_) if i + 1 == lines.len() => break,
            Err(e) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}:{}: {e}", path.display(), i + 1),
                ))
            }
        }
    }
    Ok(out)
}

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
    use super::*;

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
