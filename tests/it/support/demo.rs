//! Shared pieces of the demo system's integration tests: spawning `recover demo ...` and
//! `recover gate` as real processes on loopback, scraping their `/metrics`, and measuring
//! rates over a window of real time.

use recover::demo::defaults;
use recover::util::child::{spawn_guarded, ChildGuard, GuardOptions};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use super::loopback_http::Http;

pub const TOKEN: &str = "demo-test-token";

/// Start `recover <args>` in its own process group; stopped when the guard drops.
pub fn spawn(name: &str, args: &[String]) -> ChildGuard {
    let mut cmd = crate::support::bin();
    cmd.args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    spawn_guarded(name, cmd, GuardOptions::default()).expect("spawn recover")
}

/// One scrape of a Prometheus text endpoint: `name{labels}` -> value.
#[derive(Debug, Clone, Default)]
pub struct Scrape(pub HashMap<String, f64>);

impl Scrape {
    /// The series with exactly this key (`name` or `name{label="v"}`); 0 if absent.
    pub fn get(&self, key: &str) -> f64 {
        self.0.get(key).copied().unwrap_or(0.0)
    }

    /// Sum of every series of metric `name`, whatever its labels.
    pub fn sum(&self, name: &str) -> f64 {
        self.0
            .iter()
            .filter(|(k, _)| k.as_str() == name || k.starts_with(&format!("{name}{{")))
            .map(|(_, v)| v)
            .sum()
    }
}

/// One request with a JSON content type. None if it could not be sent or answered in time.
pub async fn http(
    method: &str,
    url: &str,
    bearer: Option<&str>,
    body: &str,
) -> Option<(u16, String)> {
    let auth = bearer.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(a) = &auth {
        headers.push(("authorization", a));
    }
    let r = Http::default()
        .send(method, url, &headers, body)
        .await
        .ok()?;
    Some((r.status, r.body))
}

/// Poll `url` until it answers 2xx, or panic after `within`.
pub async fn wait_http_ok(url: &str, within: Duration) {
    if let Err(e) = recover::util::net::wait_http_ok(url, within).await {
        panic!("{e}");
    }
}

pub async fn scrape(addr: SocketAddr) -> Scrape {
    let (status, text) = http("GET", &format!("http://{addr}/metrics"), None, "")
        .await
        .expect("scrape /metrics");
    assert_eq!(status, 200, "GET /metrics on {addr}");
    let mut map = HashMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        if let Some((key, value)) = line.rsplit_once(' ') {
            if let Ok(v) = value.parse::<f64>() {
                map.insert(key.to_string(), v);
            }
        }
    }
    Scrape(map)
}

pub const USEFUL: &str = "recover_demo_service_completions_total{kind=\"useful\"}";
pub const ABANDONED: &str = "recover_demo_service_completions_total{kind=\"abandoned\"}";
pub const POLLS_OK: &str = "recover_demo_workers_polls_total{outcome=\"ok\"}";

/// Rates over a window, from the service's and the workers' own metrics.
#[derive(Debug)]
pub struct Window {
    /// Demanded polls that succeeded, per second: the clients' goodput.
    pub polls_ok: f64,
    /// HTTP attempts per second, all outcomes.
    pub attempts: f64,
    /// Arrivals at the service per second.
    pub arrivals: f64,
    pub useful: f64,
    pub abandoned: f64,
    /// Workers in a retry loop at the end of the window.
    pub in_retry_loop: f64,
    /// Service state at the end of the window.
    pub queue_depth: f64,
    pub overloaded: f64,
}

/// Measure for `secs` (the service must not restart meanwhile).
pub async fn window(service: SocketAddr, workers: SocketAddr, secs: u64) -> Window {
    let (s0, w0) = (scrape(service).await, scrape(workers).await);
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let (s1, w1) = (scrape(service).await, scrape(workers).await);
    let t = secs as f64;
    let rate = |a: &Scrape, b: &Scrape, k: &str| (b.get(k) - a.get(k)) / t;
    Window {
        polls_ok: rate(&w0, &w1, POLLS_OK),
        attempts: (w1.sum("recover_demo_workers_attempts_total")
            - w0.sum("recover_demo_workers_attempts_total"))
            / t,
        arrivals: rate(&s0, &s1, "recover_demo_service_requests_total"),
        useful: rate(&s0, &s1, USEFUL),
        abandoned: rate(&s0, &s1, ABANDONED),
        in_retry_loop: w1.get("recover_demo_workers_in_retry_loop"),
        queue_depth: s1.get("recover_demo_service_queue_depth"),
        overloaded: s1.get("recover_demo_service_overloaded"),
    }
}

/// Stuck: the clients get under 10% of their demand, the service does mostly wasted work.
pub fn assert_stuck(w: &Window, what: &str) {
    let demand = defaults::demand();
    assert!(
        w.polls_ok < 0.1 * demand,
        "{what}: goodput {:.1}/s is not under 10% of demand {demand:.1}/s: {w:?}",
        w.polls_ok
    );
    assert!(
        w.abandoned > 5.0 * w.useful.max(0.1),
        "{what}: the service is not mostly doing abandoned work: {w:?}"
    );
    assert_eq!(w.overloaded, 1.0, "{what}: service not overloaded: {w:?}");
    assert!(
        w.in_retry_loop >= 0.9 * defaults::WORKERS as f64,
        "{what}: the fleet is not in its retry loop: {w:?}"
    );
}

/// The victim service on its own port.
pub struct Service {
    pub addr: SocketAddr,
    pub guard: ChildGuard,
}

impl Service {
    /// Start `recover demo config-service` with the default numbers.
    pub fn start(addr: SocketAddr, startup_delay: &str) -> Service {
        let args: Vec<String> = [
            "demo",
            "config-service",
            "--listen",
            &addr.to_string(),
            "--startup-delay",
            startup_delay,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        Service {
            addr,
            guard: spawn("config-service", &args),
        }
    }

    pub async fn wait_ready(&self, within: Duration) {
        wait_http_ok(&format!("http://{}/readyz", self.addr), within).await;
    }

    pub async fn post(&self, path: &str) -> serde_json::Value {
        let (status, body) = http("POST", &format!("http://{}{path}", self.addr), None, "")
            .await
            .expect("POST");
        assert_eq!(status, 200, "POST {path}: {body}");
        serde_json::from_str(&body).expect("JSON answer")
    }
}

/// `recover demo workers` with the default numbers against `target`, metrics on `metrics`.
pub fn start_workers(target: &str, metrics: SocketAddr) -> ChildGuard {
    let args: Vec<String> = [
        "demo",
        "workers",
        "--target",
        target,
        "--metrics-listen",
        &metrics.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    spawn("workers", &args)
}

/// `recover gate`, unlimited, in front of `upstream`; admin API with [`TOKEN`].
pub struct Gate {
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    _guard: ChildGuard,
    _token_dir: tempfile::TempDir,
}

impl Gate {
    pub async fn start(upstream: SocketAddr) -> Gate {
        let dir = tempfile::tempdir().expect("tempdir");
        let token = dir.path().join("token");
        std::fs::write(&token, TOKEN).expect("write token");
        let (addr, admin) = (free_addr(), free_addr());
        let args: Vec<String> = vec![
            "gate".into(),
            "--listen".into(),
            addr.to_string(),
            "--upstream".into(),
            format!("http://{upstream}"),
            "--admin-listen".into(),
            admin.to_string(),
            "--admin-token-file".into(),
            token.display().to_string(),
        ];
        let guard = spawn("gate", &args);
        wait_http_ok(&format!("http://{admin}/healthz"), Duration::from_secs(20)).await;
        Gate {
            addr,
            admin,
            _guard: guard,
            _token_dir: dir,
        }
    }

    /// Arrivals at the gate per second over `secs`. Counted from the attempts counter,
    /// which the gate increments on arrival: a request whose client leaves before the
    /// upstream answers gets no `recover_gate_requests_total` outcome.
    pub async fn arriving_rate(&self, secs: u64) -> f64 {
        let a = scrape(self.admin).await.sum("recover_gate_attempts_total");
        tokio::time::sleep(Duration::from_secs(secs)).await;
        let b = scrape(self.admin).await.sum("recover_gate_attempts_total");
        (b - a) / secs as f64
    }

    pub async fn set_rate(&self, rate: f64, burst: u32) {
        let body = serde_json::json!({
            "rate_per_s": rate, "burst": burst, "max_in_flight": null, "note": "demo e2e test"
        });
        let (status, answer) = http(
            "PUT",
            &format!("http://{}/admin/limit", self.admin),
            Some(TOKEN),
            &body.to_string(),
        )
        .await
        .expect("PUT /admin/limit");
        assert_eq!(status, 200, "PUT /admin/limit: {answer}");
    }
}

pub fn free_addr() -> SocketAddr {
    crate::support::ports::loopback_addr()
}
