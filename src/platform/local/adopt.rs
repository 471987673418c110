//! Adopting replicas the local platform did not start: an engineer points `recover` at
//! processes started by hand (or by another tool) by naming, per replica in the inventory,
//! its pid or the port it listens on. The platform then records that pid in its pid file
//! and owns the process from there: it can stop it and start the inventory's command in
//! its place.
//!
//! A listener's process is found through `/proc` ([`crate::util::procfs`]): the socket's
//! inode, then the process holding it open.

use super::inventory::Adopt;
use crate::util::procfs;

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
