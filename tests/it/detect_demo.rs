//! `recover detect` against the real demo system: config service, gate and workers as real
//! processes on loopback. The text parser reads the real binaries' `/metrics`; the built-in
//! signal set and the `stuck-overload` runbook's expressions both judge a healthy system
//! healthy; a service that is down reads as a trigger (replicas not ready), never as zeros.

use crate::support::eventually;
use recover::metrics::scrape::text;
use recover::util::child::{spawn_guarded, ChildGuard, GuardOptions};
use recover::util::net::wait_http_ok;
use std::net::SocketAddr;
use std::process::{Output, Stdio};
use std::time::Duration;

fn spawn(name: &str, args: &[String]) -> ChildGuard {
    let mut cmd = crate::support::bin();
    cmd.args(args).stdout(Stdio::null()).stderr(Stdio::null());
    spawn_guarded(name, cmd, GuardOptions::default()).expect("spawn")
}

async fn page(url: &str) -> String {
    let client = recover::util::http::client(Duration::from_secs(2)).unwrap();
    client.get(url).send().await.unwrap().text().await.unwrap()
}

fn detect(args: &[String]) -> (Option<i32>, serde_json::Value, String) {
    let out: Output = crate::support::bin()
        .arg("detect")
        .args(args)
        .args(["--output", "json"])
        .output()
        .expect("run recover detect");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    (out.status.code(), v, stderr)
}

fn names(page: &str) -> Vec<String> {
    text::parse(page)
        .unwrap_or_else(|e| panic!("real exposition did not parse: {e}\n{page}"))
        .samples
        .into_iter()
        .map(|s| s.name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_detect_reads_the_real_demo_system() {
    recover::util::http::ensure_tls_provider();
    let [svc, gate, admin, workers]: [SocketAddr; 4] =
        std::array::from_fn(|_| crate::support::ports::loopback_addr());
    let mut service = spawn(
        "service",
        &[
            "demo".into(),
            "config-service".into(),
            "--listen".into(),
            svc.to_string(),
        ],
    );
    let _gate = spawn(
        "gate",
        &[
            "gate".into(),
            "--listen".into(),
            gate.to_string(),
            "--admin-listen".into(),
            admin.to_string(),
            "--upstream".into(),
            format!("http://{svc}"),
        ],
    );
    wait_http_ok(&format!("http://{svc}/healthz"), Duration::from_secs(15))
        .await
        .unwrap();
    wait_http_ok(&format!("http://{admin}/healthz"), Duration::from_secs(15))
        .await
        .unwrap();
    let _workers = spawn(
        "workers",
        &[
            "demo".into(),
            "workers".into(),
            "--target".into(),
            format!("http://{gate}"),
            "--count".into(),
            "40".into(),
            "--interval".into(),
            "2s".into(),
            "--metrics-listen".into(),
            workers.to_string(),
        ],
    );
    wait_http_ok(
        &format!("http://{workers}/metrics"),
        Duration::from_secs(15),
    )
    .await
    .unwrap();
    // Let the fleet settle into its polling rate; the labelled series appear with the
    // first requests, which a loaded machine may delay further.
    tokio::time::sleep(Duration::from_secs(2)).await;
    eventually(Duration::from_secs(20), || async {
        let has = |names: Vec<String>, n: &str| names.iter().any(|x| x == n);
        has(
            names(&page(&format!("http://{admin}/metrics")).await),
            "recover_gate_requests_total",
        ) && has(
            names(&page(&format!("http://{svc}/metrics")).await),
            "recover_demo_service_completions_total",
        ) && has(
            names(&page(&format!("http://{workers}/metrics")).await),
            "recover_demo_workers_attempts_total",
        )
    })
    .await;

    // The parser against the real binaries' pages.
    let g = names(&page(&format!("http://{admin}/metrics")).await);
    for n in [
        "recover_gate_requests_total",
        "recover_gate_in_flight",
        "recover_gate_limit_rate_per_second",
        "recover_gate_upstream_latency_seconds_bucket",
    ] {
        assert!(g.iter().any(|x| x == n), "gate page lacks {n}: {g:?}");
    }
    let s = names(&page(&format!("http://{svc}/metrics")).await);
    for n in [
        "recover_demo_service_requests_total",
        "recover_demo_service_queue_depth",
        "recover_demo_service_completions_total",
        "recover_demo_service_service_seconds_bucket",
    ] {
        assert!(s.iter().any(|x| x == n), "service page lacks {n}: {s:?}");
    }
    let w = names(&page(&format!("http://{workers}/metrics")).await);
    assert!(
        w.iter().any(|x| x == "recover_demo_workers_attempts_total"),
        "{w:?}"
    );

    let targets = vec![
        "--metrics-url".to_string(),
        format!("gate=http://{admin}/metrics"),
        "--metrics-url".into(),
        format!("service=http://{svc}/metrics"),
        "--metrics-url".into(),
        format!("clients=http://{workers}/metrics"),
        "--observe".into(),
        "6s".into(),
    ];
    // Built-in signals: healthy, with the offered rate near the fleet's 40 / 2 s = 20 req/s.
    let (code, v, err) = detect(&targets);
    assert_eq!(code, Some(0), "{v:#}\n{err}");
    assert_eq!(v["verdict"], "healthy");
    let arrival = v["arrival_rate"]
        .as_f64()
        .unwrap_or_else(|| panic!("{v:#}"));
    assert!(
        (10.0..=30.0).contains(&arrival),
        "offered {arrival}/s, expected about 20"
    );

    // The stuck-overload runbook's own expressions work on the scrape source too.
    let mut with_runbook = targets.clone();
    with_runbook.extend(["--runbook".to_string(), "stuck-overload".into()]);
    let (code, v, err) = detect(&with_runbook);
    assert_eq!(code, Some(0), "{v:#}\n{err}");

    // The service goes down: that is a trigger (replica not ready), not a zero goodput.
    service.stop(Duration::from_secs(2));
    let mut short = targets.clone();
    short[7] = "3s".into();
    let (code, v, err) = detect(&short);
    assert_eq!(code, Some(11), "{v:#}\n{err}");
    assert_eq!(v["verdict"], "triggered");
    let text = v.to_string();
    assert!(text.contains("not ready"), "{text}");
}
