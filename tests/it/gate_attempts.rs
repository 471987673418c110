//! First attempts and retries at the gate, over real sockets, for clients that mark their
//! retries in each of the ways real clients do, and for clients that mark nothing: a
//! repeated request key is a retry, and so is the next request from an address the gate
//! just turned away. The metric names the method that counted each request.

use crate::support::gate::*;
use std::time::Duration;

fn count(m: &str, kind: &str, method: &str) -> f64 {
    sample(
        m,
        &format!(r#"recover_gate_attempts_total{{kind="{kind}",method="{method}"}}"#),
    )
    .unwrap_or_else(|| panic!("no {kind}/{method} series in\n{m}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_marker_a_repeated_key_and_a_turned_away_client() {
    let up = upstream(Duration::ZERO).await;
    let gate = start(config(&[&up], limit(None, 1, None))).await;
    let c = client();
    for h in [
        ("x-attempt", "1"),
        ("x-attempt", "2"),
        ("x-envoy-attempt-count", "3"),
        ("grpc-previous-rpc-attempts", "0"),
        ("amz-sdk-request", "attempt=2; max=3"),
        ("Idempotency-Key", "poll-17"),
        ("Idempotency-Key", "poll-17"),
        ("X-Request-Id", "req-1"),
    ] {
        let r = c.send("GET", &gate.url("/"), &[h], "").await.unwrap();
        assert_eq!(r.status, 200, "{h:?}");
    }
    let m = metrics(gate.admin).await;
    assert_eq!(count(&m, "first", "x-attempt"), 1.0);
    assert_eq!(count(&m, "retry", "x-attempt"), 1.0);
    assert_eq!(count(&m, "retry", "x-envoy-attempt-count"), 1.0);
    assert_eq!(count(&m, "first", "grpc-previous-rpc-attempts"), 1.0);
    assert_eq!(count(&m, "retry", "amz-sdk-request"), 1.0);
    assert_eq!(count(&m, "first", "request-key"), 2.0);
    assert_eq!(count(&m, "retry", "request-key"), 1.0);

    // Unmarked requests from one address while the gate admits at most one a minute:
    // a request right after a 429 to the same address is taken for its retry; the first
    // one, and one after a 200, are first attempts.
    put_limit(&gate, r#"{"rate_per_s": 0.0167, "burst": 1}"#).await;
    let mut statuses = vec![];
    for _ in 0..5 {
        statuses.push(c.send("GET", &gate.url("/"), &[], "").await.unwrap().status);
    }
    assert!(statuses[1..].iter().all(|s| *s == 429), "{statuses:?}");
    let m = metrics(gate.admin).await;
    let after_429 = statuses.windows(2).filter(|w| w[0] == 429).count() as f64;
    assert_eq!(count(&m, "retry", "client-address"), after_429);
    assert_eq!(count(&m, "first", "client-address"), 5.0 - after_429);
    assert!(after_429 >= 3.0);
}

/// Each retry on a new connection, as a client does after its connection is closed: the
/// gate's workers (one per core) each accept some of them, and a retry must be seen as one
/// whichever worker accepted the failure before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_on_a_new_connection_is_a_retry_whichever_worker_accepts_it() {
    use crate::support::wire::Peer;
    let up = upstream(Duration::ZERO).await;
    let gate = start(config(&[&up], limit(Some(0.0), 1, None))).await;
    const N: usize = 24;
    for _ in 0..N {
        let mut peer = Peer::connect(gate.proxy).await;
        peer.send("GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await;
        assert_eq!(peer.response(false).await.head.status(), 429);
    }
    let m = metrics(gate.admin).await;
    assert_eq!(count(&m, "first", "client-address"), 1.0);
    assert_eq!(count(&m, "retry", "client-address"), (N - 1) as f64);
}
