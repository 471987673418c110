//! Metric endpoints that never finish their body: one streams an endless chunked page,
//! one sends its head and a few lines, then nothing. `recover detect` and the engine's
//! scrape (the local platform's, and the fixed-URL one) must stop at the size cap or the
//! time cap, say which, and stay small: a scrape is never read into memory without end.

use recover::metrics::scrape::fetch::{Fetch, UrlFetch};
use recover::platform::local::inventory::{GateSpec, Inventory};
use recover::platform::local::LocalPlatform;
use recover::platform::{Platform, ScrapeEndpoint};
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Read the request head, so the client is not reset for unread bytes.
async fn read_head(s: &mut TcpStream) {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

const HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ntransfer-encoding: chunked\r\n\r\n";

/// A `/metrics` that never ends: valid exposition lines, 64 KiB a chunk, for as long as
/// the client reads.
async fn endless() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut lines = String::new();
    let mut i = 0u64;
    while lines.len() < 64 * 1024 - 64 {
        lines.push_str(&format!("recover_junk_total{{i=\"{i}\"}} 1\n"));
        i += 1;
    }
    let mut chunk = format!("{:x}\r\n", lines.len()).into_bytes();
    chunk.extend_from_slice(lines.as_bytes());
    chunk.extend_from_slice(b"\r\n");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let chunk = chunk.clone();
            tokio::spawn(async move {
                read_head(&mut s).await;
                if s.write_all(HEAD).await.is_err() {
                    return;
                }
                while s.write_all(&chunk).await.is_ok() {}
            });
        }
    });
    addr
}

/// A `/metrics` that sends its head and one chunk, then nothing, holding the connection.
async fn stalled() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                read_head(&mut s).await;
                let line = b"recover_stalled_total 1\n";
                let mut out = HEAD.to_vec();
                out.extend_from_slice(format!("{:x}\r\n", line.len()).as_bytes());
                out.extend_from_slice(line);
                out.extend_from_slice(b"\r\n");
                let _ = s.write_all(&out).await;
                tokio::time::sleep(Duration::from_secs(600)).await;
                drop(s);
            });
        }
    });
    addr
}

/// Peak resident memory so far (VmHWM), in bytes.
fn peak_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

const MB: u64 = 1_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detect_on_an_endless_metrics_body_is_unknown_within_its_timeout_and_stays_small() {
    let addr = endless().await;
    let url = format!("http://{addr}/metrics");
    let mut cmd = crate::support::bin();
    cmd.args([
        "detect",
        "--observe",
        "2s",
        "--interval",
        "1s",
        "--timeout",
        "2s",
    ])
    .args(["--output", "json"]);
    for role in ["gate", "service", "clients"] {
        cmd.args(["--metrics-url", &format!("{role}={url}")]);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let t0 = Instant::now();
    let mut peak = 0;
    let status = loop {
        if let Some(p) = peak_rss(pid) {
            peak = peak.max(p);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if t0.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!(
                "recover detect still running after 120 s (peak RSS {} MB)",
                peak / MB
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!(
        "recover detect on an endless /metrics: exit {:?} after {:?}, peak RSS {:.1} MB",
        status.code(),
        t0.elapsed(),
        peak as f64 / MB as f64
    );
    assert_eq!(
        status.code(),
        Some(12),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("body over 16 MiB"), "{stdout}");
    assert!(peak > 0, "no VmHWM read for pid {pid}");
    assert!(
        peak < 100 * MB,
        "recover detect peaked at {} MB on an endless body",
        peak / MB
    );
}

fn endpoint(addr: SocketAddr) -> ScrapeEndpoint {
    ScrapeEndpoint {
        role: "service".into(),
        instance: "replica-0".into(),
        locator: format!("http://{addr}/metrics"),
    }
}

fn platform() -> LocalPlatform {
    LocalPlatform::new(Inventory {
        name: "caps".into(),
        state_dir: Some(std::env::temp_dir().join("recover-body-caps-test")),
        replicas: Vec::new(),
        gates: vec![GateSpec {
            admin_url: "http://127.0.0.1:1".into(),
            token_file: "token".into(),
            metrics_url: None,
        }],
        clients: Vec::new(),
        stop_grace: Duration::from_secs(1),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engines_scrape_of_an_endless_body_stops_at_the_size_cap() {
    let addr = endless().await;
    let e = platform().scrape(&endpoint(addr)).await.unwrap_err();
    assert!(e.to_string().contains("body over 16 MiB"), "{e}");
    let fetch = UrlFetch::new(vec![endpoint(addr)], Duration::from_secs(5)).unwrap();
    let e = fetch.fetch(&endpoint(addr)).await.unwrap_err();
    assert!(e.to_string().contains("body over 16 MiB"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_whose_body_stalls_says_it_timed_out_not_that_it_could_not_decode() {
    let addr = stalled().await;
    let fetch = UrlFetch::new(vec![endpoint(addr)], Duration::from_millis(500)).unwrap();
    let e = fetch.fetch(&endpoint(addr)).await.unwrap_err().to_string();
    assert!(e.contains("no complete body within 500ms"), "{e}");
    assert!(!e.contains("decoding"), "{e}");
    let e = platform()
        .scrape(&endpoint(addr))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("no complete body within 5s"), "{e}");
    assert!(!e.contains("decoding"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prometheus_answer_that_never_ends_stops_at_the_size_cap_or_the_time_cap() {
    let endless = endless().await;
    let prom = recover::metrics::promql::PromqlSource::new(
        &format!("http://{endless}"),
        Duration::from_secs(10),
    )
    .unwrap();
    let e = prom.query("up", None).await.unwrap_err().to_string();
    assert!(e.contains("body over 32 MiB"), "{e}");
    let stalled = stalled().await;
    let prom = recover::metrics::promql::PromqlSource::new(
        &format!("http://{stalled}"),
        Duration::from_millis(500),
    )
    .unwrap();
    let e = prom.query("up", None).await.unwrap_err().to_string();
    assert!(e.contains("no answer within 500ms"), "{e}");
}
