//! Connections that hold a slot and do nothing: a new connection that never sends a byte is
//! closed at its first-byte deadline, not after the whole idle timeout; and when a cap is
//! reached, a connection waiting with no request begun makes room for the newcomer (silent
//! first, from the address holding the most, or the newcomer's own address at its cap), so
//! one address cannot keep the table while others are turned away. Clients come from
//! different loopback addresses (127.0.0.x) so the gate can tell them apart.

use crate::support::gate::{capped, metrics, sample, served, start, upstream, Gate, Upstream};
use crate::support::wire::{get, Peer};
use recover::gate::GateConfig;
use std::time::{Duration, Instant};

/// [`capped`] with the deadline for a new connection's first byte.
fn capped_first_byte(
    up: &Upstream,
    total: usize,
    per_address: usize,
    first_byte: Duration,
) -> GateConfig {
    let mut cfg = capped(up, total, per_address);
    cfg.client_limits.first_byte_timeout = first_byte;
    cfg
}

async fn again(p: &mut Peer, path: &str) {
    p.send(get(path)).await;
    assert_eq!(p.response(false).await.head.status(), 200, "{path}");
}

async fn closed_for(gate: &Gate, reason: &str) -> Option<f64> {
    let m = metrics(gate.admin).await;
    sample(
        &m,
        &format!(r#"recover_gate_connections_closed_total{{reason="{reason}"}}"#),
    )
}

/// Was: a silent connection held its slot for the whole idle timeout (60 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_never_sends_a_byte_is_closed_at_its_first_byte_deadline() {
    let up = upstream(Duration::ZERO).await;
    let gate = start(capped_first_byte(&up, 100, 100, Duration::from_millis(300))).await;
    let mut kept = served("127.0.0.1", &gate, "/first").await;
    let t0 = Instant::now();
    let mut silent = Peer::connect_from("127.0.0.1", gate.proxy).await;
    silent.expect_closed().await; // within 5 s, with no answer: nothing was asked
    assert!(
        t0.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(closed_for(&gate, "no_first_byte").await, Some(1.0));
    // The deadline is for a new connection's first byte only: a kept-alive connection
    // idle for longer than it is still served.
    again(&mut kept, "/second").await;
    // A client that speaks at once is not affected at all.
    served("127.0.0.1", &gate, "/prompt").await;
    assert_eq!(closed_for(&gate, "no_first_byte").await, Some(1.0));
}

/// Was: 20 silent connections from one address filled the table and every other client
/// got 503 until they timed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_of_one_address_make_room_for_another() {
    let up = upstream(Duration::ZERO).await;
    let gate = start(capped_first_byte(&up, 20, 20, Duration::from_secs(60))).await;
    let mut hog = Vec::new();
    for _ in 0..20 {
        hog.push(Peer::connect_from("127.0.0.8", gate.proxy).await);
    }
    let mut legit = served("127.0.0.9", &gate, "/legit").await;
    assert_eq!(closed_for(&gate, "made_room").await, Some(1.0));
    // The hog keeps opening: each newcomer of its own closes one of its own (it holds the
    // most), never the other address's one connection.
    for _ in 0..10 {
        hog.push(Peer::connect_from("127.0.0.8", gate.proxy).await);
    }
    for i in 0..3 {
        again(&mut legit, &format!("/legit{i}")).await;
    }
    let other = served("127.0.0.10", &gate, "/other").await;
    drop(other);
    assert_eq!(up.count(), 5);
}

/// Behind a load balancer one address is everyone: at its cap, its longest idle
/// connection makes room for the new one. Was: 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_one_address_cap_the_longest_idle_connection_makes_room() {
    let up = upstream(Duration::ZERO).await;
    let gate = start(capped_first_byte(&up, 100, 5, Duration::from_secs(60))).await;
    let mut open = Vec::new();
    for i in 0..5 {
        open.push(served("127.0.0.11", &gate, &format!("/c{i}")).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _newcomer = served("127.0.0.11", &gate, "/new").await;
    open[0].expect_closed().await;
    for (i, p) in open.iter_mut().enumerate().skip(1) {
        again(p, &format!("/still{i}")).await;
    }
    assert_eq!(closed_for(&gate, "made_room").await, Some(1.0));
}
