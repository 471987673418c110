//! What the integration tests share: the recorded inputs under `tests/fixtures/`, a poll
//! with a deadline for outcomes that arrive in their own time, and one module per kind of
//! system the tests stand up (an in-process gate, raw HTTP/1.1 peers, an in-memory
//! cluster, the demo and engine systems as real processes, the receiver's HTTP client, a
//! real Prometheus and a recorded incident to backfill into it), and the documentation
//! as the tests that check it read it. [`bin`] is the binary under test, and
//! [`serve::start`] a `recover serve` process ready to answer.

pub mod components;
pub mod demo;
pub mod demo_up;
pub mod docs;
pub mod engine;
pub mod gate;
pub mod incident;
pub mod kube;
pub mod loopback_http;
pub mod ports;
pub mod prometheus;
pub mod rule_incidents;
pub mod serve;
pub mod timeline;
pub mod wire;

use std::future::Future;
use std::time::{Duration, Instant};

/// The `recover` binary under test: the one place a test names it.
pub const BIN: &str = env!("CARGO_BIN_EXE_recover");

/// [`BIN`] as a command to give arguments to.
pub fn bin() -> std::process::Command {
    std::process::Command::new(BIN)
}

/// Where `tests/fixtures/<rel>` is, as an absolute path (for commands that take a file).
pub fn fixture_path(rel: &str) -> String {
    format!("{}/tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"))
}

/// The text of `tests/fixtures/<rel>`; panics naming the file when it cannot be read.
pub fn fixture(rel: &str) -> String {
    let p = fixture_path(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// Poll `done` every 20 ms until it holds or `within` has passed, and say whether it held.
/// The caller asserts afterwards, so a miss fails with that assertion's own message, and a
/// slow machine costs waiting time instead of a spurious failure.
pub async fn eventually<F, Fut>(within: Duration, mut done: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if done().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A loopback address where nothing listens, and nothing can start listening while the
/// returned socket lives: it holds the port bound without listening, so a connection is
/// refused. (A port found free and let go can be taken by a test running beside this one.)
pub fn refusing_addr() -> (std::net::SocketAddr, tokio::net::TcpSocket) {
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.bind("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    (sock.local_addr().expect("local addr"), sock)
}
