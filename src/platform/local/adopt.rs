//! Adopting replicas the local platform did not start: an engineer points `recover` at
//! processes started by hand (or by another tool) by naming, per replica in the inventory,
//! its pid or the port it listens on. The platform then records that pid in its pid file
//! and owns the process from there: it can stop it and start the inventory's command in
//! its place.
//!
//! Finding a listener's process reads `/proc/net/tcp{,6}` (the socket's inode) and each
//! process's open descriptors (`/proc/PID/fd`, which name `socket:[INODE]`); the parsing
//! is pure and tested on text.

use serde::{Deserialize, Serialize};

/// How to find a running replica to adopt; in YAML `{pid: N}` or `{port: P}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "AdoptFields", into = "AdoptFields")]
pub enum Adopt {
    /// The process with this pid.
    Pid(u32),
    /// The process listening on this TCP port (any local address).
    Port(u16),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AdoptFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    port: Option<u16>,
}

impl TryFrom<AdoptFields> for Adopt {
    type Error = String;
    fn try_from(f: AdoptFields) -> Result<Self, String> {
        match (f.pid, f.port) {
            (Some(p), None) => Ok(Adopt::Pid(p)),
            (None, Some(p)) => Ok(Adopt::Port(p)),
            _ => Err("adopt needs exactly one of pid or port, like {port: 8091}".into()),
        }
    }
}

impl From<Adopt> for AdoptFields {
    fn from(a: Adopt) -> Self {
        match a {
            Adopt::Pid(p) => AdoptFields {
                pid: Some(p),
                port: None,
            },
            Adopt::Port(p) => AdoptFields {
                pid: None,
                port: Some(p),
            },
        }
    }
}

impl std::fmt::Display for Adopt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Adopt::Pid(p) => write!(f, "pid {p}"),
            Adopt::Port(p) => write!(f, "the process listening on port {p}"),
        }
    }
}

/// The inodes of sockets listening on `port` in a `/proc/net/tcp` (or `tcp6`) table.
pub fn listening_inodes(table: &str, port: u16) -> Vec<u64> {
    const LISTEN: &str = "0A";
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            let local = f.get(1)?;
            let p = u16::from_str_radix(local.rsplit_once(':')?.1, 16).ok()?;
            (p == port && *f.get(3)? == LISTEN).then(|| f.get(9)?.parse().ok())?
        })
        .collect()
}

/// The pid of the process holding a socket with one of `inodes` open.
fn owner_of(inodes: &[u64]) -> Option<u32> {
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path()) {
                if wanted.iter().any(|w| target.as_os_str() == w.as_str()) {
                    return Some(pid);
                }
            }
        }
    }
    None
}

/// Find the process `adopt` names; the error says what was looked for and not found.
pub fn find(adopt: Adopt) -> Result<u32, String> {
    match adopt {
        Adopt::Pid(pid) if super::process::running(pid) => Ok(pid),
        Adopt::Pid(pid) => Err(format!("no process with pid {pid} is running")),
        Adopt::Port(port) => {
            let inodes: Vec<u64> = ["/proc/net/tcp", "/proc/net/tcp6"]
                .iter()
                .filter_map(|p| std::fs::read_to_string(p).ok())
                .flat_map(|t| listening_inodes(&t, port))
                .collect();
            if inodes.is_empty() {
                return Err(format!("nothing listens on port {port}"));
            }
            owner_of(&inodes).ok_or_else(|| {
                format!(
                    "a socket listens on port {port}, but its process is not visible to this user (run as the process's user)"
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_listening_sockets_by_port() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 424242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 515151 1 0000000000000000 20 4 30 10 -1
   2: 00000000:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 616161 1 0000000000000000 100 0 0 10 0
";
        assert_eq!(listening_inodes(table, 8080), vec![424242]);
        assert_eq!(listening_inodes(table, 8081), vec![616161]);
        assert!(listening_inodes(table, 9).is_empty());
    }

    #[test]
    fn adopts_this_test_process_by_pid_and_its_listener_by_port() {
        let me = std::process::id();
        assert_eq!(find(Adopt::Pid(me)), Ok(me));
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert_eq!(find(Adopt::Port(port)), Ok(me));
        drop(l);
        assert!(find(Adopt::Port(port))
            .unwrap_err()
            .contains("nothing listens"));
        let yaml: Adopt = serde_yaml::from_str("{port: 8091}").unwrap();
        assert_eq!(yaml, Adopt::Port(8091));
        assert_eq!(
            serde_yaml::to_string(&Adopt::Pid(7)).unwrap().trim(),
            "pid: 7"
        );
        assert!(serde_yaml::from_str::<Adopt>("{pid: 1, port: 2}").is_err());
    }
}
