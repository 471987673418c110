//! The Grafana dashboard (`deploy/grafana/recover.json`) and the alert rules name only
//! metrics the components export (read from the real components' `/metrics`), the
//! dashboard's roles are the shipped runbook's, and every query of the dashboard parses
//! and runs: `promtool query instant` against a Prometheus holding a backfilled stuck
//! incident, with Grafana's variables filled in as Grafana fills them. Each panel has data
//! there, except the gate's limit, which an incident before any recovery does not have.

use crate::support::components::start_components;
use crate::support::incident::{Incident, NAMESPACE};
use crate::support::prometheus::{require, run, text, Prometheus};
use std::collections::BTreeSet;
use std::time::Duration;

fn root(rel: &str) -> String {
    format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"))
}

fn dashboard() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(root("deploy/grafana/recover.json")).unwrap())
        .unwrap()
}

/// (panel title, legend, expression) of every query, the alert annotation included.
fn queries(d: &serde_json::Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            out.push((
                p["title"].as_str().unwrap().to_string(),
                t["legendFormat"].as_str().unwrap().to_string(),
                t["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    for a in d["annotations"]["list"].as_array().unwrap() {
        out.push((
            "annotation".into(),
            a["name"].as_str().unwrap().to_string(),
            a["expr"].as_str().unwrap().to_string(),
        ));
    }
    out
}

/// A template variable's default value.
fn variable(d: &serde_json::Value, name: &str) -> String {
    d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .and_then(|v| v["query"].as_str())
        .unwrap_or_else(|| panic!("no variable {name}"))
        .to_string()
}

/// Every `recover_*` name an expression reads.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = expr;
    while let Some(i) = rest.find("recover_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let before = rest[..i].chars().last();
        // Inside a recording rule's name (namespace:recover_...:rate2m) it is not a metric.
        if before != Some(':') {
            out.insert(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_and_rules_read_what_the_components_export_and_every_query_runs() {
    require("promtool", "prometheus");
    let d = dashboard();
    let qs = queries(&d);
    assert_eq!(
        d["panels"].as_array().unwrap().len(),
        4,
        "the three panels of timeline.svg, and the gate's limit in shadow"
    );

    // Names: the components' own /metrics, started for real.
    let components = start_components().await;
    let exported = components.exported_names().await;
    let rules = std::fs::read_to_string(root("deploy/prometheus/recover-rules.yaml")).unwrap();
    for (from, expr) in qs
        .iter()
        .map(|(p, l, e)| (format!("dashboard {p} / {l}"), e.as_str()))
        .chain(std::iter::once((
            "recover-rules.yaml".to_string(),
            rules.as_str(),
        )))
    {
        for name in metric_names(expr) {
            assert!(
                exported.contains(&name),
                "{from} reads {name}, which no component exports"
            );
        }
    }
    drop(components);

    // The roles are the shipped runbook's.
    let rb = recover::runbook::find("stuck-overload", &[])
        .unwrap()
        .runbook;
    for role in ["gate", "service", "clients"] {
        assert_eq!(variable(&d, role), rb.roles[role], "variable {role}");
    }

    // Every query runs on a stuck incident recorded at 15 s, as Grafana would send it.
    let inc = Incident::recorded(Duration::from_secs(15));
    let prom = Prometheus::backfilled(&inc.openmetrics()).await;
    let at = (inc.outage_end() + 600).to_string();
    for (panel, legend, expr) in &qs {
        let q = expr
            .replace("$__rate_interval", "1m")
            .replace("$namespace", NAMESPACE)
            .replace("$client_timeout", &variable(&d, "client_timeout"))
            .replace("$gate", &variable(&d, "gate"))
            .replace("$service", &variable(&d, "service"))
            .replace("$clients", &variable(&d, "clients"));
        assert!(
            !q.contains('$'),
            "{panel} / {legend}: unfilled variable in {q}"
        );
        let out = run(
            "promtool",
            &["query", "instant", "--time", &at, &prom.base, &q],
        );
        let answer = text(&out);
        assert!(out.status.success(), "{panel} / {legend}: {q}\n{answer}");
        let has_data = answer.contains("=>");
        let expect_data = panel != "annotation" && legend != "gate limit";
        assert_eq!(has_data, expect_data, "{panel} / {legend}: {q}\n{answer:?}");
    }
}
