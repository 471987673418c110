//! `recover demo config-service --slow-factor N --slow-after D` and `POST /admin/slow`: one
//! replica N times slower while it still passes its health checks, as a real process. The
//! work each request costs is read from the service's own histogram (it records the cost
//! it computed, not a measured time), so the check does not depend on this machine's speed.

use crate::support::demo::{free_addr, http, scrape, spawn, wait_http_ok};
use std::time::Duration;
use tokio::time::Instant;

const SUM: &str = "recover_demo_service_service_seconds_sum";
const COUNT: &str = "recover_demo_service_service_seconds_count";
const FACTOR: &str = "recover_demo_service_slow_factor";

/// The work time of the requests served since `(sum, count)`, in milliseconds per request.
async fn mean_cost_since(addr: std::net::SocketAddr, before: (f64, f64)) -> (f64, (f64, f64)) {
    let s = scrape(addr).await;
    let now = (s.get(SUM), s.get(COUNT));
    let n = now.1 - before.1;
    assert!(n > 0.0, "no request served");
    ((now.0 - before.0) / n * 1000.0, now)
}

async fn get_config(addr: std::net::SocketAddr, n: usize) {
    for _ in 0..n {
        let (status, _) = http("GET", &format!("http://{addr}/config"), None, "")
            .await
            .expect("GET /config");
        assert_eq!(status, 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_after_then_admin_slow_change_the_cost_of_every_request() {
    let addr = free_addr();
    let args: Vec<String> = [
        "demo",
        "config-service",
        "--listen",
        &addr.to_string(),
        "--cold-factor",
        "1",
        "--service-time",
        "20ms",
        "--slow-factor",
        "5",
        "--slow-after",
        "1s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let _svc = spawn("config-service", &args);
    wait_http_ok(&format!("http://{addr}/readyz"), Duration::from_secs(20)).await;

    // Before --slow-after: normal cost. Poll until the factor switches (after 1 s).
    let started = scrape(addr).await;
    let mut before = (started.get(SUM), started.get(COUNT));
    let mut normal_seen = false;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let factor = scrape(addr).await.get(FACTOR);
        if factor == 5.0 {
            break;
        }
        assert_eq!(factor, 1.0);
        get_config(addr, 1).await;
        let (mean, now) = mean_cost_since(addr, before).await;
        // A request served just as the factor switched may cost 5x; before it, 1x.
        if scrape(addr).await.get(FACTOR) == 1.0 {
            assert!((mean - 20.0).abs() < 1e-6, "normal cost {mean} ms");
            normal_seen = true;
        }
        before = now;
        assert!(Instant::now() < deadline, "--slow-after never applied");
    }
    assert!(normal_seen, "no request was served before the slowdown");

    // Five times slower, and still healthy and ready.
    let before = {
        let s = scrape(addr).await;
        (s.get(SUM), s.get(COUNT))
    };
    get_config(addr, 3).await;
    let (mean, before) = mean_cost_since(addr, before).await;
    assert!((mean - 100.0).abs() < 1e-6, "slowed cost {mean} ms");
    wait_http_ok(&format!("http://{addr}/readyz"), Duration::from_secs(1)).await;

    // Back to normal at run time.
    let url = format!("http://{addr}/admin/slow");
    let (status, body) = http("POST", &url, None, r#"{"factor": 1}"#).await.unwrap();
    assert_eq!((status, body.as_str()), (200, r#"{"slow_factor":1.0}"#));
    get_config(addr, 3).await;
    let (mean, _) = mean_cost_since(addr, before).await;
    assert!((mean - 20.0).abs() < 1e-6, "restored cost {mean} ms");

    // Bad input names the field and changes nothing.
    for bad in [r#"{"factor": 0.5}"#, r#"{"speed": 2}"#, "nope"] {
        let (status, body) = http("POST", &url, None, bad).await.unwrap();
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body.contains(r#""field":"factor""#), "{bad}: {body}");
    }
    assert_eq!(scrape(addr).await.get(FACTOR), 1.0);
}

#[test]
fn a_bad_slow_factor_names_the_flag() {
    let out = crate::support::bin()
        .args([
            "demo",
            "config-service",
            "--listen",
            "127.0.0.1:0",
            "--slow-factor",
            "0.2",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--slow-factor"), "{err}");
}
