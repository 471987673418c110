//! What this host's `/proc` says about its processes and sockets, read in one place: the
//! processes there are, a process's command line and whether it is a zombie, which
//! process holds a listening socket, and the host's name. The parsing is pure and tested
//! on text; the reads return nothing rather than fail when `/proc` hides a process (it
//! belongs to another user, or has just exited).

/// The pid of every process visible in `/proc`.
pub fn pids() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// A process's command line, its arguments in order.
pub fn cmdline(pid: u32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(parse_cmdline(&raw))
}

/// `/proc/PID/cmdline`: arguments ended by NUL bytes.
pub fn parse_cmdline(raw: &[u8]) -> Vec<String> {
    raw.split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// The state letter of a process (`R`, `S`, `Z` for a zombie, ...), if it exists.
pub fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_state(&stat)
}

/// The state letter in `/proc/PID/stat`: the first field after the command name, which is
/// in parentheses and may itself hold spaces and parentheses.
pub fn parse_state(stat: &str) -> Option<char> {
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// True for a process that has exited and not been reaped: it still has a pid, but it
/// runs nothing.
pub fn is_zombie(pid: u32) -> bool {
    state(pid) == Some('Z')
}

/// The inodes of sockets listening on TCP `port`, IPv4 and IPv6.
pub fn listening_sockets(port: u16) -> Vec<u64> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|t| listening_inodes(&t, port))
        .collect()
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

/// The pid of a process holding a socket with one of `inodes` open (its descriptors in
/// `/proc/PID/fd` name `socket:[INODE]`).
pub fn socket_owner(inodes: &[u64]) -> Option<u32> {
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    pids().into_iter().find(|pid| {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            return false;
        };
        fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|target| wanted.iter().any(|w| target.as_os_str() == w.as_str()))
        })
    })
}

/// This host's name, as the kernel has it.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
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
    fn reads_a_command_line_and_a_state_whatever_the_command_name_holds() {
        assert_eq!(
            parse_cmdline(b"recover\0gate\0--listen\0localhost:80\0"),
            ["recover", "gate", "--listen", "localhost:80"]
        );
        assert_eq!(parse_state("42 (a) b (c)) Z 1 42"), Some('Z'));
        assert_eq!(parse_state("42 (recover) S 1 42"), Some('S'));
        let me = std::process::id();
        assert!(pids().contains(&me));
        assert!(!cmdline(me).unwrap().is_empty());
        assert!(!is_zombie(me));
    }

    #[test]
    fn finds_the_process_that_listens_on_a_port() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let inodes = listening_sockets(port);
        assert!(!inodes.is_empty());
        assert_eq!(socket_owner(&inodes), Some(std::process::id()));
        drop(l);
        assert!(listening_sockets(port).is_empty());
    }
}
