//! Every HTTP refusal from `recover serve` and from the gate's admin listener has one
//! shape, `{"error": ..., "field": ...}`, and is counted on `/metrics` by route and
//! status: refusals by a handler (bad token, bad payload), by a body cap (413), and those
//! axum makes by itself (no such route, wrong method). And serve's views give every
//! time as RFC 3339, not serde's `{"secs_since_epoch": ...}`.

use crate::support::gate::{self, upstream};
use crate::support::serve::{assert_exposes, Http};
use recover::detect::{Verdict, VerdictKind};
use recover::serve::config::{self, ServeConfig};
use recover::serve::launcher::LaunchError;
use recover::serve::{
    CheckRequest, LaunchRequest, Mode, Receiver, RunLauncher, RunOutcome, RunSummary,
};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOKEN: &str = "refusals-token-0123456789";
const ADMIN: &str = "refusals-admin-0123456789";

/// Says stuck, and every run succeeds at once.
struct Succeeds;

#[async_trait::async_trait]
impl RunLauncher for Succeeds {
    async fn check(&self, _: &CheckRequest) -> Result<Verdict, LaunchError> {
        Ok(Verdict {
            verdict: VerdictKind::Stuck,
            k: Some(4.0),
            arrival_rate: Some(500.0),
            capacity: Some(200.0),
            capacity_cold: Some(100.0),
            ..Default::default()
        })
    }

    async fn launch(&self, _: &LaunchRequest) -> RunSummary {
        RunSummary {
            outcome: RunOutcome::Succeeded,
            message: "done".into(),
            journal: None,
            details: None,
        }
    }

    fn cancel_all(&self) {}
}

struct Serve {
    base: String,
    dir: tempfile::TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn serve() -> Serve {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("token"), TOKEN).unwrap();
    std::fs::write(d.join("admin"), ADMIN).unwrap();
    let text = format!(
        r#"apiVersion: recover/v1
kind: ServeConfig
auth:
  bearer_token: {{ file: {d}/token }}
  admin_token: {{ file: {d}/admin }}
budget: {{ runs_per_window: 3, window: 1h, cooldown: 1h }}
max_body_bytes: 4096
state_file: {d}/state.json
routes:
  - name: config-service
    match: {{ alertname: ConfigServiceStuck, namespace: demo }}
    runbook: stuck-overload
    target: {{ platform: local, name: demo, inventory: {d}/inventory.yaml }}
"#,
        d = d.display()
    );
    let cfg: ServeConfig = config::parse(&text, "serve.yaml").unwrap();
    let rx = Receiver::new(cfg, Mode::Act, Arc::new(Succeeds)).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, stop) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(recover::serve::http::serve(listener, rx, async move {
        let _ = stop.await;
    }));
    Serve {
        base,
        dir,
        _stop: tx,
    }
}

/// A refusal: the status, and a body of exactly `error` (text) and `field`.
fn assert_refusal(what: &str, status: u16, body: &str, want: u16, field: Option<&str>) -> Value {
    assert_eq!(status, want, "{what}: {body}");
    let j: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{what}: {e}: {body}"));
    let keys: Vec<&String> = j.as_object().expect("an object").keys().collect();
    assert_eq!(keys, ["error", "field"], "{what}: {body}");
    assert!(
        j["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{what}: {body}"
    );
    assert_eq!(j["field"].as_str(), field, "{what}: {body}");
    j
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_serve_refusal_has_the_error_shape_and_is_counted() {
    let s = serve().await;
    let c = Http::default();
    let url = |p: &str| format!("{}{p}", s.base);
    let bearer = format!("Bearer {TOKEN}");
    let auth = [
        ("authorization", bearer.as_str()),
        ("content-type", "application/json"),
    ];

    let big = vec![b'x'; 5000];
    let r = c.send("POST", &url("/alerts"), &auth, &big).await.unwrap();
    let j = assert_refusal("413", r.status, &r.body, 413, Some("body"));
    assert_eq!(j["error"], "body over 4 KiB");

    let r = c.send("POST", &url("/alerts"), &[], "{}").await.unwrap();
    assert_refusal("no token", r.status, &r.body, 401, None);
    assert_eq!(r.headers["www-authenticate"], "Bearer");

    let r = c.send("POST", &url("/alerts"), &auth, "{").await.unwrap();
    assert_refusal("bad payload", r.status, &r.body, 400, Some("body"));

    let r = c.send("GET", &url("/runs/nope"), &[], "").await.unwrap();
    assert_refusal("no run", r.status, &r.body, 404, None);

    let r = c
        .send("GET", &url("/no/such/thing"), &[], "")
        .await
        .unwrap();
    let j = assert_refusal("no route", r.status, &r.body, 404, None);
    assert_eq!(j["error"], "no such route: GET /no/such/thing");

    let r = c.send("DELETE", &url("/alerts"), &[], "").await.unwrap();
    assert_refusal("wrong method", r.status, &r.body, 405, None);

    let admin_body = r#"{"target": "local:demo"}"#;
    let r = c
        .send("POST", &url("/admin/reset"), &auth, admin_body)
        .await
        .unwrap();
    assert_refusal("webhook token on admin", r.status, &r.body, 401, None);
    let admin = format!("Bearer {ADMIN}");
    let admin_auth = [("authorization", admin.as_str())];
    let r = c
        .send(
            "POST",
            &url("/admin/reset"),
            &admin_auth,
            r#"{"target": "nope"}"#,
        )
        .await
        .unwrap();
    assert_refusal("unknown target", r.status, &r.body, 404, Some("target"));

    let m = c.send("GET", &url("/metrics"), &[], "").await.unwrap().body;
    assert_exposes(
        &m,
        &[
            r#"recover_serve_http_refusals_total{route="/alerts",status="413"} 1"#,
            r#"recover_serve_http_refusals_total{route="/alerts",status="401"} 1"#,
            r#"recover_serve_http_refusals_total{route="/alerts",status="400"} 1"#,
            r#"recover_serve_http_refusals_total{route="/runs/{id}",status="404"} 1"#,
            r#"recover_serve_http_refusals_total{route="unmatched",status="404"} 1"#,
            r#"recover_serve_http_refusals_total{route="/alerts",status="405"} 1"#,
            r#"recover_serve_http_refusals_total{route="/admin/reset",status="401"} 1"#,
            r#"recover_serve_http_refusals_total{route="/admin/reset",status="404"} 1"#,
            // The 413 is also a webhook refused as a bad request.
            r#"recover_serve_webhooks_total{result="bad_request"} 2"#,
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_gate_admin_refusal_has_the_error_shape_and_is_counted() {
    let up = upstream(Duration::ZERO).await;
    let g = gate::start(gate::config(&[&up], gate::limit(None, 1, None))).await;
    let c = gate::client();
    let limit = g.admin_url("/admin/limit");
    let r = c.send("GET", &limit, &[], "").await.unwrap();
    assert_refusal("no token", r.status, &r.body, 401, None);
    let big = format!(r#"{{"note": "{}"}}"#, "x".repeat(70 * 1024));
    let r = gate::put_limit(&g, &big).await;
    let j = assert_refusal("413", r.status, &r.body, 413, Some("body"));
    assert_eq!(j["error"], "body over 64 KiB");
    let r = gate::put_limit(
        &g,
        r#"{"rate_per_s": -1, "burst": 1, "max_in_flight": null}"#,
    )
    .await;
    assert_refusal("bad rate", r.status, &r.body, 400, Some("rate_per_s"));
    let r = c
        .send("GET", &g.admin_url("/nothing"), &[], "")
        .await
        .unwrap();
    assert_refusal("no route", r.status, &r.body, 404, None);
    let r = c.send("POST", &limit, &[], "").await.unwrap();
    assert_refusal("wrong method", r.status, &r.body, 405, None);

    let m = gate::metrics(g.admin).await;
    for (route, status) in [
        ("/admin/limit", 401),
        ("/admin/limit", 413),
        ("/admin/limit", 400),
        ("unmatched", 404),
        ("/admin/limit", 405),
    ] {
        let series =
            format!(r#"recover_gate_admin_refusals_total{{route="{route}",status="{status}"}}"#);
        assert_eq!(gate::sample(&m, &series), Some(1.0), "{series} in:\n{m}");
    }
}

/// Every string in `v` that looks like a time parses as RFC 3339, and no time is written
/// as `secs_since_epoch`; returns how many times were seen.
fn rfc3339_times(v: &Value) -> usize {
    match v {
        Value::Object(m) => {
            assert!(!m.contains_key("secs_since_epoch"), "{v}");
            m.iter()
                .map(|(k, x)| {
                    let timeish = k.ends_with("_at") || k.ends_with("_until") || k == "starts";
                    match x {
                        Value::String(s) if timeish => {
                            humantime::parse_rfc3339(s)
                                .unwrap_or_else(|e| panic!("{k}: {s:?}: {e}"));
                            1
                        }
                        Value::Array(a) if timeish => a.iter().map(rfc3339_times_in).sum(),
                        other => rfc3339_times(other),
                    }
                })
                .sum()
        }
        Value::Array(a) => a.iter().map(rfc3339_times).sum(),
        _ => 0,
    }
}

fn rfc3339_times_in(v: &Value) -> usize {
    match v {
        Value::String(s) => {
            humantime::parse_rfc3339(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
            1
        }
        other => panic!("a time that is not a string: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_gives_every_time_as_rfc3339() {
    let s = serve().await;
    let c = Http::default();
    let bearer = format!("Bearer {TOKEN}");
    let auth = [
        ("authorization", bearer.as_str()),
        ("content-type", "application/json"),
    ];
    let firing = crate::support::fixture("alertmanager/firing.json");
    let r = c
        .send("POST", &format!("{}/alerts", s.base), &auth, firing)
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    // Once the run is over the target has a cooldown and a budget slot to free: times.
    let t0 = Instant::now();
    let targets = loop {
        let t: Value = serde_json::from_str(
            &c.send("GET", &format!("{}/targets", s.base), &[], "")
                .await
                .unwrap()
                .body,
        )
        .unwrap();
        if !t["targets"][0]["budget"]["cooldown_until"].is_null() {
            break t;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "no cooldown: {t}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(rfc3339_times(&targets) >= 2, "{targets}");
    let runs: Value = serde_json::from_str(
        &c.send("GET", &format!("{}/runs", s.base), &[], "")
            .await
            .unwrap()
            .body,
    )
    .unwrap();
    assert!(rfc3339_times(&runs) >= 1, "{runs}");
    // The state file that keeps the breaker across restarts too.
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(s.dir.path().join("state.json")).unwrap())
            .unwrap();
    assert!(rfc3339_times(&state) >= 1, "{state}");
}
