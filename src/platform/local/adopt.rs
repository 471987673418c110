//! Adopting replicas the local platform did not start: an engineer points `recover` at
//! processes started by hand (or by another tool) by naming, per replica in the inventory,
//! its pid or the port it listens on. The platform then records that pid in its pid file
//! and owns the process from there: it can stop it and start the inventory's command in
//! its place.
//!
//! A listener's process is found through `/proc` ([`crate::util::procfs`]): the socket's
//! inode, then the process holding it open.

use crate::util::procfs;
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

/// Find the process `adopt` names; the error says what was looked for and not found.
pub fn find(adopt: Adopt) -> Result<u32, String> {
    match adopt {
        Adopt::Pid(pid) if super::process::running(pid) => Ok(pid),
        Adopt::Pid(pid) => Err(format!("no process with pid {pid} is running")),
        Adopt::Port(port) => {
            let inodes = procfs::listening_sockets(port);
            if inodes.is_empty() {
                return Err(format!("nothing listens on port {port}"));
            }
            procfs::socket_owner(&inodes).ok_or_else(|| {
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
