//! The shipped alerting: `deploy/prometheus/recover-rules.yaml` passes `promtool check
//! rules`, its unit tests (`recover-rules.test.yaml`: each alert fires on its incident and
//! stays silent on a healthy service, a self-healing outage, a recovered service, a plain
//! outage and a spike, at 15 s, 30 s and 60 s scrapes) pass `promtool test rules`, and so
//! do generated incidents at every scrape interval from 10 s to 60 s and evaluation
//! intervals from 5 s to 60 s; the PrometheusRule manifest carries the same rules (its
//! spec extracted and checked with promtool, since kubernetes-validate cannot check a
//! CRD), each recorded signal reads the counters the detector reads, the stuck alert's
//! windows, thresholds and roles are the detector's with the shipped runbook at each
//! scrape interval the rules have a window for, and the Alertmanager route passes `amtool check-config` and routes each alert where it says.

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
        text(&out).contains("SUCCESS: 16 rules found"),
        "{}",
        text(&out)
    );
    let out = run("promtool", &["test", "rules", &root(RULE_TESTS)]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("SUCCESS"), "{}", text(&out));
}

/// Every rule reads the series the file records only from rules earlier in its own group.
/// A group's rules run in order at one timestamp, each reading what the rules before it
/// wrote; groups run at phases of their own, so a rule reading another group's records
/// (the stuck alert in a group apart from the failing flag) sees them up to one
/// evaluation interval late, and the alert fires that much later.
#[test]
fn each_rule_reads_records_written_before_it_in_its_own_group() {
    let rules = yaml(RULES);
    let groups = rules["groups"].as_sequence().unwrap();
    let recorded: Vec<&str> = groups
        .iter()
        .flat_map(|g| g["rules"].as_sequence().unwrap())
        .filter_map(|r| r["record"].as_str())
        .collect();
    let mut checked_alert = false;
    for group in groups {
        let mut before: Vec<&str> = Vec::new();
        for rule in group["rules"].as_sequence().unwrap() {
            let name = rule["record"].as_str().or(rule["alert"].as_str()).unwrap();
            let expr = rule["expr"].as_str().unwrap();
            let tokens = expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'));
            for token in tokens.filter(|t| recorded.contains(t)) {
                assert!(
                    before.contains(&token),
                    "{RULES}: {name} (group {}) reads {token}, which is not recorded before it in its group",
                    group["name"].as_str().unwrap_or("?")
                );
                checked_alert |= name == "RecoverStuckOverload";
            }
            before.extend(rule["record"].as_str());
        }
    }
    assert!(checked_alert, "the stuck alert reads no recorded series");
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

/// The scrape intervals the rules choose a rate window for: the largest of each tier.
const TIERS: [u64; 4] = [5, 15, 30, 60];

/// The rate window and the persist (= grace) the rules use on data seen every `seen`
/// seconds: the tier's window, 4 of its scrapes, and one scrape more.
fn tier(seen: u64) -> (u64, u64) {
    let bound = *TIERS.iter().find(|b| seen <= **b).expect("at most 60 s");
    (4 * bound, 5 * bound)
}

#[test]
fn the_stuck_alert_is_the_detectors_rule_at_each_tiers_scrape_interval() {
    let loaded = recover::runbook::find("stuck-overload", &[]).unwrap();
    let rb = loaded.runbook;
    let rules = std::fs::read_to_string(root(RULES)).unwrap();
    for secs in TIERS {
        let scrape = Duration::from_secs(secs);
        let (cfg, _, _) = at_resolution(&rb.detect, scrape, &Fields::runbook()).unwrap();
        let w = rate_interval(scrape, scrape);
        // The detector's windows at this scrape interval are the model's: failing for one
        // rate window plus one scrape, the trigger gone for one rate window.
        assert_eq!((cfg.persist, cfg.grace), (w + scrape, w), "{secs}s");
        assert_eq!(tier(secs), (w.as_secs(), cfg.persist.as_secs()));
        let sel = format!("namespace:recover_rate_window:seconds == {}", w.as_secs());
        for needle in [
            format!(
                "namespace:recover_scrape_interval:seconds <= {secs} * 1.1) + {}",
                w.as_secs()
            ),
            format!("[{}])) and on (namespace) {sel}", range(w)),
            format!(
                "{sel}\n            and on (namespace) min_over_time(namespace:recover_failing:bool[{p}]) == 1\n            and on (namespace) namespace:recover_failing:bool offset {p} == 1\n            and on (namespace) max_over_time(namespace:recover_trigger_active:bool[{g}]) == 0\n            and on (namespace) namespace:recover_trigger_active:bool offset {g} == 0\n          ) + {secs}",
                p = range(cfg.persist),
                g = range(cfg.grace)
            ),
        ] {
            assert!(rules.contains(&needle), "{RULES} lacks {needle:?}");
        }
    }
    let cfg = &rb.detect;
    let rendered = |v: f64| format!("{v}");
    for needle in [
        format!(
            "namespace:recover_goodput:rate < bool {} * namespace:recover_offered_rate:rate",
            rendered(cfg.min_goodput_ratio)
        ),
        format!(
            "namespace:recover_offered_rate:rate >= bool {}",
            rendered(cfg.min_offered_per_s)
        ),
        format!(
            "namespace:recover_error_ratio:rate > bool {}",
            rendered(cfg.max_error_ratio)
        ),
        format!(
            "> bool {} * (namespace:recover_first_attempt_rate:healthy_avg1h > 0)",
            rendered(cfg.spike_factor)
        ),
    ] {
        assert!(rules.contains(&needle), "{RULES} lacks {needle:?}");
    }
    for (role, matchers) in &rb.roles {
        assert!(
            rules.contains(matchers.as_str()),
            "{RULES} does not select role {role} by {matchers}"
        );
    }
}

/// Every `recover_*` metric an expression reads (a recording rule's own name excluded).
fn metrics_read(expr: &str) -> std::collections::BTreeSet<&str> {
    expr.match_indices("recover_")
        .filter(|(i, _)| !expr[..*i].ends_with(':'))
        .map(|(i, _)| {
            let tail = &expr[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            &tail[..end]
        })
        .collect()
}

/// A signal the rules record (`namespace:recover_<signal>:rate`) reads the counters the
/// detector's Prometheus form of it reads: the alert and `recover detect` must not judge
/// "offered" from two different counters (one counted at the decision, one when the
/// request ends, seconds later for work that queued).
#[test]
fn each_recorded_signal_reads_the_detectors_counters() {
    let rules = yaml(RULES);
    let mut recorded = std::collections::BTreeMap::new();
    for group in rules["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            if let (Some(name), Some(expr)) = (rule["record"].as_str(), rule["expr"].as_str()) {
                recorded.insert(name.to_string(), expr.to_string());
            }
        }
    }
    let mut checked = 0;
    for (signal, spec) in recover::detect::default_signals::demo_signals() {
        let (Some(promql), Some(rule)) = (
            spec.promql.as_deref(),
            recorded.get(&format!("namespace:recover_{signal}:rate")),
        ) else {
            continue;
        };
        // A record built from other records reads what they read.
        let mut read = metrics_read(rule);
        for (name, expr) in &recorded {
            if rule.contains(name.as_str()) {
                read.extend(metrics_read(expr));
            }
        }
        assert_eq!(
            read,
            metrics_read(promql),
            "{RULES}: namespace:recover_{signal}:rate and the detector's {signal} read different metrics"
        );
        checked += 1;
    }
    assert!(
        checked >= 3,
        "only {checked} recorded signals matched the detector's"
    );
}

/// The stuck alert at scrape intervals from 10 s to 60 s, each evaluated every 5 s to 60 s,
/// on the demo's incidents sampled as Prometheus would: a stuck overload fires no sooner
/// than persist after the trigger and no later than the failure's onset (a fifth of the
/// rate window: 80 failing attempts a second outnumber the 20 answered over the rest of
/// it) plus a scrape, persist and two evaluations; a 5 s outage that heals by itself never
/// fires although clients hammering it make it fail for a whole rate window; a service a
/// run recovered does not fire again once the run's limit is lifted.
#[test]
fn the_stuck_alert_holds_at_every_scrape_and_evaluation_interval() {
    use crate::support::rule_incidents::{back, healthy, limited, outage, stuck, Incident};
    require("promtool", "prometheus");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(root(RULES), dir.path().join("recover-rules.yaml")).unwrap();
    const T0: u64 = 1200;
    const RUN: u64 = T0 + 900;
    let firing = r#"{__name__="ALERTS", alertname="RecoverStuckOverload", alertstate="firing", namespace="shop", runbook="stuck-overload", severity="critical"}"#;
    let alerts = |range: u64| {
        format!(r#"max_over_time(ALERTS{{alertname="RecoverStuckOverload"}}[{range}s])"#)
    };
    for eval in [5u64, 10, 15, 30, 60] {
        let mut file =
            format!("rule_files: [recover-rules.yaml]\nevaluation_interval: {eval}s\ntests:\n");
        for scrape in [10u64, 15, 20, 30, 45, 60] {
            let (w, p) = tier(scrape.max(eval));
            let latest = (T0 + w / 5 + scrape + 2 * eval + p).div_ceil(eval) * eval;
            let stuck_case = Incident(vec![(T0, healthy()), (5, outage(100.0)), (1800, stuck())]);
            file += &format!(
                "  - interval: {scrape}s\n{}    promql_expr_test:\n      - expr: '{}'\n        eval_time: {}s\n        exp_samples: []\n      - expr: 'ALERTS{{alertname=\"RecoverStuckOverload\"}}'\n        eval_time: {latest}s\n        exp_samples:\n          - labels: '{firing}'\n            value: 1\n",
                stuck_case.input_series(scrape),
                alerts(T0 + p - 1),
                T0 + p - 1,
            );
            let blip = Incident(vec![
                (T0 + 7, healthy()),
                (5, outage(2000.0)),
                (1, back()),
                (1800, healthy()),
            ]);
            file += &format!(
                "  - interval: {scrape}s\n{}    promql_expr_test:\n      - expr: '{}'\n        eval_time: 50m\n        exp_samples: []\n      - expr: 'max_over_time(namespace:recover_failing:bool[30m])'\n        eval_time: 50m\n        exp_samples:\n          - labels: '{{namespace=\"shop\"}}'\n            value: 1\n",
                blip.input_series(scrape),
                alerts(3000),
            );
            let deadline = (RUN + 1800) as f64;
            let recovered = Incident(vec![
                (T0, healthy()),
                (5, outage(100.0)),
                (RUN - T0 - 5, stuck()),
                (120, limited(25.0, deadline)),
                (2, outage(80.0).with("deadline", deadline)),
                (118, limited(50.0, deadline)),
                (1800, healthy()),
            ]);
            let after = RUN + scrape + eval;
            file += &format!(
                "  - interval: {scrape}s\n{}    promql_expr_test:\n      - expr: 'ALERTS{{alertname=\"RecoverStuckOverload\"}}'\n        eval_time: {}s\n        exp_samples:\n          - labels: '{firing}'\n            value: 1\n      - expr: '{}'\n        eval_time: 60m\n        exp_samples: []\n",
                recovered.input_series(scrape),
                RUN - eval,
                alerts(3600 - after),
            );
        }
        let path = dir.path().join(format!("sweep-{eval}s.test.yaml"));
        std::fs::write(&path, &file).unwrap();
        let out = run("promtool", &["test", "rules", path.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "evaluated every {eval}s:\n{}",
            text(&out)
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
