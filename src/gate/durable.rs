//! Making the state file survive a power cut without a limit change waiting for the disk.
//!
//! A change is written to the state file (a temp file renamed over it) before it is put in
//! force, so a restarted gate comes back with it: the rename is seen by every process at
//! once, and a process restart (a crash, a deploy, a container restart) keeps the page
//! cache. Only a power cut or a kernel crash needs the data on disk, and the two fsyncs
//! that take it there wait for whatever else the machine is writing: on a machine busy
//! with builds they took 0.25-1 s, and the admin API, holding the limit's lock, answered
//! nothing meanwhile (a recovery's first `gate.set_limit` took 0.4-1.2 s). So the fsyncs
//! run here, on a thread of their own, after the change is in force and answered; changes
//! that come while one is being synced are synced together, the latest content being all
//! that matters. A power cut before that leaves the file as the filesystem kept it; one
//! that cannot be read at start is set aside and the gate starts at its flags
//! ([`super::state`]).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

/// What makes the file at a path survive a power cut.
pub type SyncFn = Box<dyn Fn(&Path) -> io::Result<()> + Send>;

#[derive(Default)]
struct Pending {
    due: bool,
    stopped: bool,
}

type Shared = Arc<(Mutex<Pending>, Condvar)>;

/// The background syncing of one state file; the thread ends when this is dropped, after
/// syncing what is due.
pub struct Flusher {
    shared: Shared,
}

impl Flusher {
    /// Sync `path` with fsync (the file, then its directory).
    pub fn start(path: PathBuf) -> Self {
        Self::with_sync(path, Box::new(crate::util::atomic_file::sync_replaced))
    }

    /// Sync `path` with `sync`.
    pub fn with_sync(path: PathBuf, sync: SyncFn) -> Self {
        let shared: Shared = Arc::default();
        let theirs = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("gate-state-sync".into())
            .spawn(move || run(&path, &sync, &theirs));
        if let Err(e) = spawned {
            tracing::error!("cannot start the state file's sync thread ({e}): the state file is written but not synced to disk");
        }
        Flusher { shared }
    }

    /// The file was replaced: sync it soon. Never waits for the disk.
    pub fn request(&self) {
        let (lock, wake) = &*self.shared;
        lock.lock().unwrap_or_else(|p| p.into_inner()).due = true;
        wake.notify_one();
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        let (lock, wake) = &*self.shared;
        lock.lock().unwrap_or_else(|p| p.into_inner()).stopped = true;
        wake.notify_one();
    }
}

fn run(path: &Path, sync: &SyncFn, shared: &Shared) {
    let (lock, wake) = &**shared;
    loop {
        {
            let mut p = lock.lock().unwrap_or_else(|p| p.into_inner());
            while !p.due && !p.stopped {
                p = wake.wait(p).unwrap_or_else(|p| p.into_inner());
            }
            if !p.due {
                return;
            }
            p.due = false;
        }
        if let Err(e) = sync(path) {
            tracing::error!(
                state_file = %path.display(),
                "could not sync the state file to disk ({e}): the limit is in force and written, but may not survive a power cut"
            );
        }
    }
}
