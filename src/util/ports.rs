//! Loopback ports for the processes a rehearsal (or a test) starts, which bind the port
//! they are given, and bind it again when restarted.
//!
//! Asking the kernel for a free port (bind to port 0, read it, close) and handing it to a
//! child process leaves a window, a process spawn long on a loaded machine, in which the
//! kernel hands the same port to someone else: port 0 binds and every outgoing connection
//! draw from the same ephemeral range, and a rehearsal's clients and gate open thousands
//! of those. A replica restarted on its port (its old process gone, the port free for a
//! moment) then fails with "address in use" and the recovery with it.
//!
//! So the ports handed out here come from below the kernel's ephemeral range, which the
//! kernel never gives out by itself, and each is held by an exclusive `flock` on a file
//! named after it in a directory every `recover` process on the host shares, kept until
//! this process exits: no other rehearsal (or test process) is handed it meanwhile, whether
//! or not its child has bound it yet. A port something else on the machine holds (a bind
//! to it fails) is skipped.

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Mutex;

/// How many ports below the ephemeral range to use.
const SPAN: u16 = 8000;

/// The lowest port used whatever the ephemeral range (below it: well-known and registered
/// services, and the demo's fixed `--base-port` ports).
const FLOOR: u16 = 20000;

/// The locks this process holds, one per port it was handed: released when it exits.
static HELD: Mutex<Vec<File>> = Mutex::new(Vec::new());

/// A loopback address with a port that no other `recover` process is handed, and that the
/// kernel does not give out to port-0 binds or outgoing connections, for as long as this
/// process lives.
pub fn reserved_loopback_addr() -> std::io::Result<SocketAddr> {
    let (lo, hi) = range();
    let dir = lock_dir()?;
    let span = u32::from(hi - lo);
    let start = start_offset() % span;
    for i in 0..span {
        let port = lo + ((start + i) % span) as u16;
        let Ok(file) = File::create(dir.join(port.to_string())) else {
            continue;
        };
        if file.try_lock().is_err() {
            continue;
        }
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        // Someone outside `recover` may hold it; the lock is then kept, so no one retries.
        let bindable = TcpListener::bind(addr).is_ok();
        HELD.lock().unwrap_or_else(|p| p.into_inner()).push(file);
        if bindable {
            return Ok(addr);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        format!(
            "no loopback port free in {lo}..{hi} (locks under {})",
            dir.display()
        ),
    ))
}

/// The lowest port of the kernel's ephemeral range (port-0 binds and outgoing
/// connections), 32768 (Linux's default) where it cannot be read.
pub fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768)
}

/// The ports [`reserved_loopback_addr`] hands out, `lo..hi`: the [`SPAN`] below the
/// ephemeral range, never below [`FLOOR`]. A caller needing a block of consecutive ports
/// (a demo's `--base-port`) picks it below `lo`, where neither these nor the kernel's
/// ephemeral ports fall.
pub fn reserved_range() -> (u16, u16) {
    range()
}

/// [`reserved_range`].
fn range() -> (u16, u16) {
    let hi = ephemeral_low().max(FLOOR + 1000);
    (hi.saturating_sub(SPAN).max(FLOOR), hi)
}

fn lock_dir() -> std::io::Result<PathBuf> {
    let dir = std::env::temp_dir().join("recover-ports");
    std::fs::create_dir_all(&dir)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    Ok(dir)
}

/// Where to start looking: a different place in each process, so that processes starting
/// together do not all queue on the same locks.
fn start_offset() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    std::process::id().wrapping_mul(2_654_435_761) ^ nanos
}
