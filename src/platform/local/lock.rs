//! The per-target lock on a local host: a file holding the holder's pid and run id,
//! created atomically (written to a temp file, then hard-linked into place, which fails if
//! the lock exists). A lock whose pid is dead is stale: it is taken over, with a log line.

use crate::platform::{LockGuard, LockHolder, PlatformError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockFile {
    pub run_id: String,
    pub identity: String,
    pub pid: u32,
    pub since: String,
}

/// Take the lock at `path` for `holder`, or say who holds it.
pub fn acquire(path: &Path, target: &str, holder: &LockHolder) -> Result<FileLock, PlatformError> {
    let io = |e: std::io::Error| PlatformError::Other(format!("lock {}: {e}", path.display()));
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let content = LockFile {
        run_id: holder.run_id.clone(),
        identity: holder.identity.clone(),
        pid: std::process::id(),
        since: crate::util::time::now_rfc3339(),
    };
    let tmp = dir.join(format!(
        ".lock.{}.{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    for _attempt in 0..3 {
        crate::util::atomic_file::write_atomic(
            &tmp,
            serde_json::to_string(&content)
                .unwrap_or_default()
                .as_bytes(),
        )
        .map_err(io)?;
        let linked = std::fs::hard_link(&tmp, path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => {
                return Ok(FileLock {
                    path: path.to_path_buf(),
                    run_id: holder.run_id.clone(),
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
        let held: Option<LockFile> = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        match held {
            Some(h)
                if super::process::running(h.pid)
                    && !(h.pid == std::process::id() && h.run_id == holder.run_id) =>
            {
                return Err(PlatformError::LockHeld {
                    target: target.to_string(),
                    holder: format!("{} (pid {}, since {})", h.identity, h.pid, h.since),
                    run_id: h.run_id,
                })
            }
            Some(h) => tracing::warn!(
                "taking over a stale lock on {target}: run {} (pid {} on {}) is gone",
                h.run_id,
                h.pid,
                h.identity
            ),
            None => tracing::warn!("taking over an unreadable lock file {}", path.display()),
        }
        let _ = std::fs::remove_file(path);
    }
    Err(PlatformError::Other(format!(
        "could not take the lock {} after 3 attempts",
        path.display()
    )))
}

/// A held lock file; released by removing it (only if it is still ours).
pub struct FileLock {
    path: PathBuf,
    run_id: String,
}

#[async_trait::async_trait]
impl LockGuard for FileLock {
    async fn release(self: Box<Self>) -> Result<(), PlatformError> {
        let ours = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|t| serde_json::from_str::<LockFile>(&t).ok())
            .is_some_and(|l| l.run_id == self.run_id);
        if ours {
            std::fs::remove_file(&self.path)
                .map_err(|e| PlatformError::Other(format!("lock {}: {e}", self.path.display())))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(run: &str) -> LockHolder {
        LockHolder {
            run_id: run.into(),
            identity: "test".into(),
        }
    }

    #[tokio::test]
    async fn second_holder_is_refused_and_stale_locks_are_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("lock");
        // A lock held by a live process other than us (our parent, pid 1's child chain).
        let other = LockFile {
            run_id: "run-a".into(),
            identity: "h:1".into(),
            pid: std::os::unix::process::parent_id(),
            since: "t".into(),
        };
        std::fs::write(&p, serde_json::to_string(&other).unwrap()).unwrap();
        match acquire(&p, "local:x", &holder("run-b")) {
            Err(PlatformError::LockHeld { run_id, holder, .. }) => {
                assert_eq!(run_id, "run-a");
                assert!(holder.contains("h:1"));
            }
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("lock taken while held"),
        }
        // Held by a dead pid: taken over.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = LockFile { pid: dead, ..other };
        std::fs::write(&p, serde_json::to_string(&stale).unwrap()).unwrap();
        let g = acquire(&p, "local:x", &holder("run-b")).unwrap();
        let now: LockFile = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert_eq!(now.run_id, "run-b");
        Box::new(g).release().await.unwrap();
        assert!(!p.exists());
    }
}
