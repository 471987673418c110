//! `POST /admin/drain?keep=answerable` on a real demo service, sent by the local platform:
//! of a queue holding a request whose deadline has passed, two whose clients hung up (one
//! directly, one through the gate, which closes its upstream connection when its client
//! goes) and three live ones, the service keeps the youngest live ones it answers before
//! their deadlines, answers them 200 in time, and answers every other waiting client 503 at
//! once; a `keep` it does not know is refused naming `keep`, dropping nothing; without
//! `keep` (or with `keep=none`) it drops everything and answers as it always did.

use crate::support::demo::{http, scrape, spawn, wait_http_ok};
use crate::support::gate;
use recover::gate::config::GateConfig;
use recover::platform::admin::{DrainCounts, Known};
use recover::platform::local::inventory::Inventory;
use recover::platform::local::LocalPlatform;
use recover::platform::{AdminOp, AdminReply, DrainKeep, Platform};
use recover::util::child::ChildGuard;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One request at a time, each this long: whatever is queued waits whole multiples of it.
const T: Duration = Duration::from_millis(2000);

fn service(addr: SocketAddr, service_time: Duration) -> ChildGuard {
    let service_time = format!("{}ms", service_time.as_millis());
    let args = [
        "demo",
        "config-service",
        "--listen",
        &addr.to_string(),
        "--concurrency",
        "1",
        "--service-time",
        &service_time,
        // No cold start and no overload: every request costs exactly T.
        "--cold-factor",
        "1",
        "--overload-factor",
        "1",
        "--client-timeout",
        "60s",
    ];
    spawn("config-service", &args.map(String::from))
}

/// `GET /config` on a connection of its own, with `x-deadline-ms` when given.
async fn ask(addr: SocketAddr, deadline: Option<SystemTime>) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let header = deadline
        .map(|d| {
            let ms = d
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_millis();
            format!("x-deadline-ms: {ms}\r\n")
        })
        .unwrap_or_default();
    let req = format!("GET /config HTTP/1.1\r\nhost: demo\r\n{header}\r\n");
    s.write_all(req.as_bytes()).await.expect("send");
    s
}

/// The status of the answer on `s` and when its first bytes came.
async fn answer(mut s: TcpStream) -> (u16, SystemTime) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 512];
    let mut first = None;
    while !buf.windows(2).any(|w| w == b"\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(20), s.read(&mut chunk))
            .await
            .expect("an answer within 20 s")
            .expect("read");
        assert!(n > 0, "closed without an answer");
        first.get_or_insert_with(SystemTime::now);
        buf.extend_from_slice(&chunk[..n]);
    }
    let line = String::from_utf8_lossy(&buf);
    let status = line.split(' ').nth(1).and_then(|s| s.parse().ok());
    (status.expect("a status line"), first.unwrap())
}

async fn metric(addr: SocketAddr, name: &str) -> f64 {
    scrape(addr)
        .await
        .get(&format!("recover_demo_service_{name}"))
}

/// Wait until the service shows `name` at `want` (the queue and the pool are read from
/// its metrics, so the order of arrival is the order the test means).
async fn until(addr: SocketAddr, name: &str, want: f64) {
    let started = Instant::now();
    while metric(addr, name).await != want {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{name} never reached {want}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The service's drain asked directly, with `query` (`""`, `"?keep=..."`): status and body.
async fn drain(addr: SocketAddr, query: &str) -> (u16, String) {
    http(
        "POST",
        &format!("http://{addr}/admin/drain{query}"),
        None,
        "{}",
    )
    .await
    .expect("an answer")
}

fn platform(dir: &std::path::Path, service: SocketAddr) -> LocalPlatform {
    let text = format!(
        "name: keep\nreplicas:\n  - name: replica-0\n    command: [\"true\"]\n    admin_url: http://{service}\n    metrics_url: http://{service}/metrics\n    readiness_url: http://{service}/readyz\ngate:\n  admin_url: http://127.0.0.1:1\n  token_file: gate.token\n"
    );
    let path = dir.join("inventory.yaml");
    std::fs::write(&path, text).unwrap();
    LocalPlatform::new(Inventory::load(&path).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_keeps_the_youngest_requests_it_answers_in_time_and_drops_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let addr = crate::support::ports::loopback_addr();
    let _svc = service(addr, T);
    wait_http_ok(&format!("http://{addr}/readyz"), Duration::from_secs(20)).await;
    let mut cfg = GateConfig::loopback(vec![format!("http://{addr}")]);
    cfg.upstream_timeout = Duration::from_secs(30);
    let g = gate::start(cfg).await;

    // The one server busy from `started` to `started + T`.
    let first = ask(addr, None).await;
    until(addr, "in_flight", 1.0).await;
    let started = (Instant::now(), SystemTime::now());
    // Each queued job is answered a whole T after the one before it: the last three live
    // ones would end at started + 2T, 3T and 4T (at most a poll's lag earlier), so a
    // deadline of started + 3.5T leaves room for two of them, whenever the drain comes.
    let deadline = started.1 + T.mul_f64(3.5);
    let mut live = Vec::new();
    live.push(ask(addr, Some(deadline)).await);
    until(addr, "queue_depth", 1.0).await;
    let expired = ask(addr, Some(SystemTime::now() - Duration::from_secs(1))).await;
    until(addr, "queue_depth", 2.0).await;
    for depth in [3.0, 4.0] {
        live.push(ask(addr, Some(deadline)).await);
        until(addr, "queue_depth", depth).await;
    }
    // Hung up with their deadlines still ahead: only their closed connections tell.
    let gone = ask(addr, Some(deadline)).await;
    until(addr, "queue_depth", 5.0).await;
    drop(gone);
    let through_gate = ask(g.proxy, Some(deadline)).await;
    until(addr, "queue_depth", 6.0).await;
    drop(through_gate);
    // Both hang-ups reach the service's connection handlers; nothing shows it but a drain.
    tokio::time::sleep(Duration::from_millis(300)).await;

    // A keep it does not know drops nothing.
    let (status, body) = drain(addr, "?keep=bogus").await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("keep") && body.contains("answerable") && body.contains("none"),
        "{body}"
    );
    assert_eq!(metric(addr, "queue_depth").await, 6.0);

    assert!(
        started.0.elapsed() < T - Duration::from_millis(200),
        "the machine took {:?} to queue six requests: the first one's service ended before the drain, so the test cannot tell what it means to",
        started.0.elapsed()
    );
    let drained_at = SystemTime::now();
    let reply = platform(dir.path(), addr)
        .admin("replica-0", AdminOp::Drain(DrainKeep::Answerable))
        .await
        .expect("the drain");
    // Dropped: the oldest live one (out of reach), the expired one, both gone ones.
    assert_eq!(
        reply,
        AdminReply::Drained(DrainCounts {
            dropped: Known::Value(4),
            kept: Known::Value(2)
        })
    );
    assert_eq!(metric(addr, "queue_depth").await, 2.0);
    assert_eq!(metric(addr, "drained_total").await, 4.0);
    assert_eq!(metric(addr, "drain_kept_total").await, 2.0);

    // Those dropped still waiting are told at once.
    let mut live = live.into_iter();
    for dropped in [live.next().unwrap(), expired] {
        let (status, at) = answer(dropped).await;
        assert_eq!(status, 503);
        let after = at.duration_since(drained_at).unwrap_or_default();
        assert!(
            after < Duration::from_secs(1),
            "answered {after:?} after the drain"
        );
    }
    // The kept ones are served, in order, before their deadlines.
    assert_eq!(answer(first).await.0, 200);
    let mut last = drained_at;
    for kept in live {
        let (status, at) = answer(kept).await;
        assert_eq!(status, 200);
        assert!(
            at >= last && at <= deadline,
            "answered {at:?}, deadline {deadline:?}"
        );
        println!(
            "kept request answered {:?} before its deadline",
            deadline.duration_since(at).unwrap()
        );
        last = at;
    }
    assert_eq!(metric(addr, "drain_kept_late_total").await, 0.0);
}

/// A kept request whose client hangs up before its turn is counted late when the service
/// gets to it: the drain promised an answer its client no longer waits for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_request_whose_client_left_is_counted_late_when_served() {
    let addr = crate::support::ports::loopback_addr();
    let _svc = service(addr, Duration::from_millis(500));
    wait_http_ok(&format!("http://{addr}/readyz"), Duration::from_secs(20)).await;
    let first = ask(addr, None).await;
    until(addr, "in_flight", 1.0).await;
    let kept = ask(addr, Some(SystemTime::now() + Duration::from_secs(30))).await;
    until(addr, "queue_depth", 1.0).await;
    let (status, body) = drain(addr, "?keep=answerable").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap(),
        serde_json::json!({ "drained": 0, "kept": 1 })
    );
    assert_eq!(metric(addr, "drain_kept_late_total").await, 0.0);
    drop(kept);
    assert_eq!(answer(first).await.0, 200);
    until(addr, "drain_kept_late_total", 1.0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_without_keep_or_with_keep_none_drops_everything_as_before() {
    let addr = crate::support::ports::loopback_addr();
    // Long enough for both drains to come while the first request is in service.
    let _svc = service(addr, Duration::from_secs(5));
    wait_http_ok(&format!("http://{addr}/readyz"), Duration::from_secs(20)).await;
    let first = ask(addr, None).await;
    until(addr, "in_flight", 1.0).await;
    let far = SystemTime::now() + Duration::from_secs(30);
    for (query, queued) in [("", 2), ("?keep=none", 1)] {
        let mut waiting = Vec::new();
        for depth in 1..=queued {
            waiting.push(ask(addr, Some(far)).await);
            until(addr, "queue_depth", depth as f64).await;
        }
        let (status, body) = drain(addr, query).await;
        assert_eq!(status, 200, "{body}");
        // Every one of them, answerable or not; the reply as it always was, no `kept`.
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&body).unwrap(),
            serde_json::json!({ "drained": queued }),
            "drain{query}"
        );
        for w in waiting {
            assert_eq!(answer(w).await.0, 503, "drain{query}");
        }
    }
    assert_eq!(metric(addr, "drain_kept_total").await, 0.0);
    assert_eq!(answer(first).await.0, 200);
}
