//! Request bodies the project's servers read have a size cap and a time cap: the gate's
//! `PUT /admin/limit` and `recover serve`'s webhook answer 413 for a body over the cap
//! (also an endless chunked one) and 408 for a body that stops arriving, and say which.

use crate::support::serve::{config_acting_on_nothing, start, Auth};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "caps-token-0123456789";

/// Send `head` and `body_start`, then keep sending `more` (if any) until the server
/// answers; returns the answer's status line and body.
async fn exchange(
    addr: SocketAddr,
    head: String,
    body_start: &[u8],
    more: Option<&[u8]>,
) -> (String, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body_start).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let t0 = Instant::now();
    loop {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no answer within 30 s"
        );
        let read = tokio::time::timeout(Duration::from_millis(20), s.read(&mut buf)).await;
        match read {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => {
                if let Some(more) = more {
                    if s.write_all(more).await.is_err() {
                        // The server stopped reading: its answer is already here or coming.
                        let _ =
                            tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got))
                                .await;
                        break;
                    }
                }
            }
        }
        if complete(&got) {
            break;
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (
        head.lines().next().unwrap_or_default().to_string(),
        body.to_string(),
    )
}

/// A whole response with a content-length body.
fn complete(got: &[u8]) -> bool {
    let text = String::from_utf8_lossy(got);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    head.lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().to_string())
        })
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|n| body.len() >= n)
}

fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

async fn gate() -> (SocketAddr, CancellationToken) {
    let up = crate::support::ports::loopback_addr();
    let mut cfg = recover::gate::GateConfig::loopback(vec![format!("http://{up}")]);
    cfg.admin_token = Some(TOKEN.into());
    let bound = recover::gate::BoundGate::bind(cfg).await.unwrap();
    let admin = bound.admin_addr();
    let stop = CancellationToken::new();
    tokio::spawn(bound.run(Vec::new(), stop.clone()));
    (admin, stop)
}

fn put_head(framing: &str) -> String {
    format!("PUT /admin/limit HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\n{framing}\r\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_admin_refuses_a_limit_body_over_its_cap_or_too_slow() {
    let (admin, stop) = gate().await;
    let _stop = stop.drop_guard();
    let (status, body) = exchange(admin, put_head("content-length: 1000000\r\n"), b"{", None).await;
    assert!(status.contains("413"), "{status} {body}");
    assert!(body.contains("body over 64 KiB"), "{body}");

    let endless = chunk(&[b' '; 4096]);
    let (status, body) = exchange(
        admin,
        put_head("transfer-encoding: chunked\r\n"),
        &chunk(b"{"),
        Some(&endless),
    )
    .await;
    assert!(status.contains("413"), "{status} {body}");
    assert!(body.contains("body over 64 KiB"), "{body}");

    let (status, body) = exchange(
        admin,
        put_head("content-length: 60\r\n"),
        b"{\"rate_per_s\": ",
        None,
    )
    .await;
    assert!(status.contains("408"), "{status} {body}");
    assert!(body.contains("no complete body within 10s"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_a_webhook_body_over_its_cap_or_too_slow() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_acting_on_nothing(dir.path(), Auth::Bearer(TOKEN), "max_body_bytes: 4096");
    let serve = start(&cfg, None).await;
    let addr = serve.addr;
    let post = |framing: &str| {
        format!("POST /alerts HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\n{framing}\r\n")
    };
    let endless = chunk(&[b' '; 1024]);
    let (status, body) = exchange(
        addr,
        post("transfer-encoding: chunked\r\n"),
        &chunk(b"{"),
        Some(&endless),
    )
    .await;
    assert!(status.contains("413"), "{status} {body}");
    assert!(body.contains("body over 4 KiB"), "{body}");

    let (status, body) = exchange(
        addr,
        post("content-length: 100\r\n"),
        b"{\"version\": ",
        None,
    )
    .await;
    assert!(status.contains("408"), "{status} {body}");
    assert!(body.contains("no complete body within 10s"), "{body}");
}
