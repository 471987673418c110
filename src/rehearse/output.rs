//! Writes a rehearsal's files into the report directory: `report.json`, `timeline.svg`,
//! `series.csv`, `summary.txt` (what `recover rehearse` prints, also when it printed JSON)
//! and, when the engine ran, `engine-summary.txt`, each atomically.
//!
//! Why it exists: a half-written report.json read by CI would be worse than none.

use super::rehearsal::Rehearsed;
use super::timeline::render_svg;
use crate::util::atomic_file::write_atomic;
use std::path::Path;

/// The rehearsal's summary for people, beside the report.
pub const SUMMARY: &str = "summary.txt";

/// The engine's own summary table, beside the report.
pub const ENGINE_SUMMARY: &str = "engine-summary.txt";

/// Why the files could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("writing {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Timeline(#[from] super::timeline::TimelineError),
    #[error("encoding report.json: {0}")]
    Json(#[from] serde_json::Error),
}

/// Write every file of `outcome` into `dir` (created if missing).
pub fn write(dir: &Path, outcome: &Rehearsed) -> Result<(), OutputError> {
    let put = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        write_atomic(&path, bytes).map_err(|source| OutputError::Io {
            path: path.display().to_string(),
            source,
        })
    };
    std::fs::create_dir_all(dir).map_err(|source| OutputError::Io {
        path: dir.display().to_string(),
        source,
    })?;
    let files = &outcome.report.files;
    put(
        &files.report,
        serde_json::to_string_pretty(&outcome.report)?.as_bytes(),
    )?;
    put(
        &files.timeline,
        render_svg(&outcome.report, &outcome.samples)?.as_bytes(),
    )?;
    put(
        &files.series,
        super::assemble::series_csv(&outcome.samples).as_bytes(),
    )?;
    put(SUMMARY, super::summary::render(&outcome.report).as_bytes())?;
    if !outcome.engine_summary.is_empty() {
        put(ENGINE_SUMMARY, outcome.engine_summary.as_bytes())?;
    }
    Ok(())
}
