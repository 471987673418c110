//! A burst the engine passes for a readmission wave (up to a few thousand) goes through the
//! admin API as sent and is enforced exactly, with governor's semantics as
//! [`recover::gate::admission`] applies them: a new limit carries over no more than the old
//! limiter had left, up to the new burst, and then admits at the rate; a change asking
//! `"fill": true` starts with the bucket full at the new burst, once; `"fill": N` with N
//! tokens, never above the burst.

use crate::support::gate::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One cell per 1000 s: none refills while the test runs.
const SLOW: f64 = 0.001;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_thousands_set_through_the_admin_api_admits_exactly_that_many() {
    for burst in [1000u32, 3000] {
        let up = upstream(Duration::ZERO).await;
        // A fresh limiter starts full: 5000 cells to carry over.
        let gate = start(config(&[&up], limit(Some(SLOW), 5000, None))).await;
        let r = put_limit(
            &gate,
            &format!(r#"{{"rate_per_s": {SLOW}, "burst": {burst}}}"#),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.json()["limit"]["burst"], burst, "{}", r.body);
        assert_eq!(
            sample(&metrics(gate.admin).await, "recover_gate_limit_burst"),
            Some(f64::from(burst))
        );
        let extra = 200;
        let (ok, refused) = send(&gate.url("/"), u64::from(burst) + extra, 8).await;
        assert_eq!(
            (ok, refused),
            (u64::from(burst), extra),
            "burst {burst}: admitted / refused"
        );
        assert_eq!(up.count(), u64::from(burst));
    }
}

/// A gate at `SLOW` whose bucket is empty (its one cell spent), with a state file.
async fn drained_gate(dir: &std::path::Path) -> (Upstream, Gate) {
    let up = upstream(Duration::ZERO).await;
    let mut cfg = config(&[&up], limit(Some(SLOW), 1, None));
    cfg.state_file = Some(dir.join("gate-state.json"));
    let gate = start(cfg).await;
    assert_eq!(
        send(&gate.url("/"), 2, 1).await,
        (1, 1),
        "the bucket starts with 1"
    );
    (up, gate)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_asking_fill_admits_exactly_its_burst_at_once_and_is_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let (up, gate) = drained_gate(dir.path()).await;
    let r = put_limit(
        &gate,
        &format!(r#"{{"rate_per_s": {SLOW}, "burst": 50, "fill": true}}"#),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["filled"], true, "{}", r.body);
    assert_eq!(send(&gate.url("/"), 51, 8).await, (50, 1));
    assert_eq!(up.count(), 1 + 50);
    // A one-off: neither the limit in force nor the state file says fill.
    let now = admin_limit(gate.admin).await;
    assert!(
        now.get("filled").is_none() && now["limit"].get("fill").is_none(),
        "{now}"
    );
    let stored = std::fs::read_to_string(dir.path().join("gate-state.json")).unwrap();
    assert!(!stored.contains("fill"), "{stored}");
}

/// `"fill": N` starts the bucket with exactly N tokens (the answer says so), then the
/// rate; N above the burst gives the burst.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_asking_fill_n_admits_exactly_n_at_once_and_never_above_the_burst() {
    let dir = tempfile::tempdir().unwrap();
    let (up, gate) = drained_gate(dir.path()).await;
    let r = put_limit(
        &gate,
        &format!(r#"{{"rate_per_s": {SLOW}, "burst": 50, "fill": 17}}"#),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (r.json()["filled"].clone(), r.json()["tokens"].clone()),
        (true.into(), 17.into()),
        "{}",
        r.body
    );
    assert_eq!(send(&gate.url("/"), 51, 8).await, (17, 34));
    let r = put_limit(
        &gate,
        &format!(r#"{{"rate_per_s": {SLOW}, "burst": 50, "fill": 500}}"#),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["tokens"], 50, "{}", r.body);
    assert_eq!(send(&gate.url("/"), 51, 8).await, (50, 1));
    assert_eq!(up.count(), 1 + 17 + 50);
    let stored = std::fs::read_to_string(dir.path().join("gate-state.json")).unwrap();
    assert!(!stored.contains("fill"), "{stored}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_without_fill_opens_no_burst() {
    let dir = tempfile::tempdir().unwrap();
    let (up, gate) = drained_gate(dir.path()).await;
    let r = put_limit(&gate, &format!(r#"{{"rate_per_s": {SLOW}, "burst": 50}}"#)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.json().get("filled").is_none(), "{}", r.body);
    assert_eq!(send(&gate.url("/"), 51, 8).await, (0, 51));
    assert_eq!(up.count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_fill_is_a_400_naming_it_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_up, gate) = drained_gate(dir.path()).await;
    for body in [
        r#"{"rate_per_s": 5, "burst": 50, "fill": "yes"}"#,
        r#"{"rate_per_s": 5, "burst": 50, "fill": null}"#,
        r#"{"rate_per_s": 5, "burst": 50, "fill": -3}"#,
        r#"{"rate_per_s": 5, "burst": 50, "fill": 2.5}"#,
        r#"{"rate_per_s": 5, "burst": 50, "fill": "12"}"#,
        r#"{"rate_per_s": null, "fill": true}"#,
        r#"{"rate_per_s": 0, "fill": 3}"#,
    ] {
        let r = put_limit(&gate, body).await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert_eq!(r.json()["field"], "fill", "{body}: {}", r.body);
    }
    assert_eq!(admin_limit(gate.admin).await["version"], "0");
}

/// The engine's client asks the real gate for a full bucket, then for a count of tokens,
/// and checks the gate says it filled them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_gate_client_fills_through_the_admin_api() {
    use recover::gate::limit::{Fill, LimitChange};
    use recover::platform::local::gate::HttpGate;
    use recover::platform::GateControl;
    let dir = tempfile::tempdir().unwrap();
    let (_up, gate) = drained_gate(dir.path()).await;
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let client = HttpGate::new(&gate.admin_url(""), token);
    assert!(client.fills());
    let change = LimitChange {
        limit: limit(Some(SLOW), 20, None),
        fill: Fill::Full,
    };
    client.change_limit(&change).await.unwrap();
    assert_eq!(send(&gate.url("/"), 21, 4).await, (20, 1));
    let change = LimitChange {
        fill: Fill::Tokens(7),
        ..change
    };
    client.change_limit(&change).await.unwrap();
    assert_eq!(send(&gate.url("/"), 21, 4).await, (7, 14));
}

/// `recover gate limit set --fill` from a shell: the burst at once on a local gate;
/// `--fill-tokens N` that many; a usage error (exit 2) naming the flag where it cannot
/// apply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_limit_set_fill_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let (_up, gate) = drained_gate(dir.path()).await;
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let admin = gate.admin_url("");
    let run = |args: Vec<String>| {
        let mut cmd = crate::support::bin();
        cmd.args(args);
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
    };
    let local = |extra: &[&str]| {
        let mut a: Vec<String> = ["gate", "limit", "set", "--fill", "--admin", &admin]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect();
        a.extend(["--token-file".to_string(), token.display().to_string()]);
        a
    };
    let out = run(local(&["--rate", &SLOW.to_string(), "--burst", "30"]))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(send(&gate.url("/"), 31, 4).await, (30, 1));
    let tokens = |extra: &[&str]| {
        let mut a = local(extra);
        a.retain(|s| s != "--fill");
        a
    };
    let out = run(tokens(&[
        "--rate",
        &SLOW.to_string(),
        "--burst",
        "30",
        "--fill-tokens",
        "12",
    ]))
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(send(&gate.url("/"), 31, 4).await, (12, 19));
    let out = run(tokens(&["--rate", "0", "--fill-tokens", "3"]))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--fill-tokens"),
        "{out:?}"
    );
    let out = run(local(&["--rate", "5", "--fill-tokens", "3"]))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = run(local(&["--rate", "0"])).await.unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--fill"),
        "{out:?}"
    );
    let kube = [
        "gate", "limit", "set", "--fill", "--rate", "5", "--target", "kube",
    ];
    let mut kube: Vec<String> = kube.iter().map(|s| s.to_string()).collect();
    kube.extend(["--namespace".to_string(), "shop".to_string()]);
    let out = run(kube).await.unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ConfigMap"),
        "{out:?}"
    );
}

/// Send `n` requests from `workers` concurrent clients; (200s, 429s).
async fn send(url: &str, n: u64, workers: usize) -> (u64, u64) {
    let next = Arc::new(AtomicU64::new(0));
    let (ok, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let tasks: Vec<_> = (0..workers)
        .map(|_| {
            let (url, next, ok, refused) =
                (url.to_string(), next.clone(), ok.clone(), refused.clone());
            tokio::spawn(async move {
                let c = client();
                while next.fetch_add(1, Ordering::SeqCst) < n {
                    match c.status(&url).await {
                        Some(200) => ok.fetch_add(1, Ordering::SeqCst),
                        Some(429) => refused.fetch_add(1, Ordering::SeqCst),
                        other => panic!("unexpected answer {other:?}"),
                    };
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    (ok.load(Ordering::SeqCst), refused.load(Ordering::SeqCst))
}
