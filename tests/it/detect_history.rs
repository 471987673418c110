//! A service stuck before anyone looked, judged against a REAL Prometheus whose history
//! holds the healthy period before the failure (backfilled with `promtool tsdb
//! create-blocks-from openmetrics`, so the test does not wait for it): the detector says
//! Stuck from the current window and takes capacity (Little's law over the history's
//! healthy service time), k and the demand baseline from the history's last healthy
//! period, naming its time range. `recover detect --prometheus` shows the same.

use recover::detect::observe::judge;
use recover::detect::{DetectorConfig, Source, VerdictKind};
use recover::metrics::promql::PromqlSource;
use recover::metrics::source::MetricSource;
use recover::util::child::{spawn_guarded, GuardOptions};
use recover::util::net::wait_http_ok;
use std::fmt::Write as _;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One second of the demo system's metrics, as rates and levels.
struct Second {
    offered: f64,
    useful: f64,
    abandoned: f64,
    service_time: f64,
    queue: f64,
}

const HEALTHY: Second = Second {
    offered: 20.0,
    useful: 20.0,
    abandoned: 0.0,
    service_time: 0.040,
    queue: 0.0,
};
const STUCK: Second = Second {
    offered: 80.0,
    useful: 1.0,
    abandoned: 49.0,
    service_time: 0.080,
    queue: 200.0,
};

/// OpenMetrics text for `healthy_s` seconds of health followed by `stuck_s` of the stuck
/// state, one sample a second, ending at `end`.
pub(crate) fn history(end: u64, healthy_s: u64, stuck_s: u64) -> String {
    let n = healthy_s + stuck_s;
    let start = end - n;
    let at = |i: u64| if i < healthy_s { &HEALTHY } else { &STUCK };
    // Cumulative counters per series, as (name{labels}, per-second increment).
    type Inc = fn(&Second) -> f64;
    let counters: [(&str, &str, Inc); 9] = [
        ("recover_gate_requests", r#"outcome="admitted""#, |s| {
            s.useful
        }),
        ("recover_gate_requests", r#"outcome="client_gone""#, |s| {
            s.offered - s.useful
        }),
        ("recover_gate_attempts", r#"kind="first""#, |s| s.useful),
        ("recover_gate_attempts", r#"kind="retry""#, |s| {
            s.offered - s.useful
        }),
        (
            "recover_demo_service_completions",
            r#"kind="useful""#,
            |s| s.useful,
        ),
        (
            "recover_demo_service_completions",
            r#"kind="abandoned""#,
            |s| s.abandoned,
        ),
        ("recover_demo_workers_attempts", r#"outcome="ok""#, |s| {
            s.useful
        }),
        (
            "recover_demo_workers_attempts",
            r#"outcome="timeout""#,
            |s| s.offered - s.useful,
        ),
        ("recover_demo_service_service_seconds_count", "", |s| {
            s.useful + s.abandoned
        }),
    ];
    let mut out = String::new();
    let mut family = "";
    for (name, labels, inc) in counters {
        let (fam, series) = match name.strip_suffix("_count") {
            Some(base) => (base, name.to_string()),
            None => (name, format!("{name}_total")),
        };
        if fam != family {
            let kind = if fam.ends_with("_seconds") {
                "summary"
            } else {
                "counter"
            };
            let _ = writeln!(out, "# TYPE {fam} {kind}");
            family = fam;
        }
        let mut total = 0.0;
        for i in 0..n {
            total += inc(at(i));
            let labels = if labels.is_empty() {
                String::new()
            } else {
                format!("{{{labels}}}")
            };
            let _ = writeln!(out, "{series}{labels} {total} {}", start + i + 1);
        }
        if fam.ends_with("_seconds") {
            let mut sum = 0.0;
            for i in 0..n {
                let s = at(i);
                sum += (s.useful + s.abandoned) * s.service_time;
                let _ = writeln!(out, "{fam}_sum {sum} {}", start + i + 1);
            }
        }
    }
    for (name, value) in [
        (
            "recover_demo_service_queue_depth",
            (|s: &Second| s.queue) as fn(&Second) -> f64,
        ),
        ("recover_demo_service_ready", |_| 1.0),
        ("recover_demo_service_concurrency_limit", |_| 4.0),
    ] {
        let _ = writeln!(out, "# TYPE {name} gauge");
        for i in 0..n {
            let _ = writeln!(out, "{name} {} {}", value(at(i)), start + i + 1);
        }
    }
    // Every series carries its role's label, as Kubernetes service discovery gives them
    // and the shipped runbook's `spec.roles` select; `up` tells the scrape interval.
    let mut labelled = String::new();
    for line in out.lines() {
        labelled.push_str(&with_role_label(line));
        labelled.push('\n');
    }
    let _ = writeln!(labelled, "# TYPE up gauge");
    for role in ["recover-gate", "config-service", "workers"] {
        for i in 0..n {
            let _ = writeln!(
                labelled,
                "up{{app_kubernetes_io_name=\"{role}\"}} 1 {}",
                start + i + 1
            );
        }
    }
    labelled.push_str("# EOF\n");
    labelled
}

/// A sample line with the label of the role its metric belongs to.
fn with_role_label(line: &str) -> String {
    if line.starts_with('#') {
        return line.to_string();
    }
    let role = if line.starts_with("recover_demo_workers") {
        "workers"
    } else if line.starts_with("recover_gate") {
        "recover-gate"
    } else {
        "config-service"
    };
    let label = format!("app_kubernetes_io_name=\"{role}\"");
    match line.find(['{', ' ']) {
        Some(i) if line.as_bytes()[i] == b'{' => {
            format!("{}{{{label},{}", &line[..i], &line[i + 1..])
        }
        Some(i) => format!("{}{{{label}}}{}", &line[..i], &line[i..]),
        None => line.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stuck_before_anyone_looked_takes_capacity_and_k_from_the_last_healthy_period() {
    for tool in ["prometheus", "promtool"] {
        if Command::new(tool).arg("--version").output().is_err() {
            panic!("`{tool}` is not installed; run scripts/test.sh (Debian package `prometheus`)");
        }
    }
    recover::util::http::ensure_tls_provider();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // 30 minutes healthy, then stuck since 10 minutes ago. The backfill runs 10 minutes
    // into the future so that "now" has data whenever the test (or the CLI) looks.
    let input = dir.path().join("history.om");
    std::fs::write(&input, history(now + 600, 30 * 60, 20 * 60)).unwrap();
    let out = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics", "-q"])
        .arg(&input)
        .arg(&data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        "global:\n  scrape_interval: 15s\nscrape_configs: []\n",
    )
    .unwrap();
    let web = crate::support::ports::loopback_addr();
    let mut cmd = Command::new("prometheus");
    cmd.arg(format!("--config.file={}", config.display()))
        .arg(format!("--web.listen-address={web}"))
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg("--log.level=warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _prom = spawn_guarded("prometheus", cmd, GuardOptions::default()).unwrap();
    let base = format!("http://{web}");
    wait_http_ok(&format!("{base}/-/ready"), Duration::from_secs(30))
        .await
        .unwrap();

    let rb = recover::runbook::find("stuck-overload", &[])
        .unwrap()
        .runbook;
    let cfg = DetectorConfig {
        lookback: Duration::from_secs(3600),
        ..DetectorConfig::default()
    };
    let src = PromqlSource::new(&base, Duration::from_secs(10))
        .unwrap()
        .with_roles(rb.roles.clone());
    let t_end = SystemTime::now();
    // The window an engine attaching now would see: the last 20 s, all stuck.
    let window = src
        .history(
            &rb.signals,
            t_end - Duration::from_secs(20),
            t_end,
            Duration::from_secs(1),
        )
        .await
        .unwrap()
        .expect("Prometheus has a history");
    let v = judge(&src, &rb.signals, &cfg, &window, t_end).await;
    assert_eq!(v.verdict, VerdictKind::Stuck, "{v:#?}");
    let lb = v.lookback.as_ref().expect("looked back");
    let healthy = lb.healthy.as_ref().unwrap_or_else(|| panic!("{}", lb.note));
    // The healthy period ended when the failure began, about 10 minutes ago.
    let ago = t_end.duration_since(UNIX_EPOCH).unwrap().as_secs_f64() - now as f64 + 600.0;
    assert!(
        (healthy.ended_ago_s - ago).abs() <= 2.0 * lb.step.as_secs_f64() + 5.0,
        "{healthy:?}"
    );
    // Little's law over the history's healthy service time: 4 / 40 ms = 100 req/s, more
    // than the history's highest healthy work rate (20 req/s, a lower bound).
    let cap = v.capacity.unwrap();
    assert!(
        (cap - 100.0).abs() < 2.0,
        "capacity {cap}: {:?}",
        v.capacity_from
    );
    assert!(v.capacity_from.as_deref().unwrap().contains("Little's law"));
    assert_eq!(v.sources.capacity, Some(Source::Measured));
    assert!(
        v.healthy_service_time_from
            .as_deref()
            .unwrap()
            .contains("metrics history"),
        "{:?}",
        v.healthy_service_time_from
    );
    let k = v.k.unwrap();
    assert!((k - 2.0).abs() < 0.1, "k {k}: {:?}", v.k_from);
    let demand = v.demand.unwrap();
    assert!((demand - 20.0).abs() < 1.0, "demand {demand}");
    assert!(v.demand_from.as_deref().unwrap().contains(&healthy.from));

    // The CLI says the same, naming where each estimate came from.
    let dir_rb = dir.path().join("runbooks");
    std::fs::create_dir_all(&dir_rb).unwrap();
    let mut doc: serde_yaml::Value = serde_yaml::from_str(
        &recover::runbook::find("stuck-overload", &[])
            .unwrap()
            .source,
    )
    .unwrap();
    let detect = doc["spec"]["detect"].as_mapping_mut().unwrap();
    detect.remove("capacity_per_replica");
    detect.remove("cold_factor");
    std::fs::write(
        dir_rb.join("undeclared.yaml"),
        serde_yaml::to_string(&doc).unwrap(),
    )
    .unwrap();
    let out = crate::support::bin()
        .args(["detect", "--runbook", "undeclared", "--runbook-dir"])
        .arg(&dir_rb)
        .args([
            "--prometheus",
            &base,
            "--lookback",
            "1h",
            "--observe",
            "20s",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    assert_eq!(
        out.status.code(),
        Some(10),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("capacity 100.") && text.contains("(measured: Little's law"),
        "{text}"
    );
    assert!(text.contains("(metrics history)"), "{text}");
}
