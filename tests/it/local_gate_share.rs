//! The local platform with several gates: the limit the engine sets is the total, and each
//! `recover gate` process listed in the inventory gets its share. Two real gate processes
//! behind a client that spreads its requests over both admit the plan's rate in all, and
//! after one goes away the next ramp step gives the other the whole of it. Measured in
//! windows long enough that the burst does not count; figures printed (`--no-capture`).

use crate::support::gate::{spread, upstream, AdmitLog};
use recover::gate::limit::{default_burst, Limit};
use recover::platform::local::LocalPlatform;
use recover::platform::Platform;
use recover::util::child::{spawn_guarded, GuardOptions};
use recover::util::net::wait_http_ok;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use crate::support::BIN;
const TOKEN: &str = "local-share-token-0123456789";

fn total(rate: f64) -> Limit {
    Limit {
        rate_per_s: Some(rate),
        burst: default_burst(rate),
        max_in_flight: Some(64),
        note: None,
        shadow: false,
    }
}

async fn measure(log: &AdmitLog, settle: Duration, secs: u64) -> f64 {
    tokio::time::sleep(settle).await;
    let from = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    log.rate(from, Instant::now())
}

fn within_5_percent(what: &str, measured: f64, plan: f64) {
    let ratio = measured / plan;
    println!("{what}: admitted {measured:.2} req/s for a plan of {plan} req/s (ratio {ratio:.3})");
    assert!((0.95..=1.05).contains(&ratio), "{what}: ratio {ratio:.3}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_two_local_gates_admit_the_plans_total_and_the_survivor_takes_it_all() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gate.token"), TOKEN).unwrap();
    let up = upstream(Duration::ZERO).await;
    let mut guards = Vec::new();
    let mut proxies = Vec::new();
    let mut inv = String::from("name: shared\nstate_dir: state\nreplicas:\n");
    let svc = crate::support::ports::loopback_addr();
    inv.push_str(&format!(
        "  - name: svc-0\n    command: [{BIN:?}, demo, config-service, --listen, \"{svc}\"]\n    admin_url: http://{svc}\n    metrics_url: http://{svc}/metrics\n    readiness_url: http://{svc}/readyz\n"
    ));
    inv.push_str("gates:\n");
    for _ in 0..2 {
        let (proxy, admin) = (
            crate::support::ports::loopback_addr(),
            crate::support::ports::loopback_addr(),
        );
        let mut cmd = Command::new(BIN);
        cmd.args([
            "gate",
            "--listen",
            &proxy.to_string(),
            "--admin-listen",
            &admin.to_string(),
        ])
        .args(["--upstream", &up.url(), "--admin-token-file"])
        .arg(dir.path().join("gate.token"))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        guards.push(spawn_guarded("gate", cmd, GuardOptions::default()).unwrap());
        wait_http_ok(&format!("http://{admin}/healthz"), Duration::from_secs(20))
            .await
            .expect("gate up");
        inv.push_str(&format!(
            "  - admin_url: http://{admin}\n    token_file: gate.token\n"
        ));
        proxies.push(format!("http://{proxy}/"));
    }
    let inventory = dir.path().join("inventory.yaml");
    std::fs::write(&inventory, inv).unwrap();
    let p = LocalPlatform::from_file(&inventory).unwrap();
    assert_eq!(
        p.scrape_endpoints()
            .await
            .unwrap()
            .iter()
            .filter(|e| e.role == "gate")
            .count(),
        2
    );
    let gate = p.gate();

    gate.set_limit(&total(40.0))
        .await
        .expect("both gates take their share");
    let back = gate.get_limit().await.unwrap();
    assert!((back.rate_per_s.unwrap() - 40.0).abs() < 1e-9, "{back:?}");
    assert_eq!(back.max_in_flight, Some(64));

    let urls = Arc::new(Mutex::new(proxies.clone()));
    let stop = CancellationToken::new();
    let (log, load) = spread(urls.clone(), 160.0, 16, stop.clone());
    let two = measure(&log, Duration::from_secs(1), 6).await;

    // One gate process goes away mid-ramp; the client stops reaching it, and the next
    // ramp step gives the survivor the whole limit.
    drop(guards.pop());
    urls.lock().unwrap().truncate(1);
    gate.set_limit(&total(60.0))
        .await
        .expect("the survivor takes it all");
    let one = measure(&log, Duration::from_secs(1), 6).await;
    stop.cancel();
    let _ = load.await;
    within_5_percent("2 local gates, total 40/s", two, 40.0);
    within_5_percent("1 local gate left, next step 60/s", one, 60.0);
}
