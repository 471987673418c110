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
    reserved_block(&[0]).map(|port| SocketAddr::from(([127, 0, 0, 1], port)))
}

/// A first loopback port `p` such that every `p + offset` is reserved as
/// [`reserved_loopback_addr`] reserves one, for a process that binds a block of ports from
/// a base (a demo's `--base-port`): no other `recover` process is handed any of them while
/// this one lives.
pub fn reserved_block(offsets: &[u16]) -> std::io::Result<u16> {
    let (lo, hi) = range();
    let dir = lock_dir()?;
    let top = offsets.iter().copied().max().unwrap_or(0);
    let span = u32::from(hi.saturating_sub(lo).saturating_sub(top).max(1));
    let start = start_offset() % span;
    for i in 0..span {
        let base = lo + ((start + i) % span) as u16;
        let mut locks = Vec::new();
        let mut bindable = true;
        for &offset in offsets {
            let port = base + offset;
            let Some(file) = File::create(dir.join(port.to_string()))
                .ok()
                .filter(|f| f.try_lock().is_ok())
            else {
                break;
            };
            locks.push(file);
            bindable &= TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).is_ok();
        }
        if locks.len() < offsets.len() {
            // Another process holds one of the block: release the rest for it.
            continue;
        }
        // Someone outside `recover` may hold one; the locks are then kept, so no one retries.
        HELD.lock().unwrap_or_else(|p| p.into_inner()).extend(locks);
        if bindable {
            return Ok(base);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        format!(
            "no loopback block {offsets:?} free in {lo}..{hi} (locks under {})",
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A block's ports are locked, not only bindable: neither another block nor a single
    /// reserved port is handed out inside it while this process lives (the locks of a
    /// second open of the same file conflict, even within one process).
    #[test]
    fn a_reserved_block_is_handed_to_no_one_else() {
        let offsets = [0, 1, 2, 10];
        let a = reserved_block(&offsets).unwrap();
        let b = reserved_block(&offsets).unwrap();
        let ports = |base: u16| offsets.map(|o| base + o);
        assert!(ports(a).iter().all(|p| !ports(b).contains(p)), "{a} {b}");
        let (lo, hi) = reserved_range();
        assert!(ports(a).iter().all(|p| (lo..hi).contains(p)));
        for _ in 0..50 {
            let single = reserved_loopback_addr().unwrap().port();
            assert!(!ports(a).contains(&single) && !ports(b).contains(&single));
        }
    }
}
