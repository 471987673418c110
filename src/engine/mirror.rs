//! The run's journal copied to where another machine can read it
//! ([`Platform::mirror_journal`]: a ConfigMap on Kubernetes), so a run whose controller is
//! killed (a Job's pod evicted, a laptop closed) can be resumed from anywhere.
//!
//! A background task uploads the journal at every step boundary ([`JournalMirror::mark`])
//! and, during a long step, whenever the file has grown (checked every second): the
//! run never waits for it, and a failed upload is logged and retried with the next one.
//! [`JournalMirror::finish`] uploads the final journal when the run ends. The series the
//! run observed ([`super::observed`]) goes the same way, just before the journal, so the
//! journal's upload carries it too.
//!
//! [`fetch_to`] is the other end: a resume with no local journal takes the mirrored one.

use crate::platform::{Platform, PlatformError};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How often a step in progress is checked for journal growth.
const CATCH_UP: Duration = Duration::from_secs(1);

pub struct JournalMirror {
    marks: watch::Sender<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl JournalMirror {
    pub fn start(
        platform: Arc<dyn Platform>,
        run_id: String,
        path: PathBuf,
        observed: Option<PathBuf>,
    ) -> JournalMirror {
        let (marks, mut rx) = watch::channel(0u64);
        let task = tokio::spawn(async move {
            let mut uploaded_len = None;
            let mut observed_seen = None;
            loop {
                let closed = tokio::select! {
                    r = rx.changed() => r.is_err(),
                    _ = tokio::time::sleep(CATCH_UP) => false,
                };
                if let Some(o) = &observed {
                    let changed = std::fs::metadata(o).and_then(|m| m.modified()).ok();
                    if changed.is_some() && changed != observed_seen {
                        match upload_observed(platform.as_ref(), &run_id, o).await {
                            Ok(()) => observed_seen = changed,
                            Err(e) => {
                                tracing::warn!(run_id = %run_id, error = %e, "could not mirror the observed series; will retry")
                            }
                        }
                    }
                }
                let len = std::fs::metadata(&path).map(|m| m.len()).ok();
                if len.is_some() && len != uploaded_len {
                    match upload(platform.as_ref(), &run_id, &path).await {
                        Ok(()) => uploaded_len = len,
                        Err(e) => {
                            tracing::warn!(run_id = %run_id, error = %e, "could not mirror the journal; will retry")
                        }
                    }
                }
                if closed {
                    return;
                }
            }
        });
        JournalMirror { marks, task }
    }

    /// A step boundary: upload now.
    pub fn mark(&self) {
        self.marks.send_modify(|m| *m += 1);
    }

    /// Upload the final journal, waiting at most `timeout`.
    pub async fn finish(self, timeout: Duration) {
        let JournalMirror { marks, task } = self;
        drop(marks);
        if tokio::time::timeout(timeout, task).await.is_err() {
            tracing::warn!(
                "the journal mirror did not finish in time; the local journal is complete"
            );
        }
    }
}

async fn upload(platform: &dyn Platform, run_id: &str, path: &Path) -> Result<(), PlatformError> {
    let text = tokio::fs::read_to_string(path)
        .await
        .map_err(|e| PlatformError::Other(format!("reading {}: {e}", path.display())))?;
    platform.mirror_journal(run_id, &text).await
}

async fn upload_observed(
    platform: &dyn Platform,
    run_id: &str,
    path: &Path,
) -> Result<(), PlatformError> {
    let text = tokio::fs::read_to_string(path)
        .await
        .map_err(|e| PlatformError::Other(format!("reading {}: {e}", path.display())))?;
    platform.mirror_observed(run_id, &text).await
}

/// Write the journal mirrored for `run_id` into `dir` (as `run_id.jsonl`), if the platform
/// has one; the path written, or `None`.
pub async fn fetch_to(
    platform: &dyn Platform,
    run_id: &str,
    dir: &Path,
) -> Result<Option<PathBuf>, PlatformError> {
    let Some(text) = platform.fetch_journal(run_id).await? else {
        return Ok(None);
    };
    let path = super::journal::path_for(dir, run_id);
    std::fs::create_dir_all(dir)
        .and_then(|()| crate::util::atomic_file::write_atomic(&path, text.as_bytes()))
        .map_err(|e| PlatformError::Other(format!("writing {}: {e}", path.display())))?;
    if let Some(series) = platform.fetch_observed(run_id).await? {
        let o = super::observed::path_for(dir, run_id);
        crate::util::atomic_file::write_atomic(&o, series.as_bytes())
            .map_err(|e| PlatformError::Other(format!("writing {}: {e}", o.display())))?;
    }
    Ok(Some(path))
}
