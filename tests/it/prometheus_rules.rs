//! The shipped alerting: `deploy/prometheus/recover-rules.yaml` passes `promtool check
//! rules`, its unit tests (`recover-rules.test.yaml`: each alert fires on its incident and
//! stays silent on a healthy service, a plain outage and a spike) pass `promtool test
//! rules`, the PrometheusRule manifest carries the same rules (its spec extracted and
//! checked with promtool, since kubernetes-validate cannot check a CRD), the stuck alert's
//! windows, thresholds and roles are the detector's at 30 s with the shipped runbook, and
//! the Alertmanager route passes `amtool check-config` and routes each alert where it says.

use crate::support::prometheus::{require, run, text};
use recover::detect::windows::{at_resolution, Fields};
use recover::metrics::promql::interval::rate_interval;
use std::time::Duration;

const RULES: &str = "deploy/prometheus/recover-rules.yaml";
const RULE_TESTS: &str = "deploy/prometheus/recover-rules.test.yaml";
const PROMETHEUS_RULE: &str = "manifests/monitoring/prometheus-rule.yaml";
const ROUTE: &str = "deploy/alertmanager/recover-route.yaml";

fn root(rel: &str) -> String {
    format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"))
}

fn yaml(rel: &str) -> serde_yaml::Value {
    serde_yaml::from_str(&std::fs::read_to_string(root(rel)).unwrap()).unwrap()
}

#[test]
fn the_rules_pass_promtool_check_and_their_unit_tests() {
    require("promtool", "prometheus");
    let out = run("promtool", &["check", "rules", &root(RULES)]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("SUCCESS: 11 rules found"),
        "{}",
        text(&out)
    );
    let out = run("promtool", &["test", "rules", &root(RULE_TESTS)]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("SUCCESS"), "{}", text(&out));
}

#[test]
fn the_prometheus_rule_manifest_holds_the_same_rules() {
    require("promtool", "prometheus");
    let manifest = yaml(PROMETHEUS_RULE);
    assert_eq!(manifest["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(manifest["kind"], "PrometheusRule");
    let spec = manifest["spec"].clone();
    assert_eq!(
        spec,
        yaml(RULES),
        "the PrometheusRule spec differs from {RULES}"
    );
    let dir = tempfile::tempdir().unwrap();
    let extracted = dir.path().join("spec.yaml");
    std::fs::write(&extracted, serde_yaml::to_string(&spec).unwrap()).unwrap();
    let out = run("promtool", &["check", "rules", extracted.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    // Optional: not among the base manifests (it needs the operator's CRDs).
    let base = std::fs::read_to_string(root("manifests/kustomization.yaml")).unwrap();
    assert!(!base.contains("prometheus-rule"), "{base}");
    let own = yaml("manifests/monitoring/kustomization.yaml");
    assert_eq!(own["resources"][0], "prometheus-rule.yaml");
}

/// A duration as the rules write it.
fn range(d: Duration) -> String {
    let s = d.as_secs();
    if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

#[test]
fn the_stuck_alert_is_the_detectors_definition_at_30s() {
    let loaded = recover::runbook::find("stuck-overload", &[]).unwrap();
    let rb = loaded.runbook;
    let scrape = Duration::from_secs(30);
    let (cfg, _, _) = at_resolution(&rb.detect, scrape, &Fields::runbook()).unwrap();
    let rules = std::fs::read_to_string(root(RULES)).unwrap();
    let doc = yaml(RULES);
    assert_eq!(doc["groups"][0]["interval"], "30s");
    let w = range(rate_interval(scrape, scrape));
    let (persist, grace) = (range(cfg.persist), range(cfg.grace));
    let samples = cfg.persist.as_secs() / scrape.as_secs();
    let rendered = |v: f64| format!("{v}");
    for needle in [
        format!("[{w}]))"),
        format!("min_over_time(namespace:recover_failing:bool[{persist}]) == 1"),
        format!("count_over_time(namespace:recover_failing:bool[{persist}]) >= {samples}"),
        format!("max_over_time(namespace:recover_trigger_active:bool[{grace}]) == 0"),
        format!(
            "namespace:recover_goodput:rate2m < bool {} * namespace:recover_offered_rate:rate2m",
            rendered(cfg.min_goodput_ratio)
        ),
        format!(
            "namespace:recover_offered_rate:rate2m >= bool {}",
            rendered(cfg.min_offered_per_s)
        ),
        format!(
            "namespace:recover_error_ratio:rate2m > bool {}",
            rendered(cfg.max_error_ratio)
        ),
        format!(
            "> bool {} * (namespace:recover_first_attempt_rate:healthy_avg1h > 0)",
            rendered(cfg.spike_factor)
        ),
    ] {
        assert!(rules.contains(&needle), "{RULES} lacks {needle:?}");
    }
    assert_eq!(w, "2m", "the recording rules are named for a 2m window");
    for (role, matchers) in &rb.roles {
        assert!(
            rules.contains(matchers.as_str()),
            "{RULES} does not select role {role} by {matchers}"
        );
    }
}

#[test]
fn the_alertmanager_route_sends_the_stuck_alert_to_recover_serve() {
    require("amtool", "prometheus-alertmanager");
    let route = root(ROUTE);
    let out = run("amtool", &["check-config", &route]);
    assert!(out.status.success(), "{}", text(&out));
    let receiver = |labels: &[&str]| {
        let mut args = vec!["config", "routes", "test", "--config.file", &route];
        args.extend_from_slice(labels);
        let out = run("amtool", &args);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(
        receiver(&["alertname=RecoverStuckOverload", "namespace=shop"]),
        "recover-serve"
    );
    assert_eq!(
        receiver(&["alertname=RecoverGateLimitPastReview"]),
        "on-call"
    );
    assert_eq!(receiver(&["alertname=RecoverGateRejectingMost"]), "on-call");
    // The webhook reaches the receiver the manifests deploy, on the path it serves, and
    // the receiver has a route for the alert's name.
    let am = yaml(ROUTE);
    let url = am["receivers"][0]["webhook_configs"][0]["url"]
        .as_str()
        .unwrap();
    assert_eq!(url, "http://recover-serve.recover-demo.svc:9095/alerts");
    let serve = std::fs::read_to_string(root("manifests/serve.yaml")).unwrap();
    assert!(serve.contains("alertname: RecoverStuckOverload"), "{serve}");
    assert!(serve.contains("port: 9095"), "{serve}");
    let example = std::fs::read_to_string(root("examples/serve.yaml")).unwrap();
    assert!(
        example.contains("alertname: RecoverStuckOverload"),
        "{example}"
    );
}
