//! The PromQL source against a REAL Prometheus server (Debian package `prometheus`).
//!
//! The test serves a real prometheus-client exposition on loopback (a counter climbing at
//! 50/s and a histogram of 30 ms observations), starts `prometheus` scraping it every
//! second, and checks that the PromQL source and the scrape source agree: rates within
//! 10% of each other and of 50/s, p99 within 10%. It also checks that an error, a timeout,
//! an empty result and an unreachable server are distinct outcomes.

use axum::{extract::State, routing::get, Router};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use recover::metrics::promql::{PromqlError, PromqlSource, QueryResult};
use recover::metrics::scrape::{parse_target, ScrapeSource};
use recover::metrics::signal::{Reading, SignalSpec, Snapshot};
use recover::metrics::source::{MetricError, MetricSource};
use recover::util::child::{spawn_guarded, GuardOptions};
use recover::util::net::wait_http_ok;
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

const RATE: f64 = 50.0;

struct Exporter {
    registry: Registry,
    work: Counter,
    latency: Histogram,
    started: Instant,
}

/// Bring the counter (and histogram) up to `RATE x elapsed` on every scrape, so the true
/// rate is exactly RATE whenever anyone looks.
async fn metrics(State(state): State<Arc<Mutex<Exporter>>>) -> String {
    let e = state.lock().unwrap();
    let target = (e.started.elapsed().as_secs_f64() * RATE) as u64;
    let have = e.work.get();
    if target > have {
        e.work.inc_by(target - have);
        for _ in have..target {
            e.latency.observe(0.030);
        }
    }
    let mut out = String::new();
    encode(&mut out, &e.registry).unwrap();
    out
}

async fn start_exporter() -> std::net::SocketAddr {
    let mut registry = Registry::default();
    let work = Counter::default();
    let latency = Histogram::new(exponential_buckets(0.001, 2.0, 12));
    registry.register("test_work", "Work items done", work.clone());
    registry.register("test_latency_seconds", "Latency", latency.clone());
    let state = Arc::new(Mutex::new(Exporter {
        registry,
        work,
        latency,
        started: Instant::now(),
    }));
    let app = Router::new()
        .route("/metrics", get(metrics))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

fn require_prometheus() {
    if Command::new("prometheus")
        .arg("--version")
        .output()
        .is_err()
    {
        panic!(
            "the `prometheus` binary is not installed; run scripts/test.sh (it installs the \
             Debian package `prometheus`), or `apt-get install prometheus`"
        );
    }
}

fn signals() -> BTreeMap<String, SignalSpec> {
    let mut s = BTreeMap::new();
    s.insert(
        "work_rate".to_string(),
        SignalSpec {
            scrape: Some("rate(test_work_total@service[5s])".into()),
            promql: Some("sum(rate(test_work_total[5s]))".into()),
            help: None,
            per_replica: false,
        },
    );
    s.insert(
        "latency_p99".to_string(),
        SignalSpec {
            scrape: Some(
                "histogram_quantile(0.99, rate(test_latency_seconds_bucket@service[5s]))".into(),
            ),
            promql: Some(
                "histogram_quantile(0.99, sum by (le) (rate(test_latency_seconds_bucket[5s])))"
                    .into(),
            ),
            help: None,
            per_replica: false,
        },
    );
    s.insert(
        "work_by_replica".to_string(),
        SignalSpec {
            scrape: Some("rate(test_work_total@service[5s])".into()),
            promql: Some("sum by (pod, instance) (rate(test_work_total[5s]))".into()),
            help: None,
            per_replica: true,
        },
    );
    s
}

fn within(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * b.abs().max(1e-9)
}

/// What the comparison below asserts, as one test to poll on.
fn agree(from_prom: &Snapshot, scraped: &Snapshot) -> bool {
    let (Some(a), Some(b)) = (from_prom.get("work_rate"), scraped.get("work_rate")) else {
        return false;
    };
    let (Some(qa), Some(qb)) = (from_prom.get("latency_p99"), scraped.get("latency_p99")) else {
        return false;
    };
    let (pa, pb) = (
        from_prom.per_replica("work_by_replica"),
        scraped.per_replica("work_by_replica"),
    );
    let one =
        |m: &BTreeMap<String, f64>| m.len() == 1 && m.values().all(|v| within(*v, RATE, 0.10));
    one(&pa)
        && one(&pb)
        && within(a, RATE, 0.10)
        && within(b, RATE, 0.10)
        && within(a, b, 0.10)
        && within(qa, qb, 0.10)
        && qa > 0.016
        && qa <= 0.032
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promql_source_agrees_with_scrape_source_on_real_prometheus() {
    require_prometheus();
    recover::util::http::ensure_tls_provider();
    let exporter = start_exporter().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: demo\n    static_configs:\n      - targets: ['{exporter}']\n        labels:\n          role: service\n"
        ),
    )
    .unwrap();
    let web = crate::support::ports::loopback_addr();
    let mut cmd = Command::new("prometheus");
    cmd.arg(format!("--config.file={}", config.display()))
        .arg(format!("--web.listen-address={web}"))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg("--log.level=warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _prom = spawn_guarded("prometheus", cmd, GuardOptions::default()).unwrap();
    let base = format!("http://{web}");
    wait_http_ok(&format!("{base}/-/ready"), Duration::from_secs(15))
        .await
        .unwrap();

    let promql = PromqlSource::new(&base, Duration::from_secs(2)).unwrap();
    let scrape = ScrapeSource::from_urls(
        vec![parse_target(&format!("service=http://{exporter}/metrics")).unwrap()],
        Duration::from_secs(2),
    )
    .unwrap();
    let sig = signals();

    // Wait until Prometheus has enough scrapes for a 5 s rate, scraping alongside.
    let deadline = Instant::now() + Duration::from_secs(25);
    let mut scraped;
    let prom_rate = loop {
        assert!(
            Instant::now() < deadline,
            "Prometheus never produced a rate"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        scraped = scrape.snapshot(&sig).await.unwrap();
        if let Ok(QueryResult::Value(v)) =
            promql.query("sum(rate(test_work_total[5s]))", None).await
        {
            if v > 0.0 && scraped.get("work_rate").is_some() {
                break v;
            }
        }
    };
    // Let both see a full window before comparing, then look until they agree: a loaded
    // machine can delay a scrape and skew one window.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let from_prom = loop {
        for _ in 0..3 {
            scraped = scrape.snapshot(&sig).await.unwrap();
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let from_prom = promql.snapshot(&sig).await.unwrap();
        if agree(&from_prom, &scraped) || Instant::now() >= deadline {
            break from_prom;
        }
    };
    let (a, b) = (
        from_prom.get("work_rate").unwrap(),
        scraped.get("work_rate").unwrap(),
    );
    eprintln!("work rate: PromQL {a:.3}/s, scrape {b:.3}/s, true {RATE}/s");
    // A per-replica signal: one reading per target, named by its instance (the target's
    // host:port in Prometheus, the URL given to the scrape source).
    let per = from_prom.per_replica("work_by_replica");
    assert_eq!(
        per.keys().collect::<Vec<_>>(),
        vec![&exporter.to_string()],
        "{from_prom:?}"
    );
    assert!(within(per[&exporter.to_string()], RATE, 0.10), "{per:?}");
    let per = scraped.per_replica("work_by_replica");
    let url = format!("http://{exporter}/metrics");
    assert_eq!(per.keys().collect::<Vec<_>>(), vec![&url], "{scraped:?}");
    assert!(within(per[&url], RATE, 0.10), "{per:?}");
    assert!(prom_rate > 0.0);
    assert!(within(a, RATE, 0.10), "PromQL rate {a} vs true {RATE}");
    assert!(within(b, RATE, 0.10), "scrape rate {b} vs true {RATE}");
    assert!(within(a, b, 0.10), "PromQL {a} vs scrape {b}");
    let (qa, qb) = (
        from_prom.get("latency_p99").unwrap(),
        scraped.get("latency_p99").unwrap(),
    );
    eprintln!("p99: PromQL {qa:.5}s, scrape {qb:.5}s");
    assert!(within(qa, qb, 0.10), "p99: PromQL {qa} vs scrape {qb}");
    assert!(
        qa > 0.016 && qa <= 0.032,
        "p99 {qa} should fall in the 16-32 ms bucket"
    );

    // A window from history: the last 3 s, one point a second, all with values. Each
    // point's 5 s rate must lie wholly after Prometheus's first scrapes, hence the wait.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let w = loop {
        let w = promql
            .window(
                &sig,
                SystemTime::now(),
                Duration::from_secs(3),
                Duration::from_secs(1),
            )
            .await
            .unwrap();
        let full = w.len() == 4
            && w.iter()
                .all(|s| s.get("work_rate").is_some_and(|v| within(v, RATE, 0.15)));
        if full || Instant::now() >= deadline {
            break w;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(w.len(), 4);
    let all: Vec<Option<f64>> = w.iter().map(|s| s.get("work_rate")).collect();
    eprintln!("window rates: {all:?}");
    for s in &w {
        let v = s
            .get("work_rate")
            .unwrap_or_else(|| panic!("missing point: {:?}", s.readings));
        assert!(within(v, RATE, 0.15), "window rate {v}");
    }

    // Empty: the query runs and matches nothing. Missing, never zero.
    assert_eq!(
        promql.query("no_such_metric_anywhere", None).await.unwrap(),
        QueryResult::Empty
    );
    let mut empty = BTreeMap::new();
    empty.insert(
        "x".to_string(),
        SignalSpec {
            scrape: None,
            promql: Some("no_such_metric_anywhere".into()),
            help: None,
            per_replica: false,
        },
    );
    match &promql.snapshot(&empty).await.unwrap().readings["x"] {
        Reading::Missing { reason } => assert!(reason.contains("empty"), "{reason}"),
        other => panic!("empty result read as {other:?}"),
    }

    // Error: the server refuses the query.
    match promql.query("rate(", None).await {
        Err(PromqlError::Query { error_type, .. }) => assert_eq!(error_type, "bad_data"),
        other => panic!("bad query gave {other:?}"),
    }
    empty.get_mut("x").unwrap().promql = Some("rate(".into());
    assert!(matches!(
        promql.snapshot(&empty).await,
        Err(MetricError::BadExpression { .. })
    ));
}

#[tokio::test]
async fn timeout_and_unreachable_are_distinct_from_errors() {
    // A server that accepts connections and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let hold = tokio::spawn(async move {
        let mut conns = Vec::new();
        while let Ok((c, _)) = silent.accept().await {
            conns.push(c);
        }
    });
    let src = PromqlSource::new(&format!("http://{addr}"), Duration::from_millis(300)).unwrap();
    let t = Instant::now();
    match src.query("up", None).await {
        Err(PromqlError::Timeout { .. }) => {}
        other => panic!("silent server gave {other:?}"),
    }
    assert!(t.elapsed() < Duration::from_secs(5));
    hold.abort();

    let closed = crate::support::ports::loopback_addr();
    let src = PromqlSource::new(&format!("http://{closed}"), Duration::from_millis(300)).unwrap();
    match src.query("up", None).await {
        Err(PromqlError::Unreachable { .. }) => {}
        other => panic!("closed port gave {other:?}"),
    }
}
