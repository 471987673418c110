//! `recover report RUN_ID`: the postmortem draft of a real run, from what the controller
//! recorded of it (its journal and the series it observed, [`crate::engine::observed`]),
//! in the rehearsal's shapes: `report.json` in the rehearsal's schema, the rehearsal's
//! `timeline.svg`, the series as `series.csv`, and `postmortem.md`, a Markdown draft in the
//! usual shape for a person to finish.
//!
//! [`load`] reads a run's directory; [`convert`] turns the run into the rehearsal's report
//! and samples (the one place a run becomes a report); [`onset`] adds the series from
//! before the run out of Prometheus; [`markdown`] writes the draft; [`write`] the files.

pub mod convert;
pub mod markdown;
pub mod onset;

use crate::engine::journal::{self, Entry};
use crate::engine::observed::{self, Observed};
use crate::engine::RunReport;
use crate::rehearse::report::Report;
use crate::rehearse::series::Sample;
use std::path::{Path, PathBuf};

/// Everything recorded of one run.
#[derive(Debug, Clone)]
pub struct Evidence {
    pub entries: Vec<Entry>,
    /// The run's report, rebuilt from its journal.
    pub report: RunReport,
    /// The series it observed, or why there is none.
    pub observed: Result<Observed, String>,
}

/// Why there is no postmortem.
#[derive(Debug, thiserror::Error)]
pub enum PostmortemError {
    #[error("no run {run_id:?} in {dir} (looked for {dir}/{run_id}.jsonl; `recover history --journal-dir DIR` lists the runs there)")]
    NotFound { run_id: String, dir: String },
    #[error("{path}: {message}")]
    Unreadable { path: String, message: String },
    #[error("writing {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Timeline(#[from] crate::rehearse::timeline::TimelineError),
    #[error("prometheus: {0}")]
    Prometheus(String),
}

/// Read run `run_id` (a unique prefix is enough) from the run directory `dir`.
pub fn load(dir: &Path, run_id: &str) -> Result<Evidence, PostmortemError> {
    let path = find(dir, run_id)?;
    let unreadable = |message: String| PostmortemError::Unreadable {
        path: path.display().to_string(),
        message,
    };
    let entries = journal::read(&path).map_err(|e| unreadable(e.to_string()))?;
    if entries.is_empty() {
        return Err(unreadable("an empty journal".into()));
    }
    let report = crate::engine::recorded::from_journal(&entries, Some(path.display().to_string()));
    let series = observed::path_for(dir, &report.run_id);
    let observed = if series.is_file() {
        Observed::read(&series)
    } else {
        Err(format!(
            "no observed series beside the journal ({} is absent: the run was recorded before runs kept one, or never got to act)",
            series.display()
        ))
    };
    let mut report = report;
    report.observed = observed.as_ref().ok().map(|_| series.display().to_string());
    Ok(Evidence {
        entries,
        report,
        observed,
    })
}

/// The journal of a run id or unique prefix in `dir`.
fn find(dir: &Path, run_id: &str) -> Result<PathBuf, PostmortemError> {
    let not_found = || PostmortemError::NotFound {
        run_id: run_id.to_string(),
        dir: dir.display().to_string(),
    };
    let exact = journal::path_for(dir, run_id);
    if exact.is_file() {
        return Ok(exact);
    }
    let Ok(listing) = std::fs::read_dir(dir) else {
        return Err(not_found());
    };
    let matches: Vec<PathBuf> = listing
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "jsonl")
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(run_id))
        })
        .collect();
    match matches.as_slice() {
        [one] if !run_id.is_empty() => Ok(one.clone()),
        _ => Err(not_found()),
    }
}

/// What to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Formats {
    pub md: bool,
    pub json: bool,
    pub svg: bool,
}

/// Write the chosen files into `out`; the paths written.
pub fn write(
    out: &Path,
    ev: &Evidence,
    report: &Report,
    samples: &[Sample],
    formats: Formats,
) -> Result<Vec<PathBuf>, PostmortemError> {
    std::fs::create_dir_all(out).map_err(|source| PostmortemError::Write {
        path: out.display().to_string(),
        source,
    })?;
    let mut files = Vec::new();
    let mut put = |name: &str, text: String| -> Result<(), PostmortemError> {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(|source| PostmortemError::Write {
            path: path.display().to_string(),
            source,
        })?;
        files.push(path);
        Ok(())
    };
    if formats.json {
        let json = serde_json::to_string_pretty(report).unwrap_or_default();
        put(&report.files.report, json + "\n")?;
        put(
            &report.files.series,
            crate::rehearse::assemble::series_csv(samples),
        )?;
    }
    if formats.svg {
        put(
            &report.files.timeline,
            crate::rehearse::timeline::render_svg(report, samples)?,
        )?;
    }
    if formats.md {
        put("postmortem.md", markdown::render(ev, report, samples))?;
    }
    Ok(files)
}

/// Samples of snapshots read elsewhere (Prometheus, before the run), on the clock whose
/// zero is `zero`, bounded as a run's own series is.
pub fn samples_of(snaps: &[crate::metrics::signal::Snapshot], zero: f64) -> Vec<Sample> {
    let mut o = Observed::new("");
    for s in snaps {
        o.push(s);
    }
    convert::samples(&o, zero)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A journal with no observed series beside it and a run cut off mid-step: every
    /// figure that rests on them is unknown with the reason, never a zero.
    #[test]
    fn missing_evidence_is_unknown_with_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        let id = "20260101T000000Z-abcd";
        let lines = [
            r#"{"seq":1,"ts":"2026-01-01T00:00:00Z","run_id":"ID","event":"run_started","format":2,"runbook":"rb","runbook_source":"","origin":"x","target":"local:demo","pid":1}"#,
            r#"{"seq":2,"ts":"2026-01-01T00:00:01Z","run_id":"ID","event":"step_started","phase":"main","index":0,"step":"drain","action":"backlog.drain"}"#,
        ];
        let text = lines.join("\n").replace("ID", id) + "\n";
        std::fs::write(journal::path_for(dir.path(), id), text).unwrap();
        let ev = load(dir.path(), "20260101").unwrap();
        assert!(ev.observed.is_err());
        let (report, samples) = convert::convert(&ev, None);
        assert!(samples.is_empty());
        let run = report.run.as_ref().unwrap();
        for field in ["series", "time_to_recover_s", "dropped.rejected_at_gate"] {
            assert!(
                run.unknown.contains_key(field),
                "{field}: {:?}",
                run.unknown
            );
        }
        assert!(!report.recovered);
        assert_eq!(
            report.steps[0].outcome,
            "aborted: the journal ends before this step finished"
        );
        let md = markdown::render(&ev, &report, &samples);
        assert!(
            md.contains("| time to recover | unknown (the run did not finish its main steps)"),
            "{md}"
        );
        assert!(
            md.contains(
                "| requests refused at the gate during the run (shed on purpose) | unknown ("
            ),
            "{md}"
        );
        assert!(
            md.contains("| requests shed on purpose in all | unknown"),
            "{md}"
        );
        assert!(md.contains("recover resume 20260101T000000Z-abcd"), "{md}");
        // A run that is not there names the directory looked in.
        let e = load(dir.path(), "nope").unwrap_err().to_string();
        assert!(e.contains(&dir.path().display().to_string()), "{e}");
    }
}
