//! Loopback ports for the processes the tests start: `recover`'s own reserved ports
//! (`util::ports`, below the kernel's ephemeral range, each locked for this process's
//! life), so a test's children and the rehearsals it runs never race for one.

use std::net::SocketAddr;

/// A loopback address no other test process (nor rehearsal) is handed while this one lives.
pub fn loopback_addr() -> SocketAddr {
    recover::util::ports::reserved_loopback_addr().unwrap_or_else(|e| panic!("{e}"))
}
