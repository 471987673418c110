//! The per-target lock on a local host: a file holding the holder's host, pid and run id,
//! created atomically (written to a temp file, then hard-linked into place, which fails if
//! the lock exists).
//!
//! A lock whose pid is dead **on this host** is stale and is taken over, with a log line.
//! The takeover is atomic: under an exclusive `flock` on `<lock>.takeover` (released by
//! the kernel if the taker dies), the lock is read again and, only if it is still the
//! stale one, replaced by ours with one `rename`. Two runs finding the same stale lock
//! cannot both take it: the second finds the first's lock, alive. A lock written on
//! another host (a shared state directory) is never stale by a pid check here: its pid
//! means nothing on this host. Nor is a lock without a host (written by an older
//! version): a person who knows the run is gone removes the file.

use crate::platform::{LockGuard, LockHolder, PlatformError};
use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockFile {
    pub run_id: String,
    pub identity: String,
    pub pid: u32,
    /// The host the pid lives on; absent in locks written by older versions.
    #[serde(default)]
    pub host: Option<String>,
    pub since: String,
}

/// This host's name, as the kernel has it.
pub fn local_host() -> String {
    crate::util::procfs::hostname()
}

/// What a lock found in place means for us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// Ours already (the same process and run asking again).
    Ours,
    /// Held by a live process on this host.
    Live,
    /// Held by a process on another host, or a host not recorded: not ours to judge.
    Elsewhere,
    /// Held by a pid that is dead on this host: may be taken over.
    Stale,
}

/// Pure: judge a lock found in place. `running` says whether a pid is alive here.
pub fn judge(
    held: &LockFile,
    host: &str,
    pid: u32,
    run_id: &str,
    running: impl Fn(u32) -> bool,
) -> Found {
    if held.host.as_deref() != Some(host) {
        return Found::Elsewhere;
    }
    if held.pid == pid && held.run_id == run_id {
        Found::Ours
    } else if running(held.pid) {
        Found::Live
    } else {
        Found::Stale
    }
}

/// Take the lock at `path` for `holder`, or say who holds it.
pub fn acquire(path: &Path, target: &str, holder: &LockHolder) -> Result<FileLock, PlatformError> {
    let io = |e: io::Error| PlatformError::Other(format!("lock {}: {e}", path.display()));
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let host = local_host();
    let content = LockFile {
        run_id: holder.run_id.clone(),
        identity: holder.identity.clone(),
        pid: std::process::id(),
        host: Some(host.clone()),
        since: crate::util::time::now_rfc3339(),
    };
    let tmp = dir.join(format!(
        ".lock.{}.{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let json = serde_json::to_string(&content).unwrap_or_default();
    crate::util::atomic_file::write_atomic(&tmp, json.as_bytes()).map_err(io)?;
    let taken = attempt(path, &tmp, target, holder, &host);
    let _ = std::fs::remove_file(&tmp);
    taken?;
    Ok(FileLock {
        path: path.to_path_buf(),
        run_id: holder.run_id.clone(),
    })
}

/// Put our lock (already written to `tmp`) in place: link it where none is, or take over
/// a stale one. Retries when the lock changed while we looked.
fn attempt(
    path: &Path,
    tmp: &Path,
    target: &str,
    holder: &LockHolder,
    host: &str,
) -> Result<(), PlatformError> {
    let io = |e: io::Error| PlatformError::Other(format!("lock {}: {e}", path.display()));
    for _attempt in 0..3 {
        match std::fs::hard_link(tmp, path) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
        let Some(raw) = read_raw(path).map_err(io)? else {
            continue; // released while we looked: try again
        };
        let held: Option<LockFile> = serde_json::from_slice(&raw).ok();
        if let Some(h) = &held {
            match judge(
                h,
                host,
                std::process::id(),
                &holder.run_id,
                super::process::running,
            ) {
                Found::Ours => return Ok(()),
                Found::Live => return Err(held_by(target, h, "")),
                Found::Elsewhere => {
                    let hint = format!(
                        "; not taken over from here: a lock from another host (or none recorded) is never stale by a pid check. Remove {} if that run is gone",
                        path.display()
                    );
                    return Err(held_by(target, h, &hint));
                }
                Found::Stale => {}
            }
        }
        if take_over(path, tmp, &raw).map_err(io)? {
            match &held {
                Some(h) => tracing::warn!(
                    "took over a stale lock on {target}: run {} (pid {} on {}) is gone",
                    h.run_id,
                    h.pid,
                    h.host.as_deref().unwrap_or("?")
                ),
                None => tracing::warn!("took over an unreadable lock file {}", path.display()),
            }
            return Ok(());
        }
    }
    Err(PlatformError::Other(format!(
        "could not take the lock {} after 3 attempts",
        path.display()
    )))
}

fn held_by(target: &str, h: &LockFile, hint: &str) -> PlatformError {
    PlatformError::LockHeld {
        target: target.to_string(),
        holder: format!(
            "{} (pid {} on {}, since {}){hint}",
            h.identity,
            h.pid,
            h.host.as_deref().unwrap_or("an unrecorded host"),
            h.since
        ),
        run_id: h.run_id.clone(),
    }
}

/// The lock file's bytes; `None` when there is none.
fn read_raw(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Replace the stale lock whose bytes were `seen` with ours (`tmp`), if it is still that
/// lock, under an exclusive flock on `<lock>.takeover`. False when it changed meanwhile
/// (another run took it over first, or it was released).
fn take_over(path: &Path, tmp: &Path, seen: &[u8]) -> io::Result<bool> {
    let mut name = path.as_os_str().to_owned();
    name.push(".takeover");
    let guard = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(PathBuf::from(name))?;
    // SAFETY: flock on a descriptor we own; the kernel drops it when `guard` closes.
    if unsafe { libc::flock(guard.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if read_raw(path)?.as_deref() != Some(seen) {
        return Ok(false);
    }
    std::fs::rename(tmp, path)?;
    Ok(true)
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
    use std::sync::{Arc, Barrier};

    fn holder(run: &str) -> LockHolder {
        LockHolder {
            run_id: run.into(),
            identity: "test".into(),
        }
    }

    /// A pid that is certainly dead: a child that has been waited for.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    /// A lock file as a run on `host` (None: an older version) would have written it.
    fn write_lock(p: &Path, run: &str, pid: u32, host: Option<&str>) {
        let mut v = serde_json::json!({"run_id": run, "identity": "h:1", "pid": pid, "since": "t"});
        if let Some(h) = host {
            v["host"] = serde_json::json!(h);
        }
        std::fs::write(p, v.to_string()).unwrap();
    }

    fn held_run(p: &Path) -> String {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        v["run_id"].as_str().unwrap().to_string()
    }

    #[test]
    fn judging_a_lock_in_place() {
        let lock = |pid, host: Option<&str>| LockFile {
            run_id: "r".into(),
            identity: "i".into(),
            pid,
            host: host.map(String::from),
            since: "t".into(),
        };
        let alive = |pid| pid == 7;
        assert_eq!(judge(&lock(7, Some("h")), "h", 1, "x", alive), Found::Live);
        assert_eq!(judge(&lock(8, Some("h")), "h", 1, "x", alive), Found::Stale);
        assert_eq!(judge(&lock(1, Some("h")), "h", 1, "r", alive), Found::Ours);
        assert_eq!(
            judge(&lock(8, Some("other")), "h", 1, "x", alive),
            Found::Elsewhere
        );
        assert_eq!(judge(&lock(8, None), "h", 1, "x", alive), Found::Elsewhere);
    }

    #[tokio::test]
    async fn second_holder_is_refused_and_stale_locks_are_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("lock");
        let here = local_host();
        // A lock held by a live process other than us.
        write_lock(
            &p,
            "run-a",
            std::os::unix::process::parent_id(),
            Some(&here),
        );
        match acquire(&p, "local:x", &holder("run-b")) {
            Err(PlatformError::LockHeld { run_id, holder, .. }) => {
                assert_eq!(run_id, "run-a");
                assert!(holder.contains("h:1"));
            }
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("lock taken while held"),
        }
        // Held by a dead pid on this host: taken over.
        write_lock(&p, "run-a", dead_pid(), Some(&here));
        let g = acquire(&p, "local:x", &holder("run-b")).unwrap();
        assert_eq!(held_run(&p), "run-b");
        Box::new(g).release().await.unwrap();
        assert!(!p.exists());
    }

    #[test]
    fn a_lock_from_another_host_is_never_stale_by_a_local_pid_check() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("lock");
        for host in [Some("another-host.example"), None] {
            write_lock(&p, "run-far", dead_pid(), host);
            match acquire(&p, "local:x", &holder("run-near")) {
                Err(PlatformError::LockHeld { run_id, holder, .. }) => {
                    assert_eq!(run_id, "run-far");
                    assert!(holder.contains("never stale"), "{holder}");
                }
                Err(e) => panic!("unexpected error {e}"),
                Ok(_) => panic!("took over a lock from {host:?} by a local pid check"),
            }
            assert_eq!(held_run(&p), "run-far");
        }
    }

    #[test]
    fn only_one_of_many_runs_takes_over_the_same_stale_lock() {
        let here = local_host();
        for round in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("lock");
            write_lock(&p, "run-dead", dead_pid(), Some(&here));
            let n = 8;
            let start = Arc::new(Barrier::new(n));
            let takers: Vec<_> = (0..n)
                .map(|i| {
                    let (p, start) = (p.clone(), start.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        acquire(&p, "local:x", &holder(&format!("run-{i}"))).is_ok()
                    })
                })
                .collect();
            let won: usize = takers
                .into_iter()
                .map(|t| usize::from(t.join().unwrap()))
                .sum();
            assert_eq!(won, 1, "round {round}: {won} runs hold the same lock");
        }
    }
}
