//! Request heads that parsers read differently, over real sockets on both sides: an empty
//! Transfer-Encoding (or an empty element in its list) beside a Content-Length or alone,
//! which must be refused and never reach the service; an absolute-form target, whose host
//! must be the Host the service sees; empty lines before a request line, which must not
//! keep a connection open past its head deadline; and a head dripped a byte per packet,
//! which must still be read to the same request.

use crate::support::gate::{start, TOKEN};
use crate::support::wire::{echo, get, Peer, Upstream};
use recover::gate::GateConfig;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn config(up: &Upstream) -> GateConfig {
    let mut cfg = GateConfig::loopback(vec![format!("http://{}", up.addr)]);
    cfg.admin_token = Some(TOKEN.into());
    cfg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_transfer_encoding_or_an_empty_coding_is_refused_before_the_upstream() {
    let up = Upstream::start(echo).await;
    let gate = start(config(&up)).await;
    let cases = [
        "transfer-encoding: \r\ncontent-length: 3\r\n\r\nabc",
        "transfer-encoding: ,\r\ncontent-length: 3\r\n\r\nabc",
        "content-length: 3\r\ntransfer-encoding:  , \r\n\r\nabc",
        "transfer-encoding: ,chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        "transfer-encoding: chunked,\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        "transfer-encoding: \r\n\r\n",
    ];
    for case in cases {
        let mut c = Peer::connect(gate.proxy).await;
        c.send(format!("POST /te HTTP/1.1\r\nhost: gate.test\r\n{case}"))
            .await;
        let r = c.response(false).await;
        assert_eq!(r.head.status(), 400, "{case:?}: {:?}", r.head);
        c.expect_closed().await;
    }
    let mut c = Peer::connect(gate.proxy).await;
    c.send(get("/after")).await;
    assert_eq!(c.response(false).await.head.status(), 200);
    assert_eq!(
        up.targets(),
        ["/after"],
        "a refused request reached the upstream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absolute_form_request_reaches_the_upstream_with_the_targets_host() {
    let up = Upstream::start(echo).await;
    let gate = start(config(&up)).await;
    let mut c = Peer::connect(gate.proxy).await;
    c.send("GET http://target.test:8080/a?b=1 HTTP/1.1\r\nhost: client.test\r\n\r\n")
        .await;
    assert_eq!(c.response(false).await.text(), "GET /a?b=1");
    c.send("GET http://user@other.test?q HTTP/1.1\r\nhost: client.test\r\n\r\n")
        .await;
    assert_eq!(c.response(false).await.text(), "GET /?q");
    let got = up.got();
    assert_eq!(got[0].head.all("host"), ["target.test:8080"]);
    assert_eq!(got[1].head.all("host"), ["other.test"]);
}

/// Empty lines are dropped as they arrive (so they cannot grow the buffer a head is parsed
/// from) but begin a head all the same: a client sending nothing else gets its 408 at the
/// head deadline, as one trickling a real head does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_lines_before_a_request_line_do_not_outlive_the_head_deadline() {
    let up = Upstream::start(echo).await;
    let mut cfg = config(&up);
    cfg.client_limits.request_head_timeout = Duration::from_millis(600);
    cfg.client_limits.first_byte_timeout = Duration::from_millis(600);
    let gate = start(cfg).await;
    let mut s = tokio::net::TcpStream::connect(gate.proxy).await.unwrap();
    let t0 = Instant::now();
    let mut answer = Vec::new();
    // Ten seconds of empty lines at 20 a second, unless the gate closes first.
    for _ in 0..200 {
        if s.write_all(b"\r\n").await.is_err() {
            break;
        }
        let mut buf = [0u8; 512];
        match tokio::time::timeout(Duration::from_millis(50), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    let held = t0.elapsed();
    let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text:?} after {held:?}");
    assert!(held < Duration::from_secs(5), "held open for {held:?}");
    // An empty line before a real request is still allowed (RFC 9112 §2.2).
    let mut c = Peer::connect(gate.proxy).await;
    c.send(format!("\r\n\n{}", get("/after-blank"))).await;
    assert_eq!(c.response(false).await.text(), "GET /after-blank");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_dripped_a_byte_per_packet_is_read_as_one_request() {
    let up = Upstream::start(echo).await;
    let gate = start(config(&up)).await;
    let mut c = Peer::connect(gate.proxy).await;
    c.stream.set_nodelay(true).unwrap();
    let wire = format!(
        "GET /drip HTTP/1.1\r\nhost: gate.test\r\nx-long: {}\r\n\r\n",
        "v".repeat(300)
    );
    for b in wire.as_bytes() {
        c.stream.write_all(&[*b]).await.unwrap();
        tokio::task::yield_now().await;
    }
    assert_eq!(c.response(false).await.text(), "GET /drip");
    assert_eq!(up.targets(), ["/drip"]);
}
