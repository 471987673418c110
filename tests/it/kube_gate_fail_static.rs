//! A gate fails static, never open: three real gate replicas share a limit in the fake
//! cluster, each in front of its own real upstream on 127.0.0.1 that counts the requests
//! it holds at once. One replica is restarted while the API server refuses the gate's
//! calls: it comes back from its state file enforcing the share it last enforced, so no
//! upstream ever holds more than its replica's share. A new replica that cannot read its
//! limit at all refuses everything (429) and is not ready.

use crate::support::gate::{client, metrics, sample};
use crate::support::kube::gates::real_gate_with;
use crate::support::kube::*;
use axum::Router;
use recover::gate::limit::Limit;
use recover::platform::kube::KubePlatform;
use recover::platform::Platform;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// An upstream that holds each request 100 ms and counts how many it holds at once.
#[derive(Default)]
struct Held {
    now: AtomicU64,
    max: AtomicU64,
    total: AtomicU64,
}

async fn counting_upstream(stop: &CancellationToken) -> (SocketAddr, Arc<Held>) {
    let held = Arc::new(Held::default());
    let h = held.clone();
    let app = Router::new().fallback(move || {
        let h = h.clone();
        async move {
            let n = h.now.fetch_add(1, Ordering::SeqCst) + 1;
            h.max.fetch_max(n, Ordering::SeqCst);
            h.total.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(100)).await;
            h.now.fetch_sub(1, Ordering::SeqCst);
            "ok"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let s = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(s.cancelled_owned())
            .await;
    });
    (addr, held)
}

/// `n` clients each sending to `proxy` in a loop (a refusal: a short pause) until `stop`.
fn press(proxy: Arc<std::sync::Mutex<SocketAddr>>, n: usize, stop: &CancellationToken) {
    for _ in 0..n {
        let (proxy, stop) = (proxy.clone(), stop.clone());
        tokio::spawn(async move {
            let c = client();
            while !stop.is_cancelled() {
                let addr = *proxy.lock().unwrap();
                if c.status(&format!("http://{addr}/")).await != Some(200) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_restarted_while_the_api_refuses_it_never_admits_more_than_its_last_share() {
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    c.add_pod(pod(GATE, GATE_HASH, "g2", GATE, true)).await;
    let stop = CancellationToken::new();
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..3).map(|i| format!("{GATE}-{GATE_HASH}-g{i}")).collect();
    let mut gates = Vec::new();
    let mut helds = Vec::new();
    let mut proxies = Vec::new();
    for n in &names {
        let (addr, held) = counting_upstream(&stop).await;
        let state = dir.path().join(format!("{n}.json"));
        let g = real_gate_with(&c, n, &format!("http://{addr}"), Some(&state)).await;
        proxies.push(Arc::new(std::sync::Mutex::new(g.proxy)));
        gates.push((g, addr, state));
        helds.push(held);
    }
    // The controller sets a total of 6 in flight: 2 for each of the three replicas.
    let mut o = crate::kube_platform::options("ci");
    o.gate_apply_timeout = Duration::from_secs(20);
    let p = KubePlatform::new(c.client.clone(), o);
    let total = Limit {
        rate_per_s: None,
        burst: 1,
        max_in_flight: Some(6),
        note: Some("hold".into()),
        shadow: false,
    };
    p.gate()
        .set_limit(&total)
        .await
        .expect("in force on all three");
    for proxy in &proxies {
        press(proxy.clone(), 6, &stop);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The API server stops answering the gates; replica 1 restarts (its container: the
    // same pod, the same state file).
    c.refuse(GATE_SA);
    let (g1, addr1, state1) = gates.remove(1);
    drop(g1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let g1 = real_gate_with(&c, &names[1], &format!("http://{addr1}"), Some(&state1)).await;
    *proxies[1].lock().unwrap() = g1.proxy;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let m = metrics(g1.admin).await;
    assert_eq!(sample(&m, "recover_gate_limit_peers"), Some(3.0), "{m}");
    assert!(
        sample(&m, "recover_gate_limit_age_seconds").is_some(),
        "the limit's age is shown"
    );
    // A new replica that never read its limit: refuses everything, not ready.
    let (addr3, held3) = counting_upstream(&stop).await;
    let g3 = real_gate_with(&c, "recover-gate-new", &format!("http://{addr3}"), None).await;
    let http = client();
    for _ in 0..10 {
        assert_eq!(
            http.status(&format!("http://{}/", g3.proxy)).await,
            Some(429)
        );
    }
    assert_eq!(
        http.status(&format!("http://{}/readyz", g3.admin)).await,
        Some(503)
    );
    let m3 = metrics(g3.admin).await;
    assert_eq!(
        sample(&m3, "recover_gate_limit_age_seconds"),
        Some(f64::INFINITY),
        "{m3}"
    );
    stop.cancel();
    for (i, h) in helds.iter().enumerate() {
        let (max, total) = (h.max.load(Ordering::SeqCst), h.total.load(Ordering::SeqCst));
        println!("replica {i}: at most {max} in flight at once, {total} requests in all");
        assert!(total > 0, "replica {i} admitted nothing");
        assert!(
            max <= 2,
            "replica {i} admitted {max} at once, over its share of 2"
        );
    }
    assert_eq!(
        held3.total.load(Ordering::SeqCst),
        0,
        "a gate with no limit admitted"
    );
    drop(gates);
    drop(g1);
    drop(g3);
}
