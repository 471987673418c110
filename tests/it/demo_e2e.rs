//! The demo system as real processes on loopback: a few seconds of outage leave the config
//! service stuck, a plain restart does not help, a gate shedding 20% does not help, and a
//! gate admitting capacity_cold / k (with the backlog drained) does. Every outcome is read
//! from the services' own `/metrics`. The numbers are `recover::demo::defaults`.

use crate::support::demo::*;
use recover::demo::defaults;
use std::time::{Duration, Instant};

/// A service that starts with an outage (`--startup-delay`, the trigger) and the fleet
/// polling it from the same moment; returns once the service is back and stuck.
async fn stuck_behind(
    service_addr: std::net::SocketAddr,
    target: &str,
) -> (
    Service,
    std::net::SocketAddr,
    recover::util::child::ChildGuard,
) {
    let service = Service::start(
        service_addr,
        &humantime::format_duration(defaults::OUTAGE).to_string(),
    );
    let workers_metrics = free_addr();
    let workers = start_workers(target, workers_metrics);
    service.wait_ready(Duration::from_secs(30)).await;
    // Let the burst turn into overload and the whole fleet fall into the retry loop.
    tokio::time::sleep(Duration::from_secs(8)).await;
    (service, workers_metrics, workers)
}

/// (a) An outage of a few seconds, with demand at 20% of warm capacity, leaves the service
/// stuck: goodput under 10% of demand from 5 s to 60 s after it is back, although the
/// retrying fleet offers LESS than warm capacity (only k > 1 keeps it there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_demo_outage_leaves_the_service_stuck() {
    let addr = free_addr();
    let mut service = Service::start(addr, "0s");
    service.wait_ready(Duration::from_secs(30)).await;
    let workers_metrics = free_addr();
    let _workers = start_workers(&format!("http://{addr}"), workers_metrics);

    // Healthy first: the fleet's demand is served.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let healthy = window(addr, workers_metrics, 5).await;
    assert!(
        healthy.polls_ok > 0.8 * defaults::demand(),
        "not healthy before the trigger: {healthy:?}"
    );
    assert_eq!(healthy.overloaded, 0.0, "{healthy:?}");

    // The trigger: the service is restarted and unavailable for a few seconds.
    service.guard.stop(Duration::from_millis(200));
    service = Service::start(
        addr,
        &humantime::format_duration(defaults::OUTAGE).to_string(),
    );
    service.wait_ready(Duration::from_secs(30)).await;
    let back = Instant::now();

    tokio::time::sleep(Duration::from_secs(5)).await;
    let stuck = window(addr, workers_metrics, 55).await;
    assert!(back.elapsed() >= Duration::from_secs(60));
    assert_stuck(&stuck, "after the outage");
    assert!(
        stuck.arrivals < defaults::capacity_warm(),
        "the fleet offers {:.1}/s, not below warm capacity: the claim that only k keeps it stuck is not tested",
        stuck.arrivals
    );
    assert!(
        stuck.queue_depth > 200.0,
        "backlog should keep growing: {stuck:?}"
    );
}

/// (b) A plain restart (kill, start again, cold) puts it straight back into the stuck state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_demo_plain_restart_gets_stuck_again() {
    let (mut service, workers_metrics, _workers) = {
        let addr = free_addr();
        stuck_behind(addr, &format!("http://{addr}")).await
    };
    let before = window(service.addr, workers_metrics, 5).await;
    assert_stuck(&before, "before the restart");

    let addr = service.addr;
    service.guard.stop(Duration::from_millis(200));
    service = Service::start(addr, "0s");
    service.wait_ready(Duration::from_secs(30)).await;
    let fresh = scrape(addr).await;
    assert!(
        fresh.get("recover_demo_service_warm_fraction") < 0.5,
        "restart should be cold"
    );

    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = window(addr, workers_metrics, 20).await;
    assert_stuck(&after, "after a plain restart");
}

/// (c) A gate admitting 80% of the arriving rate (shedding 20%) does not recover it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_demo_gate_shedding_20_percent_does_not_recover() {
    let service_addr = free_addr();
    let gate = Gate::start(service_addr).await;
    let gate_url = format!("http://{}", gate.addr);
    let (service, workers_metrics, _workers) = stuck_behind(service_addr, &gate_url).await;
    let arriving = gate.arriving_rate(4).await;
    assert!(
        arriving > 0.5 * defaults::retry_loop_rate(),
        "arriving {arriving:.1}/s"
    );

    let rate = 0.8 * arriving;
    // Burst of one second's worth, so the limiter really admits its rate: the fleet's
    // fixed 1 s retries arrive in waves, and with a burst of a tenth of the rate it admits
    // a fraction of it between waves (measured: 11-19 of 64 req/s), which sheds far more
    // than 20% and recovers the service by accident.
    gate.set_rate(rate, rate.ceil() as u32).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let w = window(service.addr, workers_metrics, 20).await;
    assert!(
        w.arrivals > 0.8 * rate,
        "the gate admitted {:.1}/s, not its rate {rate:.1}/s: {w:?}",
        w.arrivals
    );
    assert_stuck(
        &w,
        &format!("behind a gate at {rate:.1}/s (80% of {arriving:.1}/s)"),
    );
    let rejected = scrape(gate.admin)
        .await
        .get("recover_gate_requests_total{outcome=\"rejected_rate\"}");
    assert!(rejected > 0.0, "the gate shed nothing");
}

/// (d) A gate admitting capacity_cold / k, with the backlog drained, recovers it within
/// seconds: goodput back at demand, no worker left in a retry loop, service not overloaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_demo_gate_at_cold_capacity_over_k_recovers() {
    let service_addr = free_addr();
    let gate = Gate::start(service_addr).await;
    let gate_url = format!("http://{}", gate.addr);
    let (service, workers_metrics, _workers) = stuck_behind(service_addr, &gate_url).await;
    assert_stuck(
        &window(service.addr, workers_metrics, 4).await,
        "before the gate",
    );

    let rate = defaults::recovery_rate();
    // Burst of one second's worth: the drain answers the whole backlog at once, so the
    // fleet's fixed 1 s retries come back in synchronized waves; with a burst of a tenth
    // of the rate the limiter idles between waves and admits about half the rate.
    gate.set_rate(rate, rate.ceil() as u32).await;
    let drained = service.post("/admin/drain").await;
    assert!(
        drained["drained"].as_u64().unwrap_or(0) > 0,
        "nothing drained: {drained}"
    );

    let start = Instant::now();
    loop {
        let w = scrape(workers_metrics).await;
        if w.get("recover_demo_workers_in_retry_loop") == 0.0 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "workers still retrying 30 s after the gate: {w:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!(
        "every worker back to normal polling {:?} after the gate",
        start.elapsed()
    );
    let w = window(service.addr, workers_metrics, 8).await;
    assert!(
        w.polls_ok > 0.85 * defaults::demand(),
        "goodput not back at demand: {w:?}"
    );
    assert!(w.attempts < 1.2 * w.polls_ok, "still retrying: {w:?}");
    assert_eq!(w.overloaded, 0.0, "{w:?}");
    assert!(w.in_retry_loop <= 2.0, "{w:?}");
}
