//! The gate never sends an admitted request twice. A real upstream on 127.0.0.1 answers
//! the first request on each connection and then, on the reused connection, reads the
//! next request whole and closes without answering: the case where a proxy that resends
//! "requests that got no answer" hands the service a second copy of something it may
//! already have acted on. The upstream counts every request it read; it must never count
//! more than the gate admitted, and a POST must reach it once.

use crate::support::gate::{limit, metrics, sample, start, TOKEN};
use crate::support::wire::{ok, raw, Got, Peer, Reply, Upstream};
use recover::gate::GateConfig;
use std::collections::HashMap;
use std::sync::Mutex;

/// Answers the first request on each connection; reads the second and closes silently.
async fn drops_every_second_request() -> Upstream {
    let per_conn: Mutex<HashMap<usize, u32>> = Mutex::default();
    Upstream::start(move |g: &Got| -> Reply {
        let mut seen = per_conn.lock().unwrap();
        let n = seen.entry(g.conn).or_insert(0);
        *n += 1;
        if *n == 1 {
            ok(format!("{} {}", g.head.method(), g.head.target()))
        } else {
            raw("", b"").then_close()
        }
    })
    .await
}

fn gate_config(up: &Upstream) -> GateConfig {
    let mut cfg = GateConfig::loopback(vec![format!("http://{}", up.addr)]);
    cfg.limit = limit(None, 1, None);
    cfg.admin_token = Some(TOKEN.to_string());
    cfg
}

/// Requests the gate admitted, whatever became of them (`admitted` counts only those
/// answered), plus every resend, which is admitted again.
fn admitted_by_gate(m: &str) -> f64 {
    let outcome = |o: &str| {
        sample(
            m,
            &format!(r#"recover_gate_requests_total{{outcome="{o}"}}"#),
        )
    };
    [
        "admitted",
        "upstream_error",
        "upstream_timeout",
        "client_gone",
    ]
    .iter()
    .map(|o| outcome(o).unwrap_or(0.0))
    .sum::<f64>()
        + sample(
            m,
            r#"recover_gate_upstream_resends_total{reason="closed_before_write"}"#,
        )
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_a_reused_connection_dropped_unanswered_is_not_sent_again() {
    let up = drops_every_second_request().await;
    let gate = start(gate_config(&up)).await;
    let mut client = Peer::connect(gate.proxy).await;
    client
        .send("GET /first HTTP/1.1\r\nhost: gate.test\r\n\r\n")
        .await;
    assert_eq!(client.response(false).await.head.status(), 200);
    // Goes out on the reused connection, which the upstream reads and closes.
    client
        .send("POST /pay HTTP/1.1\r\nhost: gate.test\r\ncontent-length: 5\r\n\r\n12345")
        .await;
    let resp = client.response(false).await;
    assert_eq!(resp.head.status(), 502, "{}", resp.text());
    let posts = up
        .got()
        .iter()
        .filter(|g| g.head.method() == "POST")
        .count();
    assert_eq!(posts, 1, "the upstream got the POST {posts} times");
    let m = metrics(gate.admin).await;
    assert_eq!(
        sample(
            &m,
            r#"recover_gate_upstream_resends_refused_total{reason="written"}"#
        ),
        Some(1.0)
    );
    assert_eq!(up.got().len() as f64, admitted_by_gate(&m));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_never_sees_more_requests_than_the_gate_admitted() {
    let up = drops_every_second_request().await;
    let gate = start(gate_config(&up)).await;
    let mut client = Peer::connect(gate.proxy).await;
    let mut statuses = Vec::new();
    for i in 0..40 {
        // Idempotent or not: once written, a request is never sent a second time.
        let method = if i % 3 == 0 { "POST" } else { "GET" };
        client
            .send(format!(
                "{method} /r{i} HTTP/1.1\r\nhost: gate.test\r\ncontent-length: 0\r\n\r\n"
            ))
            .await;
        statuses.push(client.response(false).await.head.status());
    }
    let got = up.got();
    let m = metrics(gate.admin).await;
    let admitted = admitted_by_gate(&m);
    assert_eq!(admitted, 40.0, "{m}");
    assert!(
        got.len() as f64 <= admitted,
        "the upstream read {} requests, the gate admitted {admitted}",
        got.len()
    );
    let mut targets: Vec<_> = got.iter().map(|g| g.head.target().to_string()).collect();
    targets.sort();
    let before = targets.len();
    targets.dedup();
    assert_eq!(
        targets.len(),
        before,
        "a request reached the upstream twice"
    );
    // Every second request went out on a reused connection the upstream dropped.
    assert_eq!(statuses.iter().filter(|&&s| s == 502).count(), 20);
    assert_eq!(statuses.iter().filter(|&&s| s == 200).count(), 20);
}
