//! Shadow from the command line, against a real gate on 127.0.0.1: `recover gate limit
//! set --shadow` and `get`, and `recover plan --shadow`, which never lifts a limit the
//! gate enforces.

use crate::support::bin;
use crate::support::gate::*;
use std::process::Output;
use std::time::Duration;

/// Run `recover ARGS --admin URL --token-file PATH` against `gate`, off the runtime.
async fn recover(gate: &Gate, args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("gate.token");
    std::fs::write(&token, TOKEN).unwrap();
    let mut cmd = bin();
    cmd.args(args)
        .args(["--admin", &gate.admin_url("")])
        .arg("--token-file")
        .arg(&token);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    drop(dir);
    out
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_limit_set_shadow_puts_the_limit_in_shadow_and_get_says_so() {
    let up = upstream(Duration::ZERO).await;
    let gate = start(config(&[&up], limit(None, 1, None))).await;
    let set = recover(&gate, &["gate", "limit", "set", "--rate", "0", "--shadow"]).await;
    assert_eq!(set.status.code(), Some(0), "{}", text(&set));
    assert!(text(&set).contains("shadow: on"), "{}", text(&set));
    // A block-all limit in shadow refuses nothing and counts everything.
    assert_eq!(client().get(&gate.url("/")).await.status, 200);
    let m = metrics(gate.admin).await;
    assert_eq!(sample(&m, "recover_gate_shadow"), Some(1.0));
    assert_eq!(
        sample(&m, r#"recover_gate_shadow_refusals_total{reason="rate"}"#),
        Some(1.0)
    );

    let get = recover(&gate, &["gate", "limit", "get", "--output", "json"]).await;
    assert_eq!(get.status.code(), Some(0), "{}", text(&get));
    let j: serde_json::Value = serde_json::from_slice(&get.stdout).unwrap();
    assert_eq!(j["shadow"], true, "{j}");
    assert_eq!(j["rate_per_s"], 0.0, "{j}");

    let enforce = recover(&gate, &["gate", "limit", "set", "--rate", "40"]).await;
    assert_eq!(enforce.status.code(), Some(0), "{}", text(&enforce));
    let get = recover(&gate, &["gate", "limit", "get"]).await;
    assert!(text(&get).contains("shadow: off"), "{}", text(&get));
    assert_eq!(
        sample(&metrics(gate.admin).await, "recover_gate_shadow"),
        Some(0.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_shadow_puts_the_plans_limit_in_shadow_and_never_lifts_an_enforced_one() {
    let up = upstream(Duration::ZERO).await;
    let gate = start(config(&[&up], limit(None, 1, None))).await;
    let plan = [
        "plan",
        "--arrival",
        "200",
        "--capacity-cold",
        "100",
        "--k",
        "2",
        "--headroom",
        "0.9",
        "--shadow",
    ];
    let out = recover(&gate, &plan).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("is in shadow"), "{}", text(&out));
    let m = metrics(gate.admin).await;
    assert_eq!(sample(&m, "recover_gate_shadow"), Some(1.0));
    // capacity_cold / k x headroom = 100 / 2 x 0.9
    assert_eq!(
        sample(&m, "recover_gate_shadow_rate_per_second"),
        Some(45.0)
    );

    let r = put_limit(&gate, r#"{"rate_per_s": 30}"#).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let out = recover(&gate, &plan).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        text(&out).contains("enforces a limit now"),
        "{}",
        text(&out)
    );
    let m = metrics(gate.admin).await;
    assert_eq!(sample(&m, "recover_gate_shadow"), Some(0.0));
    assert_eq!(sample(&m, "recover_gate_limit_rate_per_second"), Some(30.0));
}

#[test]
fn plan_shadow_without_a_gate_is_a_usage_error() {
    let out = bin()
        .args([
            "plan",
            "--arrival",
            "200",
            "--capacity-cold",
            "100",
            "--k",
            "2",
        ])
        .arg("--shadow")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--admin"), "{}", text(&out));
    assert!(
        out.stdout.is_empty(),
        "nothing planned before the usage error"
    );
}
