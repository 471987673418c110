//! The limit the engine sets is the service's total, shared exactly by the gate replicas:
//! three real gates, each following the limit ConfigMap and the gate Service's
//! EndpointSlices in the fake cluster with its own Role, behind a client that spreads its
//! requests over them. The admitted total is the plan's rate, with three replicas, after
//! one goes away, and at the next ramp step. Measured in windows long enough that the
//! burst does not count; the figures are printed (`--no-capture`).

use crate::support::eventually;
use crate::support::gate::{metrics, sample, spread, upstream, AdmitLog};
use crate::support::kube::gates::real_gate;
use crate::support::kube::*;
use kube::api::{Api, DeleteParams};
use recover::gate::limit::Limit;
use recover::platform::kube::{KubeOptions, KubePlatform, Reach, Workload};
use recover::platform::Platform;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A total with the default burst (half a second of the rate): with a burst of one per
/// replica, a request arriving a little after its slot would cost the slot.
fn total(rate: f64) -> Limit {
    Limit {
        rate_per_s: Some(rate),
        burst: recover::gate::limit::default_burst(rate),
        max_in_flight: None,
        note: Some("ramp".into()),
        shadow: false,
    }
}

/// The admitted rate over a window of `secs` after `settle`.
async fn measure(log: &AdmitLog, settle: Duration, secs: u64) -> f64 {
    tokio::time::sleep(settle).await;
    let from = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    log.rate(from, Instant::now())
}

fn within_5_percent(what: &str, measured: f64, plan: f64) {
    let ratio = measured / plan;
    println!("{what}: admitted {measured:.2} req/s for a plan of {plan} req/s (ratio {ratio:.3})");
    assert!(
        (0.95..=1.05).contains(&ratio),
        "{what}: admitted {measured:.2} req/s, plan {plan} req/s (ratio {ratio:.3})"
    );
}

async fn peers(admin: std::net::SocketAddr) -> Option<f64> {
    sample(&metrics(admin).await, "recover_gate_limit_peers")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_three_gate_replicas_admit_the_plans_total_even_after_one_goes_away() {
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    c.add_pod(pod(GATE, GATE_HASH, "g2", GATE, true)).await;
    let up = upstream(Duration::ZERO).await;
    let names: Vec<String> = (0..3).map(|i| format!("{GATE}-{GATE_HASH}-g{i}")).collect();
    let mut gates = Vec::new();
    for n in &names {
        gates.push(real_gate(&c, n, &up.url()).await);
    }
    let mut o = KubeOptions::new(NS, Workload::Deployment(DEPLOY.to_string()));
    o.reach = Reach::ApiProxy;
    o.gate_apply_timeout = Duration::from_secs(15);
    let p = KubePlatform::new(c.client.clone(), o);
    let gate = p.gate();

    gate.set_limit(&total(30.0))
        .await
        .expect("applied by all three, shared");
    for g in &gates {
        let m = metrics(g.admin).await;
        assert_eq!(
            sample(&m, "recover_gate_limit_peers"),
            Some(3.0),
            "{}",
            g.pod
        );
        let rate = sample(&m, "recover_gate_limit_rate_per_second").unwrap();
        assert!((rate - 10.0).abs() < 1e-9, "{}: share {rate}", g.pod);
    }

    let urls = Arc::new(Mutex::new(
        gates
            .iter()
            .map(|g| format!("http://{}/", g.proxy))
            .collect::<Vec<_>>(),
    ));
    let stop = CancellationToken::new();
    let (log, load) = spread(urls.clone(), 150.0, 15, stop.clone());
    let three = measure(&log, Duration::from_secs(1), 6).await;

    // A gate replica goes away: its pod is deleted and the client stops reaching it.
    let gone = gates.pop().unwrap();
    urls.lock()
        .unwrap()
        .retain(|u| *u != format!("http://{}/", gone.proxy));
    drop(gone);
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.fake.clone(), NS);
    pods.delete(&names[2], &DeleteParams::default())
        .await
        .unwrap();
    let followed = eventually(Duration::from_secs(5), || async {
        peers(gates[0].admin).await == Some(2.0) && peers(gates[1].admin).await == Some(2.0)
    })
    .await;
    assert!(followed, "the remaining gates never took a half share each");
    let two = measure(&log, Duration::from_millis(500), 6).await;

    // The next ramp step, with two replicas left.
    gate.set_limit(&total(60.0))
        .await
        .expect("applied by the two left");
    let raised = measure(&log, Duration::from_secs(1), 6).await;
    stop.cancel();
    let _ = load.await;
    println!(
        "offered 150 req/s; rejected {}, failed {}",
        log.rejected.load(std::sync::atomic::Ordering::SeqCst),
        log.failed.load(std::sync::atomic::Ordering::SeqCst)
    );
    within_5_percent("3 gates, total 30/s", three, 30.0);
    within_5_percent("2 gates after one went away, total 30/s", two, 30.0);
    within_5_percent("2 gates, next ramp step 60/s", raised, 60.0);
    assert!(p.scrape_endpoints().await.is_ok());
}
