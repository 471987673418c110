//! The loopback ports the tests and rehearsals give the processes they start (`util::ports`):
//! a port picked free and let go was bound by another test before the child bound it
//! (`gate_cli`'s restarted gate exited "Address already in use"). The ports handed out
//! now are ones the kernel never gives to a port-0 bind or an outgoing connection, and
//! are never handed out twice while their holder lives.

use crate::support::ports::loopback_addr;
use recover::util::ports::ephemeral_low;
use std::collections::HashSet;
use std::net::TcpListener;

#[test]
fn ports_handed_to_children_are_never_the_kernels_nor_handed_out_twice() {
    let low = ephemeral_low();
    let mut handed = HashSet::new();
    for _ in 0..300 {
        let port = loopback_addr().port();
        assert!(
            port < low,
            "{port} is in the kernel's ephemeral range (from {low}): a port-0 bind may take it"
        );
        assert!(handed.insert(port), "{port} handed out twice");
    }
    // Other tests binding port 0 meanwhile never land on one of them.
    let others: Vec<TcpListener> = (0..2000)
        .filter_map(|_| TcpListener::bind("127.0.0.1:0").ok())
        .collect();
    for l in &others {
        let port = l.local_addr().unwrap().port();
        assert!(!handed.contains(&port), "a port-0 bind took {port}");
    }
}
