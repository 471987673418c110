//! Child processes that cannot outlive their owner: each runs in its own process group,
//! gets SIGKILL if the parent dies (Linux PDEATHSIG), and the whole group is stopped when
//! the guard drops. The rehearsal and the end-to-end tests rely on this to leave no
//! orphans behind, also after a panic or Ctrl-C.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Options for [`spawn_guarded`].
#[derive(Debug, Clone, Copy)]
pub struct GuardOptions {
    /// Kill the child when this process dies (set for processes owned by a run; unset for
    /// replicas the local platform must keep alive across an engine crash).
    pub die_with_parent: bool,
}

impl Default for GuardOptions {
    fn default() -> Self {
        GuardOptions {
            die_with_parent: true,
        }
    }
}

/// A running child process group; stopped (SIGTERM, then SIGKILL) on drop.
#[derive(Debug)]
pub struct ChildGuard {
    child: Option<Child>,
    name: String,
}

/// Spawn `cmd` in a new process group.
pub fn spawn_guarded(name: &str, mut cmd: Command, opts: GuardOptions) -> io::Result<ChildGuard> {
    let die_with_parent = opts.die_with_parent;
    // SAFETY: only async-signal-safe calls (setpgid, prctl) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if die_with_parent && libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    Ok(ChildGuard {
        child: Some(child),
        name: name.to_string(),
    })
}

impl ChildGuard {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Has the process exited? (Non-blocking.)
    pub fn has_exited(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => !matches!(c.try_wait(), Ok(None)),
            None => true,
        }
    }

    /// Stop the process group: SIGTERM, wait up to `grace`, then SIGKILL. Idempotent.
    pub fn stop(&mut self, grace: Duration) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pgid = child.id() as libc::pid_t;
        // SAFETY: signalling a process group we created.
        unsafe { libc::kill(-pgid, libc::SIGTERM) };
        let start = Instant::now();
        while start.elapsed() < grace {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Kill the group even if the leader exited: its children must not linger.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Hand the process over without stopping it (it keeps running after the guard drops).
    pub fn detach(mut self) -> Option<u32> {
        self.child.take().map(|c| c.id())
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.stop(Duration::from_millis(500));
    }
}

/// True if a process with this pid exists (it may be a zombie).
pub fn pid_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}
