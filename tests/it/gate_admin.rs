//! The admin API over real sockets: bearer token required, bad JSON refused naming the
//! field, a change answered with its version, shown in /metrics and written to the
//! state file.

use crate::support::gate::*;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_needs_the_bearer_token_but_metrics_and_healthz_do_not() {
    let up = upstream(Duration::ZERO).await;
    let gate = start(config(&[&up], limit(None, 1, None))).await;
    let c = client();
    let url = gate.admin_url("/admin/limit");
    let body = r#"{"rate_per_s": 0, "burst": 0, "max_in_flight": null}"#;
    assert_eq!(c.send("GET", &url, &[], "").await.unwrap().status, 401);
    let r = c.send("PUT", &url, &[], body).await.unwrap();
    assert_eq!(r.status, 401);
    let wrong = [("authorization", "Bearer not-the-token")];
    assert_eq!(c.send("PUT", &url, &wrong, body).await.unwrap().status, 401);
    // Nothing changed: the gate still passes traffic.
    assert_eq!(c.get(&gate.url("/")).await.status, 200);
    assert_eq!(c.get(&gate.admin_url("/healthz")).await.status, 200);
    assert_eq!(c.get(&gate.admin_url("/metrics")).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_json_is_a_400_naming_the_field_and_keeps_the_limit() {
    let up = upstream(Duration::ZERO).await;
    let gate = start(config(&[&up], limit(Some(50.0), 5, None))).await;
    for (body, field) in [
        (
            r#"{"rate_per_s": -5, "burst": 1, "max_in_flight": null}"#,
            "rate_per_s",
        ),
        (
            r#"{"rate_per_s": 10, "burst": 0, "max_in_flight": null}"#,
            "burst",
        ),
        (
            r#"{"rate_per_s": 10, "burst": 1, "max_in_flight": null, "rate": 3}"#,
            "rate",
        ),
        (r#"{"burst": 3, "max_in_flight": null}"#, "rate_per_s"),
        (r#"{"rate_per_s": 1e-300}"#, "rate_per_s"),
        (r#"{"rate_per_s": 1e-12, "burst": 1}"#, "rate_per_s"),
        (r#"{"rate_per_s": 1, "burst": 4000000000}"#, "burst"),
        (
            r#"{"rate_per_s": 10, "burst": 1, "max_in_flight": "many"}"#,
            "max_in_flight",
        ),
        ("{not json", "body"),
    ] {
        let r = put_limit(&gate, body).await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        let j = r.json();
        assert_eq!(j["field"], field, "{body}: {}", r.body);
        assert!(j["error"].as_str().unwrap().contains(field), "{}", r.body);
    }
    let auth = format!("Bearer {TOKEN}");
    let r = client()
        .send(
            "GET",
            &gate.admin_url("/admin/limit"),
            &[("authorization", &auth)],
            "",
        )
        .await
        .unwrap();
    assert_eq!(r.json()["limit"]["rate_per_s"], 50.0, "{}", r.body);
    assert_eq!(r.json()["version"], "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_answers_the_applied_limit_and_version_and_persists_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("gate-state.json");
    let up = upstream(Duration::ZERO).await;
    let mut cfg = config(&[&up], limit(None, 1, None));
    cfg.state_file = Some(state.clone());
    let gate = start(cfg).await;

    let r = put_limit(
        &gate,
        r#"{"rate_per_s": 25.5, "burst": 4, "max_in_flight": 30, "note": "runbook step 1"}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let j = r.json();
    assert_eq!(j["version"], "1");
    assert_eq!(j["limit"]["rate_per_s"], 25.5);
    assert_eq!(j["limit"]["note"], "runbook step 1");
    let r = put_limit(
        &gate,
        r#"{"rate_per_s": 40, "burst": 4, "max_in_flight": null}"#,
    )
    .await;
    assert_eq!(r.json()["version"], "2");

    // The state file keeps the limit with its version and the share it had.
    let stored: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert_eq!(stored["limit"]["rate_per_s"], 40.0);
    assert_eq!(stored["limit"]["max_in_flight"], serde_json::Value::Null);
    assert_eq!(stored["version"], "2");
    assert_eq!(stored["peers"]["count"], 1);

    let m = metrics(gate.admin).await;
    assert_eq!(
        sample(&m, r#"recover_gate_limit_applied_info{version="2"}"#),
        Some(1.0)
    );
    assert_eq!(
        sample(&m, r#"recover_gate_limit_applied_info{version="1"}"#),
        None
    );
    assert_eq!(sample(&m, "recover_gate_limit_rate_per_second"), Some(40.0));
    assert_eq!(sample(&m, "recover_gate_limit_burst"), Some(4.0));
    assert!(m.contains("recover_gate_limit_max_in_flight +Inf"), "{m}");
    // No "review by" in the note: no deadline to miss.
    assert!(
        m.contains("recover_gate_limit_review_deadline_timestamp_seconds +Inf"),
        "{m}"
    );

    // A limit whose note says when it must be reviewed exports that instant.
    let r = put_limit(
        &gate,
        r#"{"rate_per_s": 40, "burst": 4, "max_in_flight": null, "note": "set by hand; review by 2030-01-01T00:00:00Z: lift it if the service is fine"}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let m = metrics(gate.admin).await;
    assert_eq!(
        sample(&m, "recover_gate_limit_review_deadline_timestamp_seconds"),
        Some(1_893_456_000.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_lifts_the_limit_and_burst_may_be_left_out() {
    let up = upstream(Duration::ZERO).await;
    let gate = start(config(&[&up], limit(Some(0.0), 0, None))).await;
    assert_eq!(client().get(&gate.url("/")).await.status, 429);
    let r = put_limit(&gate, r#"{"rate_per_s": 40}"#).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["limit"]["burst"], 20, "half a second of the rate");
    let r = put_limit(&gate, r#"{"rate_per_s": null}"#).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["limit"]["rate_per_s"], serde_json::Value::Null);
    assert_eq!(r.json()["limit"]["max_in_flight"], serde_json::Value::Null);
    for _ in 0..50 {
        assert_eq!(client().get(&gate.url("/")).await.status, 200);
    }
}
