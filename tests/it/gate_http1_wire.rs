//! HTTP/1.1 as the gate's clients and services see it on the wire: raw sockets on both
//! sides, exact bytes written, replies parsed by hand, and a scripted upstream that
//! records every request it received. These pin down the framing, connection reuse and
//! header handling that any implementation of the gate's data path must keep (keep-alive,
//! pipelining, bodies in every framing, HEAD/204/304, hop-by-hop headers, the deadline
//! header, rejected requests with bodies, malformed and oversized input).

use crate::support::gate::{self, put_limit, start, Gate, TOKEN};
use crate::support::wire::{chunked, echo, get, ok, pattern, raw, Framing, Peer, Reply, Upstream};
use recover::gate::deadline::now_epoch_ms;
use recover::gate::GateConfig;
use std::io;
use std::time::Duration;
use tokio::io::AsyncReadExt;

// ---------------------------------------------------------------------------------------
// Helpers for the cases.
// ---------------------------------------------------------------------------------------

fn config(up: &Upstream) -> GateConfig {
    let mut cfg = GateConfig::loopback(vec![format!("http://{}", up.addr)]);
    cfg.admin_token = Some(TOKEN.into());
    cfg
}

async fn gate_for(up: &Upstream) -> Gate {
    start(config(up)).await
}

// ---------------------------------------------------------------------------------------
// Connections: keep-alive, pipelining, closes on either side.
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_answers_every_request_over_one_upstream_connection() {
    let up = Upstream::start(echo).await;
    let gate = gate_for(&up).await;
    let mut c = Peer::connect(gate.proxy).await;
    for i in 0..3 {
        c.send(get(&format!("/k{i}"))).await;
        let r = c.response(false).await;
        assert_eq!(r.head.status(), 200, "{:?}", r.head);
        assert_eq!(r.text(), format!("GET /k{i}"));
    }
    assert_eq!(up.targets(), ["/k0", "/k1", "/k2"]);
    assert_eq!(up.accepted(), 1, "the upstream connection was not reused");
    assert!(up.got().iter().all(|g| g.conn == 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_answered_in_order() {
    let up = Upstream::start(echo).await;
    let gate = gate_for(&up).await;
    let mut c = Peer::connect(gate.proxy).await;
    c.send(format!("{}{}", get("/first"), get("/second"))).await;
    assert_eq!(c.response(false).await.text(), "GET /first");
    assert_eq!(c.response(false).await.text(), "GET /second");
    c.expect_nothing_for(Duration::from_millis(100)).await;
    assert_eq!(up.targets(), ["/first", "/second"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_closing_after_a_keep_alive_response_causes_no_errors() {
    // No `connection: close`: the upstream just hangs up after each response.
    let up = Upstream::start(|g| echo(g).then_close()).await;
    let gate = gate_for(&up).await;
    let mut c = Peer::connect(gate.proxy).await;
    for i in 0..3 {
        c.send(get(&format!("/c{i}"))).await;
        let r = c.response(false).await;
        assert_eq!(r.head.status(), 200, "{:?} {}", r.head, r.text());
        assert_eq!(r.text(), format!("GET /c{i}"));
    }
    assert_eq!(up.accepted(), 3);
    let conns: Vec<usize> = up.got().iter().map(|g| g.conn).collect();
    assert_eq!(conns, [0, 1, 2], "a request went to a closed connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_request_line_is_refused_and_the_gate_keeps_serving() {
    let up = Upstream::start(echo).await;
    let gate = gate_for(&up).await;
    let mut bad = Peer::connect(gate.proxy).await;
    bad.send(b"GARBAGE\r\n\r\n").await;
    match bad.head().await {
        Ok(Some(h)) => assert_eq!(h.status(), 400, "{h:?}"),
        Ok(None) => {} // closed without a word
        Err(e) => assert_ne!(e.kind(), io::ErrorKind::TimedOut), // reset
    }
    let mut good = Peer::connect(gate.proxy).await;
    good.send(get("/fine")).await;
    assert_eq!(good.response(false).await.text(), "GET /fine");
    assert_eq!(up.targets(), ["/fine"], "garbage reached the upstream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_1_0_request_without_host_is_answered_then_closed() {
    let up = Upstream::start(echo).await;
    let gate = gate_for(&up).await;
    let mut c = Peer::connect(gate.proxy).await;
    c.send(b"GET /old HTTP/1.0\r\n\r\n").await;
    let r = c.response(false).await;
    assert_eq!(r.head.status(), 200, "{:?}", r.head);
    assert_eq!(r.text(), "GET /old");
    if r.framing != Framing::UntilClose {
        c.expect_closed().await;
    }
    let got = up.got();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].head.all("host").len(), 1, "{:?}", got[0].head);
}

/// A head of `size` bytes gets 400 or 431 (or a closed connection), never reaches the
/// upstream, and the gate goes on serving other connections.
async fn a_huge_head_is_refused(size: usize) {
    let up = Upstream::start(echo).await;
    let gate = gate_for(&up).await;
    let mut c = Peer::connect(gate.proxy).await;
    let huge = "a".repeat(size);
    let req = format!("GET /huge HTTP/1.1\r\nhost: gate.test\r\nx-big: {huge}\r\n\r\n");
    // The gate may stop reading (and reset) before the head is all written.
    let _ = c.try_send(req.as_bytes()).await;
    match c.head().await {
        Ok(Some(h)) => assert!(matches!(h.status(), 400 | 431), "{h:?}"),
        Ok(None) => {}
        Err(e) => assert_ne!(e.kind(), io::ErrorKind::TimedOut),
    }
    let mut good = Peer::connect(gate.proxy).await;
    good.send(get("/after")).await;
    assert_eq!(good.response(false).await.text(), "GET /after");
    assert_eq!(up.targets(), ["/after"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_mb_request_head_is_refused_and_the_gate_keeps_serving() {
    a_huge_head_is_refused(1024 * 1024).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_kb_request_head_is_refused_and_the_gate_keeps_serving() {
    a_huge_head_is_refused(100 * 1024).await;
}

// ---------------------------------------------------------------------------------------
// Bodies in every framing, both ways.
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_content_length_bodies_arrive_byte_exact_both_ways() {
    let response = pattern(200 * 1024, 2);
    let r2 = response.clone();
    let up = Upstream::start(move |_| ok(&r2)).await;
    let gate = gate_for(&up).await;
    let request = pattern(100 * 1024, 1);
    let mut c = Peer::connect(gate.proxy).await;
    let mut bytes = format!(
        "POST /upload HTTP/1.1\r\nhost: gate.test\r\ncontent-type: application/octet-stream\r\ncontent-length: {}\r\n\r\n",
        request.len()
    )
    .into_bytes();
    bytes.extend_from_slice(&request);
    c.send(bytes).await;
    let r = c.response(false).await;
    assert_eq!(r.head.status(), 200);
    assert!(r.body == response, "response body differs");
    let got = up.got();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].head.method(), "POST");
    assert!(got[0].body == request, "request body differs upstream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_request_body_reaches_the_upstream_whole() {
    let up = Upstream::start(|g| ok(format!("{} bytes", g.body.len()))).await;
    let gate = gate_for(&up).await;
    let payload = pattern(20_000, 3);
    let mut c = Peer::connect(gate.proxy).await;
    let mut bytes =
        b"POST /chunks HTTP/1.1\r\nhost: gate.test\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    bytes.extend(chunked(&payload, &[1, 10, 4096, 3000, 17]));
    c.send(bytes).await;
    let r = c.response(false).await;
    assert_eq!(r.text(), "20000 bytes");
    let got = up.got();
    assert_eq!(got.len(), 1);
    assert!(got[0].body == payload, "chunked payload differs upstream");
    let h = &got[0].head;
    assert!(
        !(h.chunked() && h.has("content-length")),
        "both framings upstream: {h:?}"
    );
    // Follow-up on the same connection: the last-chunk was consumed, nothing left over.
    c.send(get("/next")).await;
    assert_eq!(c.response(false).await.text(), "0 bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_response_body_reaches_the_client_whole() {
    let payload = pattern(30_000, 4);
    let p2 = payload.clone();
    let up = Upstream::start(move |g| {
        if g.head.target() == "/chunks" {
            let mut body = chunked(&p2, &[5, 1000, 8192, 1, 300]);
            body.splice(
                0..0,
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec(),
            );
            Reply {
                bytes: body,
                close: false,
            }
        } else {
            echo(g)
        }
    })
    .await;
    let gate = gate_for(&up).await;
    let mut c = Peer::connect(gate.proxy).await;
    c.send(get("/chunks")).await;
    let r = c.response(false).await;
    assert_eq!(r.head.status(), 200);
    assert!(r.body == payload, "chunked payload differs at the client");
    c.send(get("/next")).await;
    assert_eq!(c.response(false).await.text(), "GET /next");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_response_has_its_length_but_no_body() {
    let up = Upstream::start(|g| {
        if g.head.method() == "HEAD" {
            raw(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 1234\r\n\r\n",
                b"",
            )
        } else {
            echo(g)
        }
    })
    .await;
    let gate = gate_for(&up).await;
    let mut c = Peer::connect(gate.proxy).await;
    c.send(b"HEAD /file HTTP/1.1\r\nhost: gate.test\r\n\r\n")
        .await;
    let r = c.response(true).await;
    assert_eq!(r.head.status(), 200);
    assert_eq!(r.head.get("content-length"), Some("1234"), "{:?}", r.head);
    // Any body bytes after the HEAD response would garble this one.
    c.send(get("/after")).await;
    assert_eq!(c.response(false).await.text(), "GET /after");
    assert_eq!(
        up.got().iter().map(|g| g.head.method()).collect::<Vec<_>>(),
        ["HEAD", "GET"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_content_and_not_modified_have_no_body_and_the_connection_goes_on() {
    let up = Upstream::start(|g| match g.head.target() {
        "/gone" => raw("HTTP/1.1 204 No Content\r\nx-r: 1\r\n\r\n", b""),
        "/same" => raw("HTTP/1.1 304 Not Modified\r\netag: \"v1\"\r\n\r\n", b""),
        _ => echo(g),
    })
    .await;
    let gate = gate_for(&up).await;
    let mut c = Peer::connect(gate.proxy).await;
    c.send(get("/gone")).await;
    let r = c.response(false).await;
    assert_eq!(r.head.status(), 204);
    assert_eq!(r.head.get("x-r"), Some("1"));
    assert!(!r.head.has("transfer-encoding"), "{:?}", r.head);
    c.send(b"GET /same HTTP/1.1\r\nhost: gate.test\r\nif-none-match: \"v1\"\r\n\r\n")
        .await;
    let r = c.response(false).await;
    assert_eq!(r.head.status(), 304);
    assert_eq!(r.head.get("etag"), Some("\"v1\""));
    assert!(!r.head.has("transfer-encoding"), "{:?}", r.head);
    c.send(get("/after")).await;
    assert_eq!(c.response(false).await.text(), "GET /after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_delimited_response_reaches_the_client_whole() {
    let payload = pattern(50_000, 5);
    let p2 = payload.clone();
    let up = Upstream::start(move |g| match g.head.target() {
        "/stream" => raw(
            "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-type: application/octet-stream\r\n\r\n",
            &p2,
        )
        .then_close(),
        _ => echo(g),
    })
    .await;
    let gate = gate_for(&up).await;
    let mut c = Peer::connect(gate.proxy).await;
    c.send(get("/stream")).await;
    let r = c.response(false).await;
    assert_eq!(r.head.status(), 200);
    assert!(
        r.body == payload,
        "payload differs ({} bytes)",
        r.body.len()
    );
    // Either the gate ended the body by closing, or it framed it and the connection goes on.
    if r.framing == Framing::UntilClose {
        return;
    }
    if r.head.token_in("connection", "close") {
        c.expect_closed().await;
        return;
    }
    c.send(get("/after")).await;
    assert_eq!(c.response(false).await.text(), "GET /after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_1_0_upstream_response_without_length_reaches_the_client() {
    let up = Upstream::start(|g| {
        raw(
            "HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\n",
            format!("old {}", g.head.target()).as_bytes(),
        )
        .then_close()
    })
    .await;
    let gate = gate_for(&up).await;
    let mut c = Peer::connect(gate.proxy).await;
    c.send(get("/legacy")).await;
    let r = c.response(false).await;
    assert_eq!(r.head.status(), 200);
    assert_eq!(r.text(), "old /legacy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expect_100_continue_gets_the_body_through() {
    let up = Upstream::start(|g| ok(format!("got {}", String::from_utf8_lossy(&g.body)))).await;
    let gate = gate_for(&up).await;
    let mut c = Peer::connect(gate.proxy).await;
    c.send(b"POST /e HTTP/1.1\r\nhost: gate.test\r\ncontent-length: 11\r\nexpect: 100-continue\r\n\r\n")
        .await;
    // A client waits a while for the go-ahead, then sends the body anyway.
    let mut chunk = [0u8; 1024];
    if let Ok(read) = tokio::time::timeout(Duration::from_secs(1), c.stream.read(&mut chunk)).await
    {
        let n = read.expect("read");
        c.buf.extend_from_slice(&chunk[..n]);
        let interim = String::from_utf8_lossy(&c.buf).into_owned();
        assert!(
            interim.starts_with("HTTP/1.1 100"),
            "a final response before the body: {interim:?}"
        );
    }
    c.send(b"hello world").await;
    let r = c.response(false).await;
    assert_eq!(r.head.status(), 200);
    assert_eq!(r.text(), "got hello world");
    assert!(up.got()[0].body == b"hello world");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_expect_100_request_gets_its_answer_without_sending_the_body() {
    let up = Upstream::start(echo).await;
    let mut cfg = config(&up);
    cfg.limit = gate::limit(Some(0.0), 1, None); // block all
    let gate = start(cfg).await;
    let mut c = Peer::connect(gate.proxy).await;
    c.send(b"POST /e HTTP/1.1\r\nhost: gate.test\r\ncontent-length: 11\r\nexpect: 100-continue\r\n\r\n")
        .await;
    // No go-ahead: the final answer comes at once, so the client never uploads the body.
    let h = c
        .head()
        .await
        .expect("an answer within 5 s, without the body")
        .expect("an answer, not a closed connection");
    assert_eq!(h.status(), 429, "{h:?}");
    assert!(up.got().is_empty(), "the upstream saw {:?}", up.targets());
}

// ---------------------------------------------------------------------------------------
// Headers.
// ---------------------------------------------------------------------------------------

/// Send `wire` on a fresh connection and expect a 400 with the connection closed; then a
/// clean request on another connection is the only thing the upstream ever received.
async fn refused_and_nothing_forwarded(wire: &[u8]) {
    let up = Upstream::start(echo).await;
    let gate = gate_for(&up).await;
    let mut c = Peer::connect(gate.proxy).await;
    c.send(wire).await;
    let r = c.response(false).await;
    assert_eq!(r.head.status(), 400, "{:?} {}", r.head, r.text());
    assert!(r.head.token_in("connection", "close"), "{:?}", r.head);
    c.expect_closed().await;
    let mut clean = Peer::connect(gate.proxy).await;
    clean.send(get("/after")).await;
    assert_eq!(clean.response(false).await.text(), "GET /after");
    assert_eq!(
        up.targets(),
        ["/after"],
        "the refused request (or what it carried) reached the upstream: {:?}",
        up.got()
    );
}

/// The smuggling probe: `Connection: content-length` would have the gate drop the length
/// it framed the body by, so the upstream would read the body as fifty more requests that
/// the rate limit never counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_naming_content_length_cannot_smuggle_requests_past_the_limit() {
    let smuggled: String = (0..50).map(|i| get(&format!("/smuggled{i}"))).collect();
    let wire = format!(
        "POST /carrier HTTP/1.1\r\nhost: gate.test\r\nconnection: content-length\r\n\
         content-length: {}\r\n\r\n{smuggled}",
        smuggled.len()
    );
    refused_and_nothing_forwarded(wire.as_bytes()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_naming_transfer_encoding_is_refused() {
    let mut wire =
        b"POST /c HTTP/1.1\r\nhost: gate.test\r\nconnection: keep-alive, Transfer-Encoding\r\n\
                     transfer-encoding: chunked\r\n\r\n"
            .to_vec();
    wire.extend(chunked(get("/smuggled").as_bytes(), &[7, 100]));
    refused_and_nothing_forwarded(&wire).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_naming_host_is_refused() {
    refused_and_nothing_forwarded(
        b"GET /h HTTP/1.1\r\nhost: gate.test\r\nconnection: host\r\n\r\n",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_1_1_request_needs_exactly_one_host() {
    refused_and_nothing_forwarded(b"GET /none HTTP/1.1\r\nx-a: 1\r\n\r\n").await;
    refused_and_nothing_forwarded(b"GET /two HTTP/1.1\r\nhost: a.test\r\nhost: b.test\r\n\r\n")
        .await;
    refused_and_nothing_forwarded(b"GET /two HTTP/1.0\r\nhost: a.test\r\nhost: b.test\r\n\r\n")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfer_encoding_on_http_1_0_is_refused() {
    let mut wire =
        b"POST /old HTTP/1.0\r\nhost: gate.test\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    wire.extend(chunked(b"hello", &[5]));
    refused_and_nothing_forwarded(&wire).await;
}

/// A response whose Connection header names its own framing keeps that framing: the
/// client must find the end of the body where the gate found it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_never_loses_its_framing_to_its_connection_header() {
    let up = Upstream::start(|_| {
        raw(
            "HTTP/1.1 200 OK\r\nconnection: content-length, x-gone\r\nx-gone: 1\r\ncontent-length: 2\r\n\r\n",
            b"ok",
        )
    })
    .await;
    let gate = gate_for(&up).await;
    let mut c = Peer::connect(gate.proxy).await;
    for _ in 0..2 {
        c.send(get("/r")).await;
        let r = c.response(false).await;
        assert_eq!(r.text(), "ok");
        assert_eq!(r.head.all("content-length"), ["2"], "{:?}", r.head);
        assert!(!r.head.has("x-gone"), "{:?}", r.head);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hop_by_hop_headers_stop_at_the_gate_and_end_to_end_ones_pass() {
    let up = Upstream::start(|_| {
        raw(
            "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nkeep-alive: timeout=5\r\nx-custom: 1\r\nset-cookie: a=1; Path=/\r\nset-cookie: b=2; Path=/\r\n\r\n",
            b"ok",
        )
    })
    .await;
    let gate = gate_for(&up).await;
    let mut c = Peer::connect(gate.proxy).await;
    c.send(
        "GET /h HTTP/1.1\r\nhost: gate.test\r\nconnection: keep-alive, x-foo\r\nkeep-alive: timeout=5\r\n\
         proxy-connection: keep-alive\r\nte: trailers\r\nx-custom: 1\r\nx-dup: a\r\nx-dup: b\r\n\r\n",
    )
    .await;
    let r = c.response(false).await;
    assert_eq!(r.text(), "ok");
    assert!(!r.head.has("keep-alive"), "to the client: {:?}", r.head);
    assert_eq!(r.head.all("x-custom"), ["1"]);
    assert_eq!(r.head.all("set-cookie"), ["a=1; Path=/", "b=2; Path=/"]);
    let got = up.got();
    let h = &got[0].head;
    for name in ["keep-alive", "proxy-connection", "te", "trailer", "upgrade"] {
        assert!(!h.has(name), "{name} reached the upstream: {h:?}");
    }
    assert!(!h.token_in("connection", "x-foo"), "{h:?}");
    assert_eq!(h.all("x-custom"), ["1"]);
    assert_eq!(h.all("x-dup"), ["a", "b"]);
    // The connection itself stays usable.
    c.send(get("/again")).await;
    assert_eq!(c.response(false).await.text(), "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_named_in_connection_stop_at_the_gate() {
    let up = Upstream::start(|_| {
        raw(
            "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: x-bar\r\nx-bar: 1\r\n\r\n",
            b"ok",
        )
    })
    .await;
    let gate = gate_for(&up).await;
    let mut c = Peer::connect(gate.proxy).await;
    c.send("GET /n HTTP/1.1\r\nhost: gate.test\r\nconnection: x-foo\r\nx-foo: 1\r\n\r\n")
        .await;
    let r = c.response(false).await;
    assert_eq!(r.text(), "ok");
    let got = up.got();
    assert!(!got[0].head.has("x-foo"), "upstream: {:?}", got[0].head);
    assert!(!r.head.has("x-bar"), "client: {:?}", r.head);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_goes_upstream_as_sent_and_absolute_targets_become_origin_form() {
    let up = Upstream::start(echo).await;
    let gate = gate_for(&up).await;
    let mut c = Peer::connect(gate.proxy).await;
    c.send("GET /x HTTP/1.1\r\nhost: svc.example:8080\r\n\r\n")
        .await;
    assert_eq!(c.response(false).await.text(), "GET /x");
    c.send("GET http://example.test/p?q=1 HTTP/1.1\r\nhost: example.test\r\n\r\n")
        .await;
    assert_eq!(c.response(false).await.text(), "GET /p?q=1");
    let got = up.got();
    assert_eq!(got[0].head.all("host"), ["svc.example:8080"]);
    assert_eq!(got[1].head.target(), "/p?q=1");
    assert_eq!(got[1].head.all("host"), ["example.test"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_header_goes_upstream_once_and_keeps_the_tighter_value() {
    let up = Upstream::start(echo).await;
    let mut cfg = config(&up);
    cfg.upstream_timeout = Duration::from_secs(2);
    let gate = start(cfg).await;
    let mut c = Peer::connect(gate.proxy).await;

    let before = now_epoch_ms();
    c.send(get("/d")).await;
    c.response(false).await;
    let after = now_epoch_ms();
    let got = up.got();
    let values = got[0].head.all("x-deadline-ms");
    assert_eq!(values.len(), 1, "{:?}", got[0].head);
    let v: u64 = values[0].parse().expect("epoch ms");
    assert!(
        v > before + 1000 && v <= after + 2000,
        "x-deadline-ms {v}: {} ms after the send, {} ms after the reply",
        v as i64 - before as i64,
        v as i64 - after as i64
    );

    let before = now_epoch_ms();
    c.send("GET /tight HTTP/1.1\r\nhost: gate.test\r\nx-deadline-ms: 300\r\n\r\n")
        .await;
    c.response(false).await;
    let after = now_epoch_ms();
    let got = up.got();
    let values = got[1].head.all("x-deadline-ms");
    assert_eq!(values.len(), 1, "{:?}", got[1].head);
    let v: u64 = values[0].parse().expect("epoch ms");
    assert!(
        v >= before + 200 && v <= after + 300,
        "x-deadline-ms {v}: {} ms after the send, {} ms after the reply",
        v as i64 - before as i64,
        v as i64 - after as i64
    );
}

// ---------------------------------------------------------------------------------------
// Rejections.
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_request_body_is_never_read_as_a_request() {
    let up = Upstream::start(echo).await;
    let mut cfg = config(&up);
    cfg.limit = gate::limit(Some(0.0), 1, None); // block all
    let gate = start(cfg).await;
    let mut c = Peer::connect(gate.proxy).await;
    // The body looks like a request: a gate that left it unread would answer it.
    let smuggled = "GET /smuggled HTTP/1.1\r\nhost: gate.test\r\n\r\n";
    c.send(format!(
        "POST /blocked HTTP/1.1\r\nhost: gate.test\r\ncontent-length: {}\r\n\r\n{smuggled}",
        smuggled.len()
    ))
    .await;
    let r = c.response(false).await;
    assert_eq!(r.head.status(), 429, "{:?}", r.head);
    let retry: u64 = r
        .head
        .get("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no Retry-After seconds: {:?}", r.head));
    assert!(retry >= 1);
    assert!(up.got().is_empty(), "the upstream saw {:?}", up.targets());

    // Open the gate; the next request on this connection must be the one we send now.
    let opened = put_limit(
        &gate,
        r#"{"rate_per_s": null, "burst": 1, "max_in_flight": null}"#,
    )
    .await;
    assert_eq!(opened.status, 200, "{}", opened.body);
    if r.head.token_in("connection", "close") {
        c.expect_closed().await;
        c = Peer::connect(gate.proxy).await;
    }
    c.send(get("/second")).await;
    let r = c.response(false).await;
    assert_eq!(r.head.status(), 200, "{:?} {}", r.head, r.text());
    assert_eq!(r.text(), "GET /second");
    c.expect_nothing_for(Duration::from_millis(200)).await;
    assert_eq!(up.targets(), ["/second"]);
}

/// A service that sends a response head and part of its body, then stalls: after the
/// upstream timeout the client gets what came and then a close, so it can tell the
/// response was cut short instead of waiting forever for the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_body_that_stalls_is_cut_off_after_the_upstream_timeout() {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 4096];
        let _ = s.read(&mut buf).await;
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc")
            .await;
        tokio::time::sleep(Duration::from_secs(30)).await;
    });
    let mut cfg = GateConfig::loopback(vec![format!("http://{addr}")]);
    cfg.upstream_timeout = Duration::from_millis(300);
    let gate = start(cfg).await;
    let mut c = tokio::net::TcpStream::connect(gate.proxy).await.unwrap();
    c.write_all(get("/stalls").as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut got)).await;
    assert!(
        matches!(read, Ok(Ok(_))),
        "the client was left waiting: {read:?}"
    );
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with("HTTP/1.1 200") && text.ends_with("\r\n\r\nabc"),
        "{text}"
    );
}

/// A client that asks for a big response and then stops reading is let go after the idle
/// timeout, and the service connection behind it closed, instead of both waiting forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_let_go_after_the_idle_timeout() {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (cut_off, service_saw) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 4096];
        let _ = s.read(&mut buf).await;
        let head = b"HTTP/1.1 200 OK\r\ncontent-length: 1073741824\r\n\r\n";
        let mut written = s.write_all(head).await;
        let block = vec![b'x'; 64 * 1024];
        while written.is_ok() {
            written = s.write_all(&block).await;
        }
        let _ = cut_off.send(());
    });
    let mut cfg = GateConfig::loopback(vec![format!("http://{addr}")]);
    cfg.client_idle_timeout = Duration::from_millis(300);
    let gate = start(cfg).await;
    let mut c = tokio::net::TcpStream::connect(gate.proxy).await.unwrap();
    c.write_all(get("/big").as_bytes()).await.unwrap();
    // Never read: the gate's writes to us stall once the socket buffers are full.
    let closed = tokio::time::timeout(Duration::from_secs(10), service_saw).await;
    assert!(
        matches!(closed, Ok(Ok(()))),
        "the service connection stayed open behind a client that stopped reading"
    );
    drop(c);
}

/// Garbage and half-valid requests from many clients (random framing headers, lengths,
/// chunk sizes, bytes): no gate thread panics, and the gate answers a clean request after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_bytes_from_clients_never_panic_the_gate() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::AsyncWriteExt;
    static GATE_PANICS: AtomicUsize = AtomicUsize::new(0);
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // Only the gate's own threads count: a failing assertion elsewhere is not ours.
        if std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with("gate-proxy"))
        {
            GATE_PANICS.fetch_add(1, Ordering::SeqCst);
        }
        previous(info);
    }));
    let up = Upstream::start(echo).await;
    let gate = Arc::new(gate_for(&up).await);
    let pieces: [&[u8]; 14] = [
        b"GET /x HTTP/1.1\r\n",
        b"POST /y HTTP/1.1\r\n",
        b"host: h\r\n",
        b"content-length: 5\r\n",
        b"content-length: 99999999999999999999\r\n",
        b"transfer-encoding: chunked\r\n",
        b"expect: 100-continue\r\n",
        b"connection: close, x\r\n",
        b"\r\n",
        b"5\r\nhello\r\n",
        b"fffffffffffffff\r\n",
        b"0\r\n\r\n",
        b"\x00\xff :: \r\r\n",
        b"HTTP/1.1 200 OK\r\n",
    ];
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..300 {
        let mut wire = Vec::new();
        for _ in 0..1 + next(12) {
            if next(5) == 0 {
                wire.extend((0..next(40)).map(|_| next(256) as u8));
            } else {
                wire.extend_from_slice(pieces[next(pieces.len())]);
            }
        }
        let addr = gate.proxy;
        clients.spawn(async move {
            let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
                return;
            };
            let _ = s.write_all(&wire).await;
            let _ = s.shutdown().await;
            let mut sink = Vec::new();
            let _ =
                tokio::time::timeout(Duration::from_millis(500), s.read_to_end(&mut sink)).await;
        });
    }
    while clients.join_next().await.is_some() {}
    assert_eq!(
        GATE_PANICS.load(Ordering::SeqCst),
        0,
        "a gate thread panicked"
    );
    let mut c = Peer::connect(gate.proxy).await;
    c.send(get("/after")).await;
    assert_eq!(c.response(false).await.head.status(), 200);
}
