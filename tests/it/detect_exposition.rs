//! The text exposition parser against the shapes real exporters emit: OpenMetrics as
//! prometheus-client writes it (encoded here by the library itself, and a gate-shaped
//! fixture with an exemplar and `# EOF`), and the classic 0.0.4 text of the Go client
//! (summaries, timestamps, escapes in labels and help). Then the expressions over them.

use crate::support::fixture;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use recover::metrics::scrape::{expr, text, Scraper};
use recover::metrics::signal::{Reading, SignalSpec};
use recover::platform::ScrapeEndpoint;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

fn value(e: &text::Exposition, name: &str, labels: &[(&str, &str)]) -> f64 {
    e.samples
        .iter()
        .find(|s| s.name == name && labels.iter().all(|(k, v)| s.label(k) == Some(v)))
        .unwrap_or_else(|| panic!("no {name}{labels:?}"))
        .value
}

#[test]
fn prometheus_client_output_parses_exactly() {
    let mut registry = Registry::default();
    let requests = Family::<Vec<(String, String)>, Counter>::default();
    registry.register(
        "recover_gate_requests",
        "Requests by outcome",
        requests.clone(),
    );
    let in_flight = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
    registry.register(
        "recover_gate_limit_rate_per_second",
        "Limit",
        in_flight.clone(),
    );
    let hist = Histogram::new([0.01, 0.1, 1.0]);
    registry.register(
        "recover_gate_upstream_latency_seconds",
        "Latency",
        hist.clone(),
    );
    requests
        .get_or_create(&vec![("outcome".into(), "admitted".into())])
        .inc_by(41);
    in_flight.set(f64::INFINITY);
    for v in [0.005, 0.05, 0.05, 2.0] {
        hist.observe(v);
    }
    let mut page = String::new();
    encode(&mut page, &registry).unwrap();
    let e = text::parse(&page).unwrap_or_else(|err| panic!("{err}\n{page}"));
    assert_eq!(
        value(
            &e,
            "recover_gate_requests_total",
            &[("outcome", "admitted")]
        ),
        41.0
    );
    assert_eq!(
        value(&e, "recover_gate_limit_rate_per_second", &[]),
        f64::INFINITY
    );
    assert_eq!(
        value(
            &e,
            "recover_gate_upstream_latency_seconds_bucket",
            &[("le", "0.1")]
        ),
        3.0
    );
    assert_eq!(
        value(
            &e,
            "recover_gate_upstream_latency_seconds_bucket",
            &[("le", "+Inf")]
        ),
        4.0
    );
    assert_eq!(
        value(&e, "recover_gate_upstream_latency_seconds_count", &[]),
        4.0
    );
    assert_eq!(
        e.types.get("recover_gate_requests").map(String::as_str),
        Some("counter")
    );

    // prometheus-client 0.24 writes label values without escaping them, so a value with a
    // quote makes an invalid page. Prometheus rejects such a scrape; so does the parser,
    // naming the line, rather than guessing where the value ends.
    requests
        .get_or_create(&vec![("outcome".into(), "say \"hi\"".into())])
        .inc();
    let mut page = String::new();
    encode(&mut page, &registry).unwrap();
    let err = text::parse(&page).unwrap_err();
    assert!(
        page.contains("outcome=\"say \"hi\"\""),
        "still unescaped? {page}"
    );
    assert_eq!(
        err.line,
        page.lines().position(|l| l.contains("say")).unwrap() + 1
    );
}

#[test]
fn gate_shaped_openmetrics_fixture() {
    let e = text::parse(&fixture("metrics/gate_openmetrics.txt")).unwrap();
    assert_eq!(
        value(
            &e,
            "recover_gate_requests_total",
            &[("outcome", "rejected_rate")]
        ),
        3310.0
    );
    assert_eq!(
        value(&e, "recover_gate_limit_applied_info", &[("version", "7")]),
        1.0
    );
    // The exemplar after the bucket's value is not part of the value.
    assert_eq!(
        value(
            &e,
            "recover_gate_upstream_latency_seconds_bucket",
            &[("le", "0.01")]
        ),
        600.0
    );
    assert_eq!(
        e.types
            .get("recover_gate_upstream_latency_seconds")
            .map(String::as_str),
        Some("histogram")
    );
}

#[test]
fn go_client_text_fixture_with_escapes_and_timestamps() {
    let e = text::parse(&fixture("metrics/go_client_text.txt")).unwrap();
    assert!(value(&e, "go_gc_duration_seconds", &[("quantile", "0.5")]).is_nan());
    assert_eq!(value(&e, "http_requests_total", &[("code", "400")]), 3.0);
    assert_eq!(
        value(
            &e,
            "http_requests_total",
            &[("path", "C:\\dir\\\"x\"\nnext")]
        ),
        1027.0
    );
    assert_eq!(
        value(
            &e,
            "msdos_file_access_time_seconds",
            &[("error", "Cannot find file:\n\"FILE.TXT\"")]
        ),
        1.458255915e9
    );
    assert_eq!(value(&e, "something_weird", &[]), f64::INFINITY);
    assert_eq!(value(&e, "negative_gauge", &[]), f64::NEG_INFINITY);
    assert_eq!(value(&e, "untyped_with_trailing_comma", &[("a", "1")]), 5.0);
}

#[test]
fn expressions_over_fixture_pages() {
    let ep = ScrapeEndpoint {
        role: "gate".into(),
        instance: "g".into(),
        locator: "http://127.0.0.1/metrics".into(),
    };
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let first = fixture("metrics/gate_openmetrics.txt");
    // Ten seconds later: 100 more admitted, 300 more rejected, 100 more observations, 90
    // of them under 10 ms.
    let second = first
        .replace("outcome=\"admitted\"} 1027", "outcome=\"admitted\"} 1127")
        .replace("} 3310", "} 3610")
        .replace("{le=\"0.01\"} 600", "{le=\"0.01\"} 690")
        .replace("{le=\"0.05\"} 1000", "{le=\"0.05\"} 1100")
        .replace("{le=\"+Inf\"} 1027", "{le=\"+Inf\"} 1127");
    let mut scraper = Scraper::default();
    scraper.record(&ep, t0, Ok(&first));
    scraper.record(&ep, t0 + Duration::from_secs(10), Ok(&second));
    let sig = |s: &str| SignalSpec {
        scrape: Some(s.into()),
        promql: None,
        help: None,
        per_replica: false,
    };
    let mut signals = BTreeMap::new();
    signals.insert(
        "all".to_string(),
        sig("rate(recover_gate_requests_total@gate[30s])"),
    );
    signals.insert(
        "rejected".to_string(),
        sig(r#"rate(recover_gate_requests_total{outcome=~"rejected_.*"}[30s])"#),
    );
    signals.insert("ratio".to_string(), sig(r#"rate(recover_gate_requests_total{outcome!="admitted"}[30s]) / rate(recover_gate_requests_total[30s])"#));
    signals.insert(
        "p50".to_string(),
        sig("histogram_quantile(0.5, rate(recover_gate_upstream_latency_seconds_bucket[30s]))"),
    );
    signals.insert(
        "limit".to_string(),
        sig("recover_gate_limit_rate_per_second@gate"),
    );
    signals.insert(
        "none".to_string(),
        sig("rate(recover_gate_requests_total@service[30s])"),
    );
    signals.insert(
        "absent".to_string(),
        sig(r#"rate(recover_gate_requests_total{outcome="upstream_error"}[30s])"#),
    );
    signals.insert(
        "absent_or".to_string(),
        sig(r#"rate(recover_gate_requests_total{outcome="upstream_error"}[30s]) or 0"#),
    );
    signals.insert("up".to_string(), sig("sum(up) * 2 - 1"));
    let compiled = recover::metrics::scrape::compile(&signals).unwrap();
    let snap = scraper.snapshot(&compiled, t0 + Duration::from_secs(10));
    let get = |n: &str| snap.readings[n].clone();
    assert_eq!(get("all"), Reading::Value { value: 40.0 });
    assert_eq!(get("rejected"), Reading::Value { value: 30.0 });
    assert_eq!(get("ratio"), Reading::Value { value: 0.75 });
    // 100 new observations: 0 under 5 ms, 90 in (5, 10] ms: the median is at 5 + 5 x 50/90 ms.
    match get("p50") {
        Reading::Value { value } => assert!(
            (value - (0.005 + 0.005 * 50.0 / 90.0)).abs() < 1e-9,
            "{value}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        get("limit").value(),
        None,
        "+Inf is a value, but not a finite one"
    );
    assert!(matches!(get("limit"), Reading::Value { value } if value == f64::INFINITY));
    assert!(
        matches!(get("none"), Reading::Missing { reason } if reason.contains("no target has role"))
    );
    assert!(
        matches!(get("absent"), Reading::Missing { reason } if reason.contains("no such series"))
    );
    assert_eq!(get("absent_or"), Reading::Value { value: 0.0 });
    assert_eq!(get("up"), Reading::Value { value: 1.0 });

    // The target goes down: every signal on it is missing with the reason, never zero.
    scraper.record(
        &ep,
        t0 + Duration::from_secs(11),
        Err("connection refused".into()),
    );
    let snap = scraper.snapshot(&compiled, t0 + Duration::from_secs(11));
    for name in ["all", "rejected", "ratio", "p50", "limit", "absent_or"] {
        match &snap.readings[name] {
            Reading::Missing { reason } => assert!(
                reason.contains("down: connection refused"),
                "{name}: {reason}"
            ),
            other => panic!("{name} with its target down: {other:?}"),
        }
    }
    assert_eq!(snap.readings["up"], Reading::Value { value: -1.0 });
    assert!(expr::parse("rate(x[0s])").is_err());
}
