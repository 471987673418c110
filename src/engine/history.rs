//! Past runs, summarised from their journals for `recover history` (and anything else that
//! wants to know whether a run is still going or was interrupted).

use super::journal::{read, Event};
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::Path;

#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub run_id: String,
    pub runbook: String,
    pub target: String,
    pub started_at: String,
    pub steps_started: usize,
    pub steps_done: usize,
    /// succeeded / failed / aborted, "running (pid N)", or "interrupted: recover resume ID".
    pub status: String,
    pub journal: String,
}

/// Every run in `dir`, newest first. Unreadable journals are listed with their error.
pub fn list(dir: &Path) -> std::io::Result<Vec<RunSummary>> {
    let mut out = Vec::new();
    if !dir.exists() {
        return Ok(out);
    }
    for e in std::fs::read_dir(dir)? {
        let path = e?.path();
        if path.extension().is_none_or(|x| x != "jsonl") {
            continue;
        }
        let id = path
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default();
        let mut s = RunSummary {
            run_id: id.clone(),
            runbook: "?".into(),
            target: "?".into(),
            started_at: String::new(),
            steps_started: 0,
            steps_done: 0,
            status: String::new(),
            journal: path.display().to_string(),
        };
        match read(&path) {
            Err(err) => s.status = format!("unreadable: {err}"),
            Ok(entries) => {
                let mut pid = None;
                // By step, not by event: a resumed run starts its interrupted step again.
                let mut started = BTreeSet::new();
                let mut done = BTreeSet::new();
                for en in &entries {
                    match &en.event {
                        Event::RunStarted {
                            runbook,
                            target,
                            pid: p,
                            ..
                        } => {
                            s.runbook = runbook.clone();
                            s.target = target.clone();
                            s.started_at = en.ts.clone();
                            pid = Some(*p);
                        }
                        Event::Resumed { pid: p } => pid = Some(*p),
                        Event::StepStarted { phase, step, .. } => {
                            started.insert((*phase, step.clone()));
                        }
                        Event::StepFinished {
                            phase,
                            step,
                            outcome: super::StepOutcome::Succeeded,
                            ..
                        } => {
                            done.insert((*phase, step.clone()));
                        }
                        Event::RunFinished { outcome, .. } => {
                            s.status = format!("{outcome:?}").to_lowercase()
                        }
                        _ => {}
                    }
                }
                s.steps_started = started.len();
                s.steps_done = done.len();
                if s.status.is_empty() {
                    s.status = match pid {
                        Some(p) if crate::platform::local::process::running(p) => {
                            format!("running (pid {p})")
                        }
                        _ => format!("interrupted: recover resume {id}"),
                    };
                }
            }
        }
        out.push(s);
    }
    out.sort_by(|a, b| b.run_id.cmp(&a.run_id));
    Ok(out)
}
