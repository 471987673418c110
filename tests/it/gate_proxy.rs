//! The proxy over real sockets: it forwards method, path, query and body; a down
//! upstream is a 502 and a slow one a 504 (each counted), the deadline header tells the
//! upstream how long the gate will wait, and least-outstanding balancing starves a slow
//! replica of the traffic it cannot finish.

use crate::support::gate::*;
use recover::gate::deadline::now_epoch_ms;
use std::sync::atomic::Ordering;
use std::time::Duration;

fn epoch_ms() -> i64 {
    now_epoch_ms() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwards_requests_and_passes_the_deadline() {
    let up = upstream(Duration::ZERO).await;
    let mut cfg = config(&[&up], limit(None, 1, None));
    cfg.upstream_timeout = Duration::from_millis(1500);
    let gate = start(cfg).await;
    let c = client();
    let r = c
        .send(
            "POST",
            &gate.url("/config/a?b=1"),
            &[("x-attempt", "2")],
            "hello",
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, "POST /config/a?b=1 hello");
    // x-deadline-ms is when the gate stops waiting, in Unix epoch milliseconds.
    let left = up.seen.max_deadline_ms.load(Ordering::SeqCst) as i64 - epoch_ms();
    assert!(
        (900..=1500).contains(&left),
        "x-deadline-ms is {left} ms away"
    );
    // A client's tighter deadline is kept, as a duration or as an epoch deadline.
    c.send("GET", &gate.url("/"), &[("x-deadline-ms", "300")], "")
        .await
        .unwrap();
    let left = up.seen.min_deadline_ms.load(Ordering::SeqCst) as i64 - epoch_ms();
    assert!(left <= 300, "x-deadline-ms is {left} ms away");
    let theirs = (epoch_ms() + 200).to_string();
    c.send("GET", &gate.url("/"), &[("x-deadline-ms", &theirs)], "")
        .await
        .unwrap();
    let left = up.seen.min_deadline_ms.load(Ordering::SeqCst) as i64 - epoch_ms();
    assert!(left <= 200, "x-deadline-ms is {left} ms away");
    let m = metrics(gate.admin).await;
    assert_eq!(
        sample(
            &m,
            r#"recover_gate_attempts_total{kind="retry",method="x-attempt"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &m,
            r#"recover_gate_attempts_total{kind="first",method="client-address"}"#
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(&m, r#"recover_gate_upstream_responses_total{class="2xx"}"#),
        Some(3.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_down_upstream_is_a_502_and_the_gate_keeps_serving() {
    let (nothing, _held) = crate::support::refusing_addr();
    let mut cfg = recover::gate::GateConfig::loopback(vec![format!("http://{nothing}")]);
    cfg.admin_token = Some(TOKEN.into());
    let gate = start(cfg).await;
    let c = client();
    for _ in 0..3 {
        let r = c.get(&gate.url("/config")).await;
        assert_eq!(r.status, 502, "{}", r.body);
    }
    assert_eq!(c.get(&gate.admin_url("/healthz")).await.status, 200);
    let m = metrics(gate.admin).await;
    assert_eq!(
        sample(
            &m,
            r#"recover_gate_requests_total{outcome="upstream_error"}"#
        ),
        Some(3.0)
    );
    assert_eq!(
        sample(&m, r#"recover_gate_requests_total{outcome="admitted"}"#),
        Some(0.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_upstream_is_a_504_counted_as_timeout() {
    let up = upstream(Duration::from_secs(3)).await;
    let mut cfg = config(&[&up], limit(None, 1, None));
    cfg.upstream_timeout = Duration::from_millis(300);
    let gate = start(cfg).await;
    let started = std::time::Instant::now();
    let r = client().get(&gate.url("/")).await;
    assert_eq!(r.status, 504);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let m = metrics(gate.admin).await;
    assert_eq!(
        sample(
            &m,
            r#"recover_gate_requests_total{outcome="upstream_timeout"}"#
        ),
        Some(1.0)
    );
    assert_eq!(sample(&m, "recover_gate_in_flight"), Some(0.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_outstanding_sends_less_to_a_slow_replica() {
    let fast = upstream(Duration::ZERO).await;
    let slow = upstream(Duration::from_millis(200)).await;
    let gate = start(config(&[&fast, &slow], limit(None, 1, None))).await;
    let (tally, _) = flood_for(gate.url("/"), 400.0, 8, Duration::from_secs(2)).await;
    let (f, s) = (fast.count(), slow.count());
    assert_eq!(tally.other, 0, "{tally:?}");
    assert_eq!(f + s, tally.ok);
    // Round robin would split evenly; least outstanding gives the slow one only what it
    // can finish (about one request at a time).
    assert!(f > 100, "too little traffic to judge: fast {f}, slow {s}");
    assert!(s * 4 < f, "slow replica got {s}, fast {f}");
}
