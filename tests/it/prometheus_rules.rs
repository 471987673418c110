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

#[test]
fn the_kubernetes_scrape_config_is_valid_and_the_pods_are_annotated() {
    require("promtool", "prometheus");
    // Debian's promtool has no Kubernetes discovery: check everything else (relabelling,
    // rule files) with a static target in its place.
    let config = std::fs::read_to_string(root("deploy/prometheus/prometheus.yaml")).unwrap();
    let sd = "    kubernetes_sd_configs:\n      - role: pod\n        namespaces:\n          names: [recover-demo]\n";
    assert!(config.contains(sd), "{config}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("prometheus.yaml"),
        config.replace(sd, "    static_configs: [{targets: ['127.0.0.1:9']}]\n"),
    )
    .unwrap();
    std::fs::copy(root(RULES), dir.path().join("recover-rules.yaml")).unwrap();
    let p = dir.path().join("prometheus.yaml");
    let out = run("promtool", &["check", "config", p.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    // The labelmap makes app.kubernetes.io/name the label the roles select.
    assert!(config.contains("regex: __meta_kubernetes_pod_label_(.+)"));
    // Every Deployment with a /metrics is annotated with the port it serves it on.
    for (file, port, flag) in [
        ("config-service.yaml", "9001", "--listen=0.0.0.0:9001"),
        ("gate.yaml", "8081", "--admin-listen=0.0.0.0:8081"),
        ("workers.yaml", "9100", "--metrics-listen=0.0.0.0:9100"),
        ("serve.yaml", "9095", "0.0.0.0:9095"),
    ] {
        let text = std::fs::read_to_string(root(&format!("manifests/{file}"))).unwrap();
        let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&text)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect();
        let dep = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
        let ann = &dep["spec"]["template"]["metadata"]["annotations"];
        assert_eq!(ann["prometheus.io/scrape"], "true", "{file}");
        assert_eq!(ann["prometheus.io/port"], port, "{file}");
        assert!(
            text.contains(flag),
            "{file}: /metrics is not served on {port}"
        );
    }
}

/// The Prometheus guide (docs/guide/prometheus.md): every promtool and amtool command in
/// it runs as written from the repository root, and its runbook excerpt is the shipped
/// runbook's.
#[test]
fn the_prometheus_guide_commands_work_as_written() {
    require("promtool", "prometheus");
    require("amtool", "prometheus-alertmanager");
    let section = std::fs::read_to_string(root("docs/guide/prometheus.md")).unwrap();
    let mut ran = 0;
    for line in section.lines() {
        if !(line.starts_with("promtool ") || line.starts_with("amtool ")) {
            continue;
        }
        let out = std::process::Command::new("sh")
            .args(["-c", line])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{line}\n{}", text(&out));
        if line.starts_with("amtool config routes test") {
            assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "recover-serve");
        }
        ran += 1;
    }
    assert_eq!(ran, 4, "the guide's promtool and amtool commands");
    let runbook = std::fs::read_to_string(root("runbooks/stuck-overload.yaml")).unwrap();
    for l in section.lines().filter(|l| {
        l.trim_start().starts_with("promql: ") || l.contains(": app_kubernetes_io_name=")
    }) {
        assert!(runbook.contains(l), "guide line not in the runbook: {l}");
    }
}
