//! How the gate uses its upstream connections, seen from a raw TCP upstream that counts
//! connections: a keep-alive client costs the service one connection, not one per
//! request; an upstream that closes idle connections causes no 502s; and a client that
//! hangs up mid-request closes the gate's connection to the service too, so the service
//! can tell that nobody waits for the answer. A client that goes quiet is closed after
//! the idle timeout, and the service connection it held goes with it.

use crate::support::eventually;
use crate::support::gate::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the raw upstream saw.
#[derive(Default)]
struct Conns {
    accepted: AtomicU64,
    /// Request heads read in full.
    requests: AtomicU64,
    /// Connections the upstream closed itself after `idle_close`.
    closed_by_upstream: AtomicU64,
    /// Connections that reached EOF with a request still unanswered.
    closed_mid_request: AtomicU64,
    /// Connections the gate closed between requests.
    closed_idle: AtomicU64,
}

/// An HTTP/1.1 upstream written against the socket: answers each request with `ok` after
/// `delay`, then closes the connection if it stays idle for `idle_close`.
async fn raw_upstream(delay: Duration, idle_close: Option<Duration>) -> (String, Arc<Conns>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let conns = Arc::new(Conns::default());
    let seen = conns.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            seen.accepted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve_raw(stream, delay, idle_close, seen.clone()));
        }
    });
    (url, conns)
}

async fn serve_raw(
    mut stream: TcpStream,
    delay: Duration,
    idle_close: Option<Duration>,
    seen: Arc<Conns>,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        // Wait for a request head (these requests have no body).
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            let read = match idle_close {
                Some(idle) if buf.is_empty() => {
                    match tokio::time::timeout(idle, stream.read(&mut chunk)).await {
                        Ok(r) => r,
                        Err(_) => {
                            // Idle too long: close, as servers do.
                            seen.closed_by_upstream.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                    }
                }
                _ => stream.read(&mut chunk).await,
            };
            match read {
                Ok(0) | Err(_) => {
                    if buf.is_empty() {
                        seen.closed_idle.fetch_add(1, Ordering::SeqCst);
                    } else {
                        seen.closed_mid_request.fetch_add(1, Ordering::SeqCst);
                    }
                    return;
                }
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        seen.requests.fetch_add(1, Ordering::SeqCst);
        // While "working", notice a peer that hung up.
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            r = stream.read(&mut chunk) => {
                if matches!(r, Ok(0) | Err(_)) {
                    seen.closed_mid_request.fetch_add(1, Ordering::SeqCst);
                    return;
                }
            }
        }
        buf.drain(..end);
        let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nok\n";
        if stream.write_all(reply).await.is_err() {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keep_alive_client_costs_the_service_one_connection() {
    let (url, conns) = raw_upstream(Duration::ZERO, None).await;
    let gate = start(config_urls(vec![url])).await;
    let mut client = TcpStream::connect(gate.proxy).await.unwrap();
    for _ in 0..20 {
        client
            .write_all(b"GET / HTTP/1.1\r\nhost: gate\r\n\r\n")
            .await
            .unwrap();
        let reply = read_reply(&mut client).await;
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    }
    assert_eq!(conns.accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_closing_idle_connections_causes_no_errors() {
    let (url, conns) = raw_upstream(Duration::ZERO, Some(Duration::from_millis(30))).await;
    let gate = start(config_urls(vec![url])).await;
    let c = client();
    for closed in 1..=5 {
        let r = c.get(&gate.url("/")).await;
        assert_eq!(r.status, 200, "{}", r.body);
        // The upstream closes the connection once it has been idle for 30 ms.
        eventually(Duration::from_secs(5), || async {
            conns.closed_by_upstream.load(Ordering::SeqCst) >= closed
        })
        .await;
    }
    assert_eq!(conns.accepted.load(Ordering::SeqCst), 5);
    let m = metrics(gate.admin).await;
    assert_eq!(
        sample(&m, r#"recover_gate_requests_total{outcome="admitted"}"#),
        Some(5.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_closes_the_upstream_connection() {
    let (url, conns) = raw_upstream(Duration::from_secs(5), None).await;
    let gate = start(config_urls(vec![url])).await;
    let mut client = TcpStream::connect(gate.proxy).await.unwrap();
    client
        .write_all(b"GET /slow HTTP/1.1\r\nhost: gate\r\n\r\n")
        .await
        .unwrap();
    // Hang up once the request has reached the service.
    eventually(Duration::from_secs(5), || async {
        conns.requests.load(Ordering::SeqCst) >= 1
    })
    .await;
    drop(client);
    let closed = reaches(&conns.closed_mid_request, 1).await;
    assert_eq!(
        closed, 1,
        "the service never saw the abandoned request go away"
    );
    let m = metrics(gate.admin).await;
    assert_eq!(
        sample(&m, r#"recover_gate_requests_total{outcome="client_gone"}"#),
        Some(1.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_client_is_closed_after_the_idle_timeout_with_its_upstream_connection() {
    let (url, conns) = raw_upstream(Duration::ZERO, None).await;
    let mut cfg = config_urls(vec![url]);
    cfg.client_idle_timeout = Duration::from_millis(300);
    let gate = start(cfg).await;
    let mut idle = TcpStream::connect(gate.proxy).await.unwrap();
    idle.write_all(b"GET / HTTP/1.1\r\nhost: gate\r\n\r\n")
        .await
        .unwrap();
    assert!(read_reply(&mut idle).await.starts_with("HTTP/1.1 200"));
    // Half a head, then silence: answered 408 before the close.
    let mut stalled = TcpStream::connect(gate.proxy).await.unwrap();
    stalled.write_all(b"GET / HTTP/1.1\r\nho").await.unwrap();

    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), idle.read_to_end(&mut rest)).await;
    assert!(
        matches!(closed, Ok(Ok(0))),
        "the idle connection stayed open: {closed:?}"
    );
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stalled.read_to_end(&mut reply)).await;
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert_eq!(reaches(&conns.closed_idle, 1).await, 1);
    assert_eq!(conns.closed_mid_request.load(Ordering::SeqCst), 0);
}

/// The counter once it reaches `want`, or what it holds after 2 s of waiting for that:
/// the upstream sees a close some moments after the gate makes it.
async fn reaches(counter: &AtomicU64, want: u64) -> u64 {
    eventually(Duration::from_secs(2), || async {
        counter.load(Ordering::SeqCst) >= want
    })
    .await;
    counter.load(Ordering::SeqCst)
}

/// One response with a body ending in `ok\n`, read off a raw connection.
async fn read_reply(stream: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut chunk = [0u8; 1024];
    while !got.ends_with(b"\r\n\r\nok\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut chunk))
            .await
            .expect("a reply within 5 s")
            .unwrap();
        assert!(n > 0, "the gate closed the connection");
        got.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

fn config_urls(upstreams: Vec<String>) -> recover::gate::GateConfig {
    let mut cfg = recover::gate::GateConfig::loopback(upstreams);
    cfg.admin_token = Some(TOKEN.into());
    cfg
}
