//! `serve.yaml` parsing and validation, each error at its field's line.

use super::*;

const GOOD: &str = r#"
apiVersion: recover/v1
kind: ServeConfig
auth:
  bearer_token: { env: TOKEN }
budget: { runs_per_window: 3, window: 1h, breaker_after_failures: 2 }
routes:
  - name: stuck
    match: { alertname: ConfigServiceStuck }
    runbook: stuck-overload
    target: { platform: local, name: demo, inventory: inv.yaml }
  - name: kube
    match: { alertname: ConfigServiceStuck, namespace: shop }
    runbook: stuck-overload
    target: { platform: kube, namespace: shop, deployment: config-service }
"#;

#[test]
fn parses_routes_and_target_ids() {
    let c = parse(GOOD, "serve.yaml").unwrap();
    assert_eq!(c.routes[0].target.id(), "local:demo");
    assert_eq!(c.routes[1].target.id(), "kube:shop/config-service");
    assert_eq!(c.budget.runs_per_window, 3);
    assert_eq!(c.recheck, RecheckConfig::default());
    let labels: BTreeMap<_, _> = [("alertname".to_string(), "ConfigServiceStuck".into())]
        .into_iter()
        .collect();
    assert_eq!(c.route_for(&labels).unwrap().name, "stuck");
}

#[test]
fn unknown_field_names_line_column_and_path() {
    let text = GOOD.replace("runs_per_window: 3", "runs_per_windw: 3");
    let e = parse(&text, "serve.yaml").unwrap_err().to_string();
    assert!(e.starts_with("serve.yaml:6:"), "{e}");
    assert!(e.contains("budget"), "{e}");
    assert!(e.contains("runs_per_windw"), "{e}");
}

#[test]
fn bad_duration_and_missing_auth_are_refused() {
    let e = parse(&GOOD.replace("window: 1h", "window: 60"), "s.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("budget.window") && e.contains("with a unit"),
        "{e}"
    );
    let e = parse(
        &GOOD.replace("  bearer_token: { env: TOKEN }\n", ""),
        "s.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("auth") && e.contains("bearer_token or hmac_secret"),
        "{e}"
    );
}

#[test]
fn empty_matcher_is_refused() {
    let e = parse(
        &GOOD.replace("match: { alertname: ConfigServiceStuck }", "match: {}"),
        "s.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("routes[0].match"), "{e}");
}

#[test]
fn shipped_example_and_manifest_configs_parse() {
    parse(
        include_str!("../../examples/serve.yaml"),
        "examples/serve.yaml",
    )
    .unwrap();
    let manifest = include_str!("../../manifests/serve.yaml");
    let cm = serde_yaml::Deserializer::from_str(manifest)
        .map(|d| serde_yaml::Value::deserialize(d).unwrap())
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "recover-serve")
        .unwrap();
    let text = cm["data"]["serve.yaml"].as_str().unwrap();
    let c = parse(text, "manifests/serve.yaml").unwrap();
    assert_eq!(c.routes[0].target.id(), "kube:recover-demo/config-service");
    assert_eq!(
        c.state_configmap.as_deref(),
        Some("recover-demo/recover-serve-state"),
        "a rescheduled receiver must remember an open breaker"
    );
}

#[test]
fn published_and_short_secrets_are_refused_saying_how_to_make_one() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("token");
    let r = SecretRef {
        file: Some(f.clone()),
        env: None,
    };
    std::fs::write(&f, "change-me-recover-demo\n").unwrap();
    let e = read_secret("auth.bearer_token", &r)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("published example") && e.contains("openssl rand"),
        "{e}"
    );
    std::fs::write(&f, "short").unwrap();
    let e = read_secret("auth.bearer_token", &r)
        .unwrap_err()
        .to_string();
    assert!(e.contains("openssl rand"), "{e}");
    std::fs::remove_file(&f).unwrap();
    let e = read_secret("auth.bearer_token", &r)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cannot read") && e.contains("create secret"),
        "{e}"
    );
    std::fs::write(&f, "9f86d081884c7d659a2feaa0c55ad015").unwrap();
    assert!(read_secret("auth.bearer_token", &r).is_ok());
}

const DOC: &str = "\
apiVersion: recover/v1
kind: ServeConfig
auth:
  bearer_token:
    env: TOKEN
budget:
  runs_per_window: 3
  window: 1h
routes:
  - name: stuck
    match:
      alertname: ConfigServiceStuck
    runbook: stuck-overload
    target:
      platform: local
      name: demo
      inventory: inv.yaml
  - name: kube
    match: { alertname: ConfigServiceStuck, namespace: shop }
    runbook: stuck-overload
    target: { platform: kube, namespace: shop, deployment: config-service }
";

/// Each error names the line the problem is on, once, with the field path once.
#[test]
fn errors_point_at_the_line_of_the_field_once() {
    for (from, to, want) in [
        (
            "window: 1h",
            "window: 60",
            "s.yaml:8:3: budget.window: invalid duration",
        ),
        (
            "runs_per_window: 3",
            "runs_per_windw: 3",
            "s.yaml:7:3: budget.runs_per_windw: unknown field `runs_per_windw`",
        ),
        (
            "      name: demo\n",
            "",
            "s.yaml:14:5: routes[0].target: missing field `name`",
        ),
        (
            "platform: local",
            "platform: lokal",
            "s.yaml:15:17: routes[0].target.platform: unknown variant `lokal`",
        ),
        (
            "deployment: config-service",
            "deploymnt: config-service",
            "s.yaml:21:5: routes[1].target: unknown field `deploymnt`",
        ),
        (
            "runs_per_window: 3",
            "runs_per_window: 0",
            "s.yaml:7:3: budget.runs_per_window: must be at least 1",
        ),
        (
            "  - name: kube",
            "  - name: stuck",
            "s.yaml:18:5: routes[1].name: duplicate route name",
        ),
    ] {
        let e = parse(&DOC.replacen(from, to, 1), "s.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(want), "{from:?} -> {to:?}: {e}");
        assert!(!e.contains(" at line "), "the location twice: {e}");
    }
}

#[test]
fn a_notify_hook_needs_a_program() {
    let with = |hook: &str| GOOD.replace("routes:", &format!("{hook}\nroutes:"));
    let c = parse(
        &with("notify_hook: { command: [/usr/local/bin/page, --team, sre] }"),
        "serve.yaml",
    )
    .unwrap();
    let hook = c.notify_hook.unwrap();
    assert_eq!(hook.command[0], "/usr/local/bin/page");
    assert_eq!(hook.timeout, Duration::from_secs(10));
    let e = parse(&with("notify_hook: { command: [] }"), "serve.yaml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("notify_hook.command"), "{e}");
    assert!(e.contains("give the program"), "{e}");
}
