//! Clean exposition, on the real binary: the demo config service, the demo workers, the
//! gate's admin port and `recover serve` each answer `/metrics` in text format 0.0.4 when
//! nothing in particular is asked, which `promtool check metrics` passes (names, units,
//! suffixes, help), and in
//! OpenMetrics when asked as Prometheus asks, each with its content type; every counter
//! family is there from start; and a real Prometheus scrapes all four without an error.

use crate::support::components::start_components;
use crate::support::prometheus::{self, Prometheus};
use crate::support::serve::Http;
use std::time::{Duration, Instant};

use crate::support::components::PROMETHEUS_ACCEPT;

fn content_type(r: &crate::support::loopback_http::Reply) -> String {
    r.headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_component_answers_the_format_asked_and_prometheus_scrapes_it() {
    prometheus::require("promtool", "prometheus");
    let c = start_components().await;
    let http = Http::default();
    for (job, url) in &c.endpoints {
        let text = http.send("GET", url, &[], "").await.unwrap();
        assert_eq!(
            content_type(&text),
            "text/plain; version=0.0.4; charset=utf-8",
            "{job}"
        );
        assert!(!text.body.contains("# EOF"), "{job}: {}", text.body);
        let lint = prometheus::run_with_stdin("promtool", &["check", "metrics"], &text.body);
        assert!(
            lint.status.success() && prometheus::text(&lint).trim().is_empty(),
            "{job}: promtool check metrics:\n{}",
            prometheus::text(&lint)
        );
        let om = http
            .send("GET", url, &[("accept", PROMETHEUS_ACCEPT)], "")
            .await
            .unwrap();
        assert_eq!(
            content_type(&om),
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            "{job}"
        );
        assert!(om.body.ends_with("# EOF\n"), "{job}: {}", om.body);
        // In 0.0.4 a counter family is named with its _total, so its help goes with it.
        for line in text.body.lines().filter(|l| l.starts_with("# TYPE ")) {
            if line.ends_with(" counter") {
                let name = line.split(' ').nth(2).unwrap();
                assert!(name.ends_with("_total"), "{job}: {line}");
                assert!(
                    text.body.contains(&format!("# HELP {name} ")),
                    "{job}: no help for {name}"
                );
            }
        }
    }
    // The receiver's counters exist before their first event.
    let serve = http.send("GET", &c.endpoints[3].1, &[], "").await.unwrap();
    for sample in [
        "recover_serve_alerts_received_total{status=\"firing\"} 0",
        "recover_serve_runs_total{outcome=\"failed\"} 0",
        "recover_serve_decisions_total{decision=\"launched\"} 0",
    ] {
        assert!(serve.body.contains(sample), "{sample} in\n{}", serve.body);
    }

    // A real Prometheus scrapes each one (asking for OpenMetrics) without an error.
    let mut config =
        String::from("global: {scrape_interval: 1s, scrape_timeout: 1s}\nscrape_configs:\n");
    for (job, url) in &c.endpoints {
        let target = url
            .trim_start_matches("http://")
            .trim_end_matches("/metrics");
        config.push_str(&format!(
            "  - job_name: {job}\n    static_configs: [{{targets: ['{target}']}}]\n"
        ));
    }
    let prom = Prometheus::start(&config).await;
    let src =
        recover::metrics::promql::PromqlSource::new(&prom.base, Duration::from_secs(2)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (up, samples) = loop {
        let up = src.query_series("up == 1", None).await.unwrap_or_default();
        let samples = src
            .query_series("scrape_samples_scraped > 0", None)
            .await
            .unwrap_or_default();
        if (up.len() == 4 && samples.len() == 4) || Instant::now() >= deadline {
            break (up, samples);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let jobs = |v: &[(std::collections::BTreeMap<String, String>, f64)]| {
        let mut j: Vec<String> = v.iter().map(|(l, _)| l["job"].clone()).collect();
        j.sort();
        j
    };
    assert_eq!(
        jobs(&up),
        ["gate", "serve", "service", "workers"],
        "up == 1"
    );
    assert_eq!(jobs(&samples), ["gate", "serve", "service", "workers"]);
}
