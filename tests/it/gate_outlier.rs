//! Latency outlier ejection with real upstreams on 127.0.0.1: four replicas behind the
//! gate, one made five times slower while traffic flows. The gate ejects it (visible in
//! its metrics), and once it is fast again readmits it with a weight that ramps back to
//! full.

use crate::support::gate::{flood, metrics, sample, start, TOKEN};
use axum::extract::State;
use axum::Router;
use recover::gate::balance::outlier::OutlierConfig;
use recover::gate::GateConfig;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A real HTTP replica whose delay can be changed while it runs.
struct Replica {
    url: String,
    authority: String,
    delay_ms: Arc<AtomicU64>,
    served: Arc<AtomicU64>,
    _stop: tokio_util::sync::DropGuard,
}

async fn replica(delay_ms: u64) -> Replica {
    let delay = Arc::new(AtomicU64::new(delay_ms));
    let served = Arc::new(AtomicU64::new(0));
    let app = Router::new()
        .fallback(
            |State((delay, served)): State<(Arc<AtomicU64>, Arc<AtomicU64>)>| async move {
                let ms = delay.load(Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                served.fetch_add(1, Ordering::SeqCst);
                "ok"
            },
        )
        .with_state((delay.clone(), served.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let s = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(s.cancelled_owned())
            .await;
    });
    Replica {
        url: format!("http://{addr}"),
        authority: addr.to_string(),
        delay_ms: delay,
        served,
        _stop: stop.drop_guard(),
    }
}

/// Poll until `check` holds, or fail after `within` naming what was awaited.
async fn until<F, Fut>(what: &str, within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_five_times_slower_is_ejected_then_readmitted_when_fast_again() {
    let mut reps = Vec::new();
    for _ in 0..4 {
        reps.push(replica(20).await);
    }
    let mut cfg = GateConfig::loopback(reps.iter().map(|r| r.url.clone()).collect());
    cfg.admin_token = Some(TOKEN.into());
    cfg.balance.outlier = Some(OutlierConfig {
        interval: Duration::from_secs(1),
        base_ejection: Duration::from_secs(2),
        ramp: Duration::from_secs(2),
        ..OutlierConfig::default()
    });
    let gate = start(cfg).await;
    let stop = CancellationToken::new();
    let (tally, load) = flood(gate.url("/"), 120.0, 12, stop.clone());
    let admin = gate.admin;
    let slow = &reps[1];
    let series = |name: &str| format!("{name}{{replica=\"{}\"}}", slow.authority);
    let (ejected, ejections, weight) = (
        series("recover_gate_upstream_ejected"),
        series("recover_gate_upstream_ejections_total"),
        series("recover_gate_upstream_weight"),
    );

    // Healthy: every replica gets traffic, nobody is ejected.
    until(
        "traffic on every replica",
        Duration::from_secs(20),
        || async { reps.iter().all(|r| r.served.load(Ordering::SeqCst) >= 20) },
    )
    .await;
    let m = metrics(admin).await;
    assert_eq!(sample(&m, &ejections), Some(0.0), "{m}");
    assert!(
        m.contains(
            r#"recover_gate_balancer_info{balancer="least-outstanding",outlier_ejection="on"} 1"#
        ),
        "{m}"
    );

    // Five times slower: ejected.
    slow.delay_ms.store(100, Ordering::SeqCst);
    until(
        "the slow replica ejected",
        Duration::from_secs(20),
        || async { sample(&metrics(admin).await, &ejected) == Some(1.0) },
    )
    .await;
    let m = metrics(admin).await;
    assert!(sample(&m, &ejections) >= Some(1.0), "{m}");
    assert_eq!(sample(&m, &weight), Some(0.0), "{m}");
    let served_at_ejection = slow.served.load(Ordering::SeqCst);

    // Fast again: readmitted at the end of its ejection, its weight ramps back to 1, and
    // it serves again. (Still slow, it would be ejected again for longer.)
    slow.delay_ms.store(20, Ordering::SeqCst);
    until(
        "the replica readmitted",
        Duration::from_secs(30),
        || async { sample(&metrics(admin).await, &ejected) == Some(0.0) },
    )
    .await;
    until("its weight back to 1", Duration::from_secs(30), || async {
        sample(&metrics(admin).await, &weight) == Some(1.0)
    })
    .await;
    until(
        "traffic on the readmitted replica",
        Duration::from_secs(20),
        || async { slow.served.load(Ordering::SeqCst) >= served_at_ejection + 20 },
    )
    .await;
    stop.cancel();
    let _ = load.await;
    let t = tally.snapshot();
    assert_eq!(t.other, 0, "{t:?}");
}
