//! Replica processes on this host: started detached (their own process group, no
//! parent-death signal) so they survive an engine crash, with the pid in a pid file so a
//! later run (or `recover resume`) can stop them. Stopping is SIGTERM to the group, then
//! SIGKILL after a grace period.

use super::inventory::ReplicaSpec;
use crate::util::child::{spawn_guarded, GuardOptions};
use crate::util::procfs;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn pid_file(state_dir: &Path, replica: &str) -> PathBuf {
    state_dir.join(format!("{replica}.pid"))
}

pub fn log_file(state_dir: &Path, replica: &str) -> PathBuf {
    state_dir.join(format!("{replica}.log"))
}

/// The pid recorded for a replica, if any.
pub fn read_pid(state_dir: &Path, replica: &str) -> Option<u32> {
    std::fs::read_to_string(pid_file(state_dir, replica))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// True if `pid` is a live process (not a zombie). Reaps it first if it is our child.
pub fn running(pid: u32) -> bool {
    // SAFETY: waitpid with WNOHANG on a specific pid; ECHILD (not our child) is fine.
    unsafe {
        let mut status = 0;
        libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG);
    }
    // A zombie still answers kill(pid, 0); its state in /proc says it is gone.
    crate::util::child::pid_alive(pid) && matches!(procfs::state(pid), Some(s) if s != 'Z')
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: signalling the replica's process group (spawn_guarded makes pgid = pid), or
    // the process alone if it leads no group of its own.
    unsafe {
        if libc::kill(-(pid as libc::pid_t), sig) != 0 {
            libc::kill(pid as libc::pid_t, sig);
        }
    }
}

/// Stop a replica's process: SIGTERM, wait `grace`, SIGKILL. Returns whether one was running.
pub fn stop(state_dir: &Path, replica: &str, grace: Duration) -> bool {
    let Some(pid) = read_pid(state_dir, replica) else {
        return false;
    };
    if !running(pid) {
        return false;
    }
    signal(pid, libc::SIGTERM);
    let t0 = Instant::now();
    while t0.elapsed() < grace {
        if !running(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(pid, libc::SIGKILL);
    let t0 = Instant::now();
    while running(pid) && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Start a replica detached; its output goes to `<state_dir>/<name>.log` and its pid to
/// the pid file (written atomically).
pub fn start(state_dir: &Path, spec: &ReplicaSpec) -> std::io::Result<u32> {
    spawn_detached(state_dir, &spec.name, &spec.command, &spec.env)
}

/// Start `argv` detached (its own process group, no parent-death signal) under `name`:
/// output to `<state_dir>/<name>.log`, pid to `<state_dir>/<name>.pid`.
pub fn spawn_detached(
    state_dir: &Path,
    name: &str,
    argv: &[String],
    env: &std::collections::BTreeMap<String, String>,
) -> std::io::Result<u32> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| std::io::Error::other(format!("{name}: empty command")))?;
    std::fs::create_dir_all(state_dir)?;
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_file(state_dir, name))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(env)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    let guard = spawn_guarded(
        name,
        cmd,
        GuardOptions {
            die_with_parent: false,
        },
    )?;
    let pid = guard
        .detach()
        .ok_or_else(|| std::io::Error::other("spawned process has no pid"))?;
    crate::util::atomic_file::write_atomic(
        &pid_file(state_dir, name),
        format!("{pid}\n").as_bytes(),
    )?;
    Ok(pid)
}
