//! Slow and many clients against the gate's proxy listener: a request head has a total
//! deadline (a byte a second does not extend it), and open connections are capped per
//! address and in all, the extra ones refused at once with 503 when every connection
//! holding the caps is inside a request (idle ones make room: gate_connection_fairness).
//! Clients come from different loopback addresses (127.0.0.2, .3, ...) so the caps can
//! tell them apart.

#[allow(dead_code)] // the wire helpers serve several test files; this one uses a few
use crate::support::eventually;
use crate::support::gate::{capped, metrics, sample, served, start, upstream, Gate, Upstream};
use crate::support::wire::{connect_from, get, Peer};
use recover::gate::GateConfig;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What one dripping client saw.
#[derive(Debug, Clone)]
struct Drip {
    /// Bytes of its head it had sent when the gate closed the connection (or all of them).
    sent: usize,
    closed: bool,
    /// The start of whatever the gate answered before closing.
    answer: String,
    after: Duration,
}

/// Send `head` one byte a second until the gate closes the connection.
async fn drip(
    from: &'static str,
    gate: SocketAddr,
    head: Arc<Vec<u8>>,
    started: Arc<AtomicUsize>,
) -> Drip {
    let mut s = connect_from(from, gate).await;
    let t0 = Instant::now();
    let mut answer = Vec::new();
    let mut buf = [0u8; 512];
    for (i, b) in head.iter().enumerate() {
        if s.write_all(&[*b]).await.is_err() {
            return Drip {
                sent: i,
                closed: true,
                answer: String::from_utf8_lossy(&answer).into(),
                after: t0.elapsed(),
            };
        }
        if i == 0 {
            started.fetch_add(1, Ordering::SeqCst);
        }
        let pause = tokio::time::sleep(Duration::from_secs(1));
        tokio::pin!(pause);
        loop {
            tokio::select! {
                () = &mut pause => break,
                r = s.read(&mut buf) => match r {
                    Ok(0) | Err(_) => {
                        return Drip { sent: i + 1, closed: true, answer: String::from_utf8_lossy(&answer).into(), after: t0.elapsed() };
                    }
                    Ok(n) => answer.extend_from_slice(&buf[..n]),
                },
            }
        }
    }
    Drip {
        sent: head.len(),
        closed: false,
        answer: String::from_utf8_lossy(&answer).into(),
        after: t0.elapsed(),
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_dripping_connections_are_closed_at_the_head_deadline_while_a_normal_client_is_served(
) {
    const DRIPPERS: usize = 500;
    const REQUESTS: usize = 80;
    let up = upstream(Duration::ZERO).await;
    let mut cfg = GateConfig::loopback(vec![up.url()]);
    cfg.client_limits.request_head_timeout = Duration::from_secs(3);
    let gate = start(cfg).await;

    // 150 bytes: 150 s to send at a byte a second, far past the 3 s deadline and past the
    // 60 s idle timeout that a timer restarted on every byte would never reach.
    let head = format!(
        "GET /drip HTTP/1.1\r\nhost: gate.test\r\nx-drip: {}\r\n\r\n",
        "a".repeat(110)
    );
    let head = Arc::new(head.into_bytes());
    let started = Arc::new(AtomicUsize::new(0));
    let drippers: Vec<_> = (0..DRIPPERS)
        .map(|_| tokio::spawn(drip("127.0.0.2", gate.proxy, head.clone(), started.clone())))
        .collect();
    let t0 = Instant::now();
    while started.load(Ordering::SeqCst) < DRIPPERS {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the drippers did not all connect"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // A normal client, a new connection per request, while every dripper is connected.
    let mut latencies = Vec::new();
    for i in 0..REQUESTS {
        let t = Instant::now();
        let mut c = Peer::connect(gate.proxy).await;
        c.send(get(&format!("/normal/{i}"))).await;
        let r = c.response(false).await;
        assert_eq!(
            r.head.status(),
            200,
            "request {i}: {:?} {}",
            r.head,
            r.text()
        );
        latencies.push(t.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let mut drips = Vec::new();
    for d in drippers {
        drips.push(
            tokio::time::timeout(Duration::from_secs(120), d)
                .await
                .expect("a dripper still running after 120 s")
                .expect("dripper task"),
        );
    }
    latencies.sort();
    let mut closes: Vec<Duration> = drips.iter().map(|d| d.after).collect();
    closes.sort();
    println!(
        "normal client while {DRIPPERS} connections drip: {REQUESTS} requests, latency min {:?} p50 {:?} p90 {:?} max {:?}",
        latencies[0],
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.9),
        latencies[latencies.len() - 1]
    );
    println!(
        "dripping connections closed after min {:?} p50 {:?} max {:?} (deadline 3 s)",
        closes[0],
        percentile(&closes, 0.5),
        closes[closes.len() - 1]
    );
    let kept: Vec<&Drip> = drips
        .iter()
        .filter(|d| !d.closed || d.sent >= head.len())
        .collect();
    assert!(
        kept.is_empty(),
        "{} of {DRIPPERS} dripping connections were not closed before finishing their head, e.g. {:?}",
        kept.len(),
        kept[0]
    );
    let answered_408 = drips
        .iter()
        .filter(|d| d.answer.starts_with("HTTP/1.1 408"))
        .count();
    assert_eq!(
        answered_408,
        DRIPPERS,
        "{:?}",
        drips.iter().find(|d| !d.answer.starts_with("HTTP/1.1 408"))
    );
    assert_eq!(
        up.count(),
        REQUESTS as u64,
        "a dripped head reached the upstream"
    );
}

/// The upstream holds each request this long, so a connection can be seen inside one.
const HOLD: Duration = Duration::from_millis(1500);

/// Open `n` connections from `from`, each inside a request the upstream holds: once the
/// upstream has them all, none of them can make room for a newcomer.
async fn in_requests(from: &str, n: usize, gate: &Gate, up: &Upstream) -> Vec<Peer> {
    let before = up.count();
    let mut open = Vec::new();
    for i in 0..n {
        let mut p = Peer::connect_from(from, gate.proxy).await;
        p.send(get(&format!("/held{i}"))).await;
        open.push(p);
    }
    let all = eventually(Duration::from_secs(10), || async {
        up.count() == before + n as u64
    })
    .await;
    assert!(all, "the upstream never had all {n} requests");
    open
}

/// The held requests are answered.
async fn answered(open: &mut [Peer]) {
    for p in open.iter_mut() {
        assert_eq!(p.response(false).await.head.status(), 200);
    }
}

/// A connection from `from` is refused at once: 503, then closed, without sending anything.
async fn refused(from: &str, gate: &Gate) {
    let mut p = Peer::connect_from(from, gate.proxy).await;
    let r = p.response(false).await;
    assert_eq!(r.head.status(), 503, "{:?}", r.head);
    assert_eq!(r.text(), "too many open connections");
    p.expect_closed().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_per_address_cap_get_503_and_other_addresses_are_served() {
    let up = upstream(HOLD).await;
    let gate = start(capped(&up, 100, 5)).await;
    let mut open = in_requests("127.0.0.3", 5, &gate, &up).await;
    refused("127.0.0.3", &gate).await;
    let m = metrics(gate.admin).await;
    let refusals = |cap: &str| {
        sample(
            &m,
            &format!(r#"recover_gate_connections_refused_total{{cap="{cap}"}}"#),
        )
    };
    assert_eq!(refusals("max_connections_per_address"), Some(1.0), "{m}");
    assert_eq!(refusals("max_connections"), Some(0.0), "{m}");
    let _other = served("127.0.0.4", &gate, "/other").await;
    // The five held connections still work.
    answered(&mut open).await;
    // A slot comes back when its connection closes (the others inside requests again).
    for (i, p) in open.iter_mut().enumerate() {
        p.send(get(&format!("/again{i}"))).await;
    }
    drop(open.pop());
    let t0 = Instant::now();
    loop {
        let mut p = Peer::connect_from("127.0.0.3", gate.proxy).await;
        let _ = p.try_send(get("/back").as_bytes()).await; // a refused one may be closed
        if let Ok(Some(h)) = p.head().await {
            if h.status() == 200 {
                break;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the closed connection's slot never came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_total_cap_get_503() {
    let up = upstream(HOLD).await;
    let gate = start(capped(&up, 6, 3)).await;
    let mut open = in_requests("127.0.0.5", 3, &gate, &up).await;
    open.extend(in_requests("127.0.0.6", 3, &gate, &up).await);
    refused("127.0.0.7", &gate).await;
    refused("127.0.0.1", &gate).await;
    let m = metrics(gate.admin).await;
    assert_eq!(
        sample(
            &m,
            r#"recover_gate_connections_refused_total{cap="max_connections"}"#
        ),
        Some(2.0),
        "{m}"
    );
    answered(&mut open).await;
    assert_eq!(up.count(), 6);
}
