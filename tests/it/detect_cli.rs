//! `recover detect` exit codes without a system to watch: no data is Unknown (12), never
//! Healthy; bad flags are usage errors (2).

fn detect(args: &[&str]) -> std::process::Output {
    crate::support::bin()
        .arg("detect")
        .args(args)
        .output()
        .expect("run recover detect")
}

#[test]
fn unreachable_targets_are_unknown_with_the_reason() {
    let closed = crate::support::ports::loopback_addr();
    let urls: Vec<String> = ["gate", "service", "clients"]
        .iter()
        .map(|r| format!("{r}=http://{closed}/metrics"))
        .collect();
    let mut args = vec!["--observe", "1s", "--output", "json"];
    for u in &urls {
        args.extend(["--metrics-url", u.as_str()]);
    }
    let out = detect(&args);
    assert_eq!(
        out.status.code(),
        Some(12),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "unknown");
    assert!(
        v["arrival_rate"].is_null(),
        "no data must not read as zero: {v}"
    );
    assert!(v["summary"].as_str().unwrap().contains("is down"), "{v}");
    let missing = v["evidence"].as_array().unwrap();
    assert!(
        missing
            .iter()
            .any(|e| e["signal"] == "goodput" && e["value"].is_null()),
        "{v}"
    );
}

#[test]
fn bad_flags_are_usage_errors() {
    let out = detect(&["--metrics-url", "http://127.0.0.1:1/metrics"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ROLE=URL"));
    let out = detect(&[]);
    assert_eq!(out.status.code(), Some(2));
    let out = detect(&[
        "--metrics-url",
        "gate=http://127.0.0.1:1/m",
        "--runbook",
        "no-such-runbook",
    ]);
    assert_eq!(out.status.code(), Some(2));
}
