//! The run journal: one append-only JSONL file per run, fsync'd before and after every
//! action, so that after a crash (or SIGKILL) the file says exactly what was done and what
//! was in progress. `recover resume` and `recover history` read it back; [`resume_point`]
//! turns the entries into where to carry on, as a pure function (`resume`). The format is
//! documented in docs/reference/journal.md; its version is [`FORMAT`].

mod action;
mod resume;

pub use action::{unknown, ActionRecord};
pub use resume::{resume_point, JournalError, ResumePoint};

pub use super::planning::Decided;
use super::ramp::RampDecision;
use super::status::{Figures, Outcome, Phase, StepOutcome};
use crate::platform::Target;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

/// The journal format this version writes and reads, recorded in `run_started`. Journals
/// of another format (format 1 had no such field) are refused with that number, not read
/// half-way.
pub const FORMAT: u32 = 2;

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
        /// [`FORMAT`].
        format: u32,
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
        pid: u32,
    },
    Resumed {
        pid: u32,
    },
    Decided(Decided),
    StepStarted {
        phase: Phase,
        index: usize,
        step: String,
        action: String,
    },
    /// Written before the action runs: an action whose record cannot be written does not
    /// run.
    ActionStarted {
        step: String,
        #[serde(flatten)]
        action: ActionRecord,
    },
    /// Written once it has run, with what it observed.
    ActionFinished {
        step: String,
        #[serde(flatten)]
        action: ActionRecord,
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
    /// A readmission move and what it was decided from.
    RampDecided(RampDecision),
    FailurePhase {
        reason: String,
    },
    RunFinished {
        outcome: Outcome,
        #[serde(default)]
        message: Option<String>,
        /// What the run left on the gate and the commands that change it, as the run's
        /// summary said them (absent from journals written before it was recorded).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        gate: Option<super::report::GateLeft>,
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

    /// A journal appending to an open file (a test's full disk).
    #[cfg(test)]
    pub(crate) fn on_file(file: File, path: &Path, run_id: &str) -> Journal {
        Journal {
            file,
            path: path.to_path_buf(),
            run_id: run_id.to_string(),
            seq: 0,
        }
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
            ts: crate::util::time::now_rfc3339(),
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
/// elsewhere is an error, and so is a journal of another [`FORMAT`].
pub fn read(path: &Path) -> io::Result<Vec<Entry>> {
    let f = File::open(path)?;
    let lines: Vec<String> = io::BufReader::new(f).lines().collect::<Result<_, _>>()?;
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        if out.is_empty() {
            check_format(path, line)?;
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

/// The first line of a journal names its format; one this version does not write is
/// refused with both numbers (format 1 had no `format` field).
fn check_format(path: &Path, first: &str) -> io::Result<()> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(first) else {
        return Ok(()); // a torn only line: nothing to read
    };
    if v.get("event").and_then(|e| e.as_str()) != Some("run_started") {
        return Ok(()); // resume_point says the journal does not start with run_started
    }
    let found = v.get("format").and_then(|f| f.as_u64()).unwrap_or(1);
    if found == u64::from(FORMAT) {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{}: journal format {found}, but this recover reads format {FORMAT} only: it was written by another version of recover; read it as text, or resume it with the version that wrote it",
            path.display()
        ),
    ))
}
