//! Shared pieces of the gate's integration tests: a real counting upstream (axum on
//! 127.0.0.1), an in-process gate on ephemeral ports, and a paced load generator.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Router;
use recover::gate::limit::Limit;
use recover::gate::{BoundGate, GateConfig};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

pub use super::loopback_http::{Http, Reply};

pub const TOKEN: &str = "test-token-123";

/// What an upstream saw.
#[derive(Default)]
pub struct Seen {
    pub requests: AtomicU64,
    /// The smallest x-deadline-ms received (u64::MAX: none yet).
    pub min_deadline_ms: AtomicU64,
    pub max_deadline_ms: AtomicU64,
}

pub struct Upstream {
    pub addr: SocketAddr,
    pub seen: Arc<Seen>,
    stop: CancellationToken,
}

impl Upstream {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
    pub fn count(&self) -> u64 {
        self.seen.requests.load(Ordering::SeqCst)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A real HTTP upstream that counts every request, waits `delay`, and echoes
/// `METHOD path?query body` so tests can see what was forwarded.
pub async fn upstream(delay: Duration) -> Upstream {
    let seen = Arc::new(Seen {
        min_deadline_ms: AtomicU64::new(u64::MAX),
        ..Seen::default()
    });
    let app = Router::new()
        .fallback(
            |State((seen, delay)): State<(Arc<Seen>, Duration)>,
             method: axum::http::Method,
             uri: axum::http::Uri,
             headers: HeaderMap,
             body: axum::body::Bytes| async move {
                seen.requests.fetch_add(1, Ordering::SeqCst);
                if let Some(ms) = headers
                    .get("x-deadline-ms")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<u64>().ok())
                {
                    seen.min_deadline_ms.fetch_min(ms, Ordering::SeqCst);
                    seen.max_deadline_ms.fetch_max(ms, Ordering::SeqCst);
                }
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                (
                    StatusCode::OK,
                    format!("{method} {uri} {}", String::from_utf8_lossy(&body)),
                )
            },
        )
        .with_state((seen.clone(), delay));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let s = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(s.cancelled_owned())
            .await;
    });
    Upstream { addr, seen, stop }
}

/// A gate running in this process; stopped when dropped.
pub struct Gate {
    pub proxy: SocketAddr,
    pub admin: SocketAddr,
    stop: CancellationToken,
}

impl Gate {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.proxy, path)
    }
    pub fn admin_url(&self, path: &str) -> String {
        format!("http://{}{}", self.admin, path)
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

pub fn config(upstreams: &[&Upstream], limit: Limit) -> GateConfig {
    let mut cfg = GateConfig::loopback(upstreams.iter().map(|u| u.url()).collect());
    cfg.limit = limit;
    cfg.admin_token = Some(TOKEN.to_string());
    cfg
}

pub async fn start(cfg: GateConfig) -> Gate {
    run(BoundGate::bind(cfg).await.expect("gate binds"))
}

/// Run a gate already bound: connections may wait in its listen backlog before it runs.
pub fn run(bound: BoundGate) -> Gate {
    let (proxy, admin) = (bound.proxy_addr(), bound.admin_addr());
    let stop = CancellationToken::new();
    let s = stop.clone();
    tokio::spawn(async move { bound.run(Vec::new(), s).await });
    Gate { proxy, admin, stop }
}

pub fn limit(rate: Option<f64>, burst: u32, max_in_flight: Option<u32>) -> Limit {
    Limit {
        rate_per_s: rate,
        burst,
        max_in_flight,
        note: None,
        shadow: false,
    }
}

pub fn client() -> Http {
    Http::default()
}

impl Http {
    pub async fn get(&self, url: &str) -> Reply {
        self.send("GET", url, &[], "").await.unwrap()
    }

    pub async fn status(&self, url: &str) -> Option<u16> {
        self.send("GET", url, &[], "").await.ok().map(|r| r.status)
    }
}

/// Responses a flood got, by status.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    pub ok: u64,
    pub rejected: u64,
    pub other: u64,
}

#[derive(Default)]
pub struct LiveTally {
    pub ok: AtomicU64,
    pub rejected: AtomicU64,
    pub other: AtomicU64,
}

impl LiveTally {
    pub fn snapshot(&self) -> Tally {
        Tally {
            ok: self.ok.load(Ordering::SeqCst),
            rejected: self.rejected.load(Ordering::SeqCst),
            other: self.other.load(Ordering::SeqCst),
        }
    }
}

/// Offer about `rate` req/s to `url` from `workers` paced workers until `stop`.
pub fn flood(
    url: String,
    rate: f64,
    workers: usize,
    stop: CancellationToken,
) -> (Arc<LiveTally>, tokio::task::JoinHandle<()>) {
    let tally = Arc::new(LiveTally::default());
    let t = tally.clone();
    let handle = tokio::spawn(async move {
        let client = client();
        let period = Duration::from_secs_f64(workers as f64 / rate);
        let mut tasks = Vec::new();
        for i in 0..workers {
            let (client, url, t, stop) = (client.clone(), url.clone(), t.clone(), stop.clone());
            // Stagger the workers so the offered load is smooth, not clumped on one tick.
            let offset = period.mul_f64(i as f64 / workers as f64);
            tasks.push(tokio::spawn(async move {
                let mut tick =
                    tokio::time::interval_at(tokio::time::Instant::now() + offset, period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                while !stop.is_cancelled() {
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        _ = tick.tick() => {}
                    }
                    match client.status(&url).await {
                        Some(200) => t.ok.fetch_add(1, Ordering::SeqCst),
                        Some(429) => t.rejected.fetch_add(1, Ordering::SeqCst),
                        _ => t.other.fetch_add(1, Ordering::SeqCst),
                    };
                }
            }));
        }
        for task in tasks {
            let _ = task.await;
        }
    });
    (tally, handle)
}

/// Run a flood for `d` and return the tally and the wall time it took.
pub async fn flood_for(url: String, rate: f64, workers: usize, d: Duration) -> (Tally, Duration) {
    let stop = CancellationToken::new();
    let started = Instant::now();
    let (tally, handle) = flood(url, rate, workers, stop.clone());
    tokio::time::sleep(d).await;
    stop.cancel();
    let _ = handle.await;
    (tally.snapshot(), started.elapsed())
}

pub async fn put_limit(gate: &Gate, body: &str) -> Reply {
    let auth = format!("Bearer {TOKEN}");
    client()
        .send(
            "PUT",
            &gate.admin_url("/admin/limit"),
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
            ],
            body,
        )
        .await
        .unwrap()
}

/// What `GET /admin/limit` of the gate whose admin API is `admin` says: the limit and
/// version in force and this replica's share.
pub async fn admin_limit(admin: SocketAddr) -> serde_json::Value {
    let auth = format!("Bearer {TOKEN}");
    client()
        .send(
            "GET",
            &format!("http://{admin}/admin/limit"),
            &[("authorization", &auth)],
            "",
        )
        .await
        .unwrap()
        .json()
}

pub async fn metrics(admin: SocketAddr) -> String {
    client().get(&format!("http://{admin}/metrics")).await.body
}

/// The value of one sample line, e.g. `recover_gate_requests_total{outcome="admitted"}`.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// When each admitted (200) answer arrived, for clients spread over several gates.
#[derive(Default)]
pub struct AdmitLog {
    pub admitted: std::sync::Mutex<Vec<Instant>>,
    pub rejected: AtomicU64,
    pub failed: AtomicU64,
}

impl AdmitLog {
    /// Admitted per second over `[from, to)`.
    pub fn rate(&self, from: Instant, to: Instant) -> f64 {
        let n = self
            .admitted
            .lock()
            .unwrap()
            .iter()
            .filter(|t| **t >= from && **t < to)
            .count();
        n as f64 / to.duration_since(from).as_secs_f64()
    }
}

/// Offer about `rate` req/s from `workers` paced workers, each request to the next URL of
/// `urls` in turn (a client-side round robin over gate replicas), until `stop`. `urls` may
/// change while it runs (a replica gone).
pub fn spread(
    urls: Arc<std::sync::Mutex<Vec<String>>>,
    rate: f64,
    workers: usize,
    stop: CancellationToken,
) -> (Arc<AdmitLog>, tokio::task::JoinHandle<()>) {
    let log = Arc::new(AdmitLog::default());
    let l = log.clone();
    let handle = tokio::spawn(async move {
        let client = client();
        let period = Duration::from_secs_f64(workers as f64 / rate);
        let next = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for i in 0..workers {
            let (client, urls, l, stop, next) = (
                client.clone(),
                urls.clone(),
                l.clone(),
                stop.clone(),
                next.clone(),
            );
            let offset = period.mul_f64(i as f64 / workers as f64);
            tasks.push(tokio::spawn(async move {
                let mut tick =
                    tokio::time::interval_at(tokio::time::Instant::now() + offset, period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                while !stop.is_cancelled() {
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        _ = tick.tick() => {}
                    }
                    let url = {
                        let urls = urls.lock().unwrap();
                        if urls.is_empty() {
                            continue;
                        }
                        let k = next.fetch_add(1, Ordering::SeqCst) as usize % urls.len();
                        urls[k].clone()
                    };
                    match client.status(&url).await {
                        Some(200) => l.admitted.lock().unwrap().push(Instant::now()),
                        Some(429) => {
                            l.rejected.fetch_add(1, Ordering::SeqCst);
                        }
                        _ => {
                            l.failed.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                }
            }));
        }
        for t in tasks {
            let _ = t.await;
        }
    });
    (log, handle)
}

/// A loopback gate config with its client connection caps, in all and per address.
pub fn capped(up: &Upstream, total: usize, per_address: usize) -> GateConfig {
    let mut cfg = GateConfig::loopback(vec![up.url()]);
    cfg.client_limits.max_connections = total;
    cfg.client_limits.max_connections_per_address = per_address;
    cfg
}

/// Open a connection from `from` and show it is served (and stays open, kept alive).
pub async fn served(from: &str, gate: &Gate, path: &str) -> super::wire::Peer {
    let mut p = super::wire::Peer::connect_from(from, gate.proxy).await;
    p.send(super::wire::get(path)).await;
    let r = p.response(false).await;
    assert_eq!(r.head.status(), 200, "{from} {path}: {:?}", r.head);
    p
}

/// The usable CPUs when there are at least two (else moves cannot happen: say so).
pub fn two_cpus() -> Option<Vec<usize>> {
    let allowed = recover::gate::placement::allowed_cpus().expect("the CPUs this test may use");
    if allowed.len() < 2 {
        eprintln!("one usable CPU: no worker is bound, no connection moves, nothing to tell apart");
        return None;
    }
    Some(allowed)
}

/// Which worker holds each open connection now.
pub async fn open_on(gate: &Gate, workers: usize) -> Vec<f64> {
    let m = metrics(gate.admin).await;
    (0..workers)
        .map(|w| {
            let series = format!(r#"recover_gate_worker_connections{{worker="{w}"}}"#);
            sample(&m, &series).unwrap_or_else(|| panic!("no {series} in\n{m}"))
        })
        .collect()
}
