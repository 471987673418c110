//! Every hyper/axum listener closes a connection that sends nothing (or half a request
//! head) after its header-read timeout, as the gate's proxy listener does: `recover serve`
//! (the real binary), the gate's admin port, the demo config service and the workers'
//! metrics listener. The demo components and serve run with the default (10 s).

use crate::support::serve::{config_acting_on_nothing, start, Auth};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// Connect, once the listener accepts (it may still be starting).
async fn connect(addr: SocketAddr) -> TcpStream {
    let t0 = Instant::now();
    loop {
        match TcpStream::connect(addr).await {
            Ok(s) => return s,
            Err(e) => assert!(
                t0.elapsed() < Duration::from_secs(20),
                "{addr} never listened: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Panics unless the server closes `s` within `within` (EOF or reset, after whatever it
/// chose to answer).
async fn closed_within(s: &mut TcpStream, within: Duration, what: &str) {
    let mut got = Vec::new();
    match tokio::time::timeout(within, s.read_to_end(&mut got)).await {
        Ok(_) => {}
        Err(_) => panic!("{what}: the connection was still open after {within:?}"),
    }
}

/// A silent connection and one with half a head are both closed within `within`.
async fn silent_and_half_head_are_closed(addr: SocketAddr, within: Duration, what: &str) {
    let mut silent = connect(addr).await;
    let mut half = connect(addr).await;
    half.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\nx-")
        .await
        .unwrap();
    closed_within(&mut silent, within, &format!("{what}, silent")).await;
    closed_within(&mut half, within, &format!("{what}, half a head")).await;
}

const DEFAULT_PLUS_SLACK: Duration = Duration::from_secs(30);

#[tokio::test]
async fn the_gate_admin_port_closes_silent_connections() {
    let up = crate::support::ports::loopback_addr();
    let mut cfg = recover::gate::GateConfig::loopback(vec![format!("http://{up}")]);
    cfg.client_limits.request_head_timeout = Duration::from_millis(500);
    let bound = recover::gate::BoundGate::bind(cfg).await.unwrap();
    let admin = bound.admin_addr();
    let stop = CancellationToken::new();
    tokio::spawn(bound.run(Vec::new(), stop.clone()));
    // Stops the gate's threads on a failed assertion too, or the runtime waits for them.
    let _stop = stop.drop_guard();
    silent_and_half_head_are_closed(admin, Duration::from_secs(10), "gate admin").await;
}

#[tokio::test]
async fn the_demo_config_service_closes_silent_connections() {
    let addr = crate::support::ports::loopback_addr();
    let cfg = recover::demo::config_service::ServiceConfig {
        listen: addr,
        ..Default::default()
    };
    let stop = CancellationToken::new();
    tokio::spawn(recover::demo::config_service::serve(cfg, stop.clone()));
    silent_and_half_head_are_closed(addr, DEFAULT_PLUS_SLACK, "config service").await;
    stop.cancel();
}

#[tokio::test]
async fn the_workers_metrics_listener_closes_silent_connections() {
    let addr = crate::support::ports::loopback_addr();
    let target = crate::support::ports::loopback_addr();
    let mut cfg = recover::demo::workers::WorkersConfig::new(format!("http://{target}/config"));
    cfg.count = 1;
    cfg.metrics_listen = Some(addr);
    let stop = CancellationToken::new();
    tokio::spawn(recover::demo::workers::run(cfg, stop.clone()));
    silent_and_half_head_are_closed(addr, DEFAULT_PLUS_SLACK, "workers metrics").await;
    stop.cancel();
}

#[tokio::test]
async fn recover_serve_closes_silent_connections() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_acting_on_nothing(dir.path(), Auth::Bearer("listener-token-0123456789"), "");
    let serve = start(&cfg, None).await;
    let addr = serve.addr;
    silent_and_half_head_are_closed(addr, DEFAULT_PLUS_SLACK, "recover serve").await;
}
