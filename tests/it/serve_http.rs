//! The receiver over real HTTP on 127.0.0.1, posting recorded Alertmanager payloads, with
//! a launcher that records what it was asked to do and answers with scripted verdicts and
//! outcomes. This tests the receiver's decisions (auth, parsing, dedup, joining, budget,
//! breaker, observe mode), not the engine.

use recover::detect::{Verdict, VerdictKind};
use recover::serve::config::{self, ServeConfig};
use recover::serve::{
    CheckRequest, LaunchRequest, Mode, Receiver, RunLauncher, RunOutcome, RunSummary,
};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

use crate::support::fixture;
use crate::support::serve::{assert_exposes, Http};

const TOKEN: &str = "test-token-0123456789abcdef";
const HMAC: &str = "test-hmac-secret-0123456789";
const ADMIN: &str = "test-admin-token-0123456789";

/// Records every call; verdicts and outcomes come from queues (default: Stuck, Succeeded).
/// Runs block until the test releases them, so "in progress" is under the test's control.
struct Recorder {
    checks: Mutex<Vec<CheckRequest>>,
    launches: Mutex<Vec<LaunchRequest>>,
    verdicts: Mutex<VecDeque<VerdictKind>>,
    outcomes: Mutex<VecDeque<RunOutcome>>,
    release: Semaphore,
    hold_runs: bool,
    cancelled: std::sync::atomic::AtomicBool,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            checks: Mutex::default(),
            launches: Mutex::default(),
            verdicts: Mutex::default(),
            outcomes: Mutex::default(),
            release: Semaphore::new(0),
            hold_runs: false,
            cancelled: Default::default(),
        }
    }
}

impl Recorder {
    fn checks(&self) -> usize {
        self.checks.lock().unwrap().len()
    }
    fn launches(&self) -> Vec<LaunchRequest> {
        self.launches.lock().unwrap().clone()
    }
}

fn verdict(kind: VerdictKind) -> Verdict {
    Verdict {
        verdict: kind,
        k: Some(4.0),
        arrival_rate: Some(500.0),
        capacity: Some(200.0),
        capacity_cold: Some(100.0),
        evidence: vec![],
        ..Default::default()
    }
}

#[async_trait::async_trait]
impl RunLauncher for Recorder {
    async fn check(
        &self,
        req: &CheckRequest,
    ) -> Result<Verdict, recover::serve::launcher::LaunchError> {
        self.checks.lock().unwrap().push(req.clone());
        let v = self
            .verdicts
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(VerdictKind::Stuck);
        Ok(verdict(v))
    }

    async fn launch(&self, req: &LaunchRequest) -> RunSummary {
        self.launches.lock().unwrap().push(req.clone());
        if self.hold_runs {
            if let Ok(p) = self.release.acquire().await {
                p.forget();
            }
        }
        let outcome = if req.dry_run {
            RunOutcome::DryRun
        } else if self.cancelled.load(std::sync::atomic::Ordering::SeqCst) {
            RunOutcome::Aborted
        } else {
            self.outcomes
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or(RunOutcome::Succeeded)
        };
        RunSummary {
            outcome,
            message: format!("scripted {}", outcome.as_str()),
            journal: None,
            details: None,
        }
    }

    fn cancel_all(&self) {
        self.cancelled
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.release.add_permits(100);
    }
}

struct Rx {
    base: String,
    rec: Arc<Recorder>,
    receiver: Arc<Receiver>,
    client: Http,
    _dir: tempfile::TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
}

fn config_text(dir: &std::path::Path, extra_budget: &str) -> String {
    std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
    std::fs::write(dir.join("hmac"), HMAC).unwrap();
    std::fs::write(dir.join("admin"), ADMIN).unwrap();
    format!(
        r#"apiVersion: recover/v1
kind: ServeConfig
auth:
  bearer_token: {{ file: {d}/token }}
  hmac_secret: {{ file: {d}/hmac }}
  admin_token: {{ file: {d}/admin }}
budget: {{ {extra_budget} }}
recheck: {{ after: 300ms, max: 2 }}
max_body_bytes: 4096
state_file: {d}/state.json
routes:
  - name: config-service
    match: {{ alertname: ConfigServiceStuck, namespace: demo }}
    runbook: stuck-overload
    target: {{ platform: local, name: demo, inventory: {d}/inventory.yaml }}
  - name: latency
    match: {{ alertname: ConfigServiceLatencyHigh }}
    runbook: stuck-overload
    target: {{ platform: local, name: demo, inventory: {d}/inventory.yaml }}
"#,
        d = dir.display()
    )
}

async fn start_with(mode: Mode, budget: &str, rec: Recorder) -> Rx {
    let dir = tempfile::tempdir().unwrap();
    let cfg: ServeConfig = config::parse(&config_text(dir.path(), budget), "serve.yaml").unwrap();
    let rec = Arc::new(rec);
    let rx = Receiver::new(cfg, mode, rec.clone()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, stop) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(recover::serve::http::serve(
        listener,
        rx.clone(),
        async move {
            let _ = stop.await;
        },
    ));
    Rx {
        base,
        rec,
        receiver: rx,
        client: Http::default(),
        _dir: dir,
        _stop: tx,
    }
}

async fn start(mode: Mode, budget: &str) -> Rx {
    start_with(mode, budget, Recorder::default()).await
}

impl Rx {
    async fn post(&self, name: &str) -> (u16, Value) {
        self.post_body(fixture(&format!("alertmanager/{name}")), Some(TOKEN))
            .await
    }

    async fn post_body(&self, body: impl AsRef<[u8]>, token: Option<&str>) -> (u16, Value) {
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers = vec![("content-type", "application/json")];
        if let Some(a) = &auth {
            headers.push(("authorization", a.as_str()));
        }
        self.client
            .post_json(&format!("{}/alerts", self.base), &headers, body)
            .await
    }

    async fn get(&self, path: &str) -> Value {
        self.client.get_json(&format!("{}{path}", self.base)).await
    }

    async fn metrics(&self) -> String {
        self.client
            .get_text(&format!("{}/metrics", self.base))
            .await
    }

    async fn reset(&self, token: &str) -> (u16, Value) {
        let auth = format!("Bearer {token}");
        self.client
            .post_json(
                &format!("{}/admin/reset", self.base),
                &[("authorization", auth.as_str())],
                br#"{"target": "local:demo"}"#.to_vec(),
            )
            .await
    }

    async fn post_signed(&self, body: impl AsRef<[u8]>, ts: u64, sig: &str) -> u16 {
        let ts = ts.to_string();
        self.client
            .post_json(
                &format!("{}/alerts", self.base),
                &[("x-recover-signature", sig), ("x-recover-timestamp", &ts)],
                body,
            )
            .await
            .0
    }

    async fn decisions(&self) -> Vec<String> {
        self.get("/decisions").await["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["decision"].as_str().unwrap().to_string())
            .collect()
    }

    /// Wait until the decision log satisfies `f` (bounded).
    async fn wait_decisions(&self, what: &str, f: impl Fn(&[String]) -> bool) -> Vec<String> {
        let start = Instant::now();
        loop {
            let d = self.decisions().await;
            if f(&d) {
                return d;
            }
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "timed out waiting for {what}; decisions: {d:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Two firing alerts each run to the end (spaced past a 1 ms cooldown), then a third
    /// is refused with `decision`, and its message says `because`.
    async fn two_runs_then_refused(&self, decision: &str, because: &str) {
        for n in 1..=2 {
            self.post("firing.json").await;
            self.wait_runs_finished(n).await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (_, body) = self.post("firing.json").await;
        assert_eq!(body["decisions"][0]["decision"], decision);
        assert!(body["decisions"][0]["message"]
            .as_str()
            .unwrap()
            .contains(because));
    }

    async fn wait_runs_finished(&self, n: usize) -> Value {
        let start = Instant::now();
        loop {
            let runs = self.get("/runs").await;
            let done = runs["runs"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["state"] != "running")
                .count();
            if done >= n {
                return runs;
            }
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "timed out waiting for {n} finished runs: {runs}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn count(d: &[String], what: &str) -> usize {
    d.iter().filter(|x| *x == what).count()
}

const NO_COOLDOWN: &str =
    "runs_per_window: 5, window: 1h, breaker_after_failures: 2, cooldown: 1ms";

/// A receiver in act mode, no cooldown, whose runs wait for `release` so a test can look
/// at a run while it is in progress.
async fn start_holding_runs() -> Rx {
    start_with(
        Mode::Act,
        NO_COOLDOWN,
        Recorder {
            hold_runs: true,
            ..Default::default()
        },
    )
    .await
}

#[tokio::test]
async fn stuck_firing_alert_launches_one_run_and_repeats_join_it() {
    let rx = start_holding_runs().await;
    let (status, body) = rx.post("firing.json").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["decisions"][0]["decision"], "checking");
    rx.wait_decisions("launch", |d| count(d, "launched") == 1)
        .await;
    // Alertmanager repeats the notification while the run is in progress.
    for _ in 0..3 {
        let (_, body) = rx.post("repeated.json").await;
        assert_eq!(body["decisions"][0]["decision"], "joined_run");
    }
    assert_eq!(rx.rec.launches().len(), 1);
    assert_eq!(
        rx.rec.checks(),
        1,
        "a joined alert must not re-run detection"
    );
    let runs = rx.get("/runs").await;
    let run = &runs["runs"][0];
    assert_eq!(run["state"], "running");
    assert_eq!(run["target"], "local:demo");
    assert_eq!(run["alerts"].as_array().unwrap().len(), 4);
    assert_eq!(run["alerts"][3]["repeat"], true);
    assert!(rx
        .metrics()
        .await
        .contains("recover_serve_runs_in_progress 1"));
    rx.rec.release.add_permits(1);
    rx.wait_runs_finished(1).await;
    let id = run["id"].as_str().unwrap();
    let one = rx.get(&format!("/runs/{id}")).await;
    assert_eq!(one["run"]["state"]["finished"], "succeeded");
    let launch = &rx.rec.launches()[0];
    assert!(!launch.dry_run);
    assert_eq!(launch.runbook, "stuck-overload");
    let m = rx.metrics().await;
    assert_exposes(
        &m,
        &[
            r#"recover_serve_runs_total{outcome="succeeded"} 1"#,
            r#"recover_serve_alerts_received_total{status="firing"} 4"#,
        ],
    );
}

#[tokio::test]
async fn resolved_never_acts() {
    let rx = start(Mode::Act, NO_COOLDOWN).await;
    let (status, body) = rx.post("resolved.json").await;
    assert_eq!(status, 200);
    assert_eq!(body["decisions"][0]["decision"], "ignored_resolved");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(rx.rec.checks(), 0);
    assert!(rx.rec.launches().is_empty());
    assert!(rx
        .metrics()
        .await
        .contains(r#"recover_serve_alerts_received_total{status="resolved"} 1"#));
}

#[tokio::test]
async fn grouped_alerts_route_each_alert_and_share_one_target() {
    let rx = start_holding_runs().await;
    let (status, body) = rx.post("grouped.json").await;
    assert_eq!(status, 200, "{body}");
    let d: Vec<&str> = body["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["decision"].as_str().unwrap())
        .collect();
    // Stuck alert starts detection; the latency alert on the same target joins it; the
    // resolved one is ignored; the disk alert has no route.
    assert_eq!(
        d,
        ["checking", "joined_check", "ignored_resolved", "no_route"]
    );
    rx.wait_decisions("launch", |d| count(d, "launched") == 1)
        .await;
    let runs = rx.get("/runs").await;
    let fps: Vec<&str> = runs["runs"][0]["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["fingerprint"].as_str().unwrap())
        .collect();
    assert_eq!(fps, ["5c2a6e1bd1f08c3e", "9e0d33f4a7b21c55"]);
    assert_eq!(rx.rec.checks(), 1);
    rx.rec.release.add_permits(1);
    rx.wait_runs_finished(1).await;
}

#[tokio::test]
async fn triggered_and_unknown_are_rechecked_never_acted_on() {
    let rec = Recorder::default();
    rec.verdicts.lock().unwrap().extend([
        VerdictKind::Triggered,
        VerdictKind::Unknown,
        VerdictKind::Unknown,
    ]);
    let rx = start_with(Mode::Act, NO_COOLDOWN, rec).await;
    rx.post("firing.json").await;
    // First verdict + 2 rechecks (recheck.max = 2), then it waits for the alert to repeat.
    let d = rx
        .wait_decisions("rechecks exhausted", |d| {
            count(d, "rechecks_exhausted") == 1
        })
        .await;
    assert_eq!(count(&d, "recheck_scheduled"), 2, "{d:?}");
    assert_eq!(rx.rec.checks(), 3);
    assert!(rx.rec.launches().is_empty());
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(rx.rec.checks(), 3, "no recheck after the limit");
    // The alert repeats: the verdict queue is empty now, so detection says Stuck: act.
    rx.post("repeated.json").await;
    rx.wait_decisions("launch", |d| count(d, "launched") == 1)
        .await;
}

#[tokio::test]
async fn resolved_cancels_a_pending_recheck() {
    let rec = Recorder::default();
    rec.verdicts
        .lock()
        .unwrap()
        .push_back(VerdictKind::Triggered);
    let rx = start_with(Mode::Act, NO_COOLDOWN, rec).await;
    rx.post("firing.json").await;
    rx.wait_decisions("recheck", |d| count(d, "recheck_scheduled") == 1)
        .await;
    rx.post("resolved.json").await;
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(rx.rec.checks(), 1, "the recheck must not run after resolve");
    assert!(rx.rec.launches().is_empty());
}

#[tokio::test]
async fn budget_stops_further_runs() {
    let rx = start(
        Mode::Act,
        "runs_per_window: 2, window: 1h, breaker_after_failures: 5, cooldown: 1ms",
    )
    .await;
    rx.two_runs_then_refused("refused_budget", "2 of 2 runs")
        .await;
    assert_eq!(rx.rec.launches().len(), 2);
    assert_eq!(rx.rec.checks(), 2, "no detection when the budget is gone");
    let m = rx.metrics().await;
    assert_exposes(
        &m,
        &[r#"recover_serve_budget_remaining{target="local:demo"} 0"#],
    );
}

#[tokio::test]
async fn breaker_opens_after_failures_and_admin_reset_closes_it() {
    let rec = Recorder::default();
    rec.outcomes
        .lock()
        .unwrap()
        .extend([RunOutcome::Failed, RunOutcome::Aborted]);
    let rx = start_with(Mode::Act, NO_COOLDOWN, rec).await;
    rx.two_runs_then_refused("refused_breaker", "recover serve reset local:demo")
        .await;
    assert_eq!(rx.rec.launches().len(), 2);
    let m = rx.metrics().await;
    assert_exposes(
        &m,
        &[
            r#"recover_serve_breaker_open{target="local:demo"} 1"#,
            r#"recover_serve_runs_total{outcome="aborted"} 1"#,
        ],
    );

    // The breaker survives in the state file.
    let state = std::fs::read_to_string(rx._dir.path().join("state.json")).unwrap();
    assert!(state.contains("breaker_opened_at"), "{state}");

    // Reset: the webhook token is not enough, the admin token is.
    assert_eq!(rx.reset(TOKEN).await.0, 401);
    let (status, body) = rx.reset(ADMIN).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reset"]["budget"]["breaker_open"], false);
    rx.post("firing.json").await;
    rx.wait_runs_finished(3).await;
    assert_eq!(rx.rec.launches().len(), 3);
}

#[tokio::test]
async fn observe_mode_only_dry_runs() {
    let rx = start(Mode::Observe, NO_COOLDOWN).await;
    let (_, body) = rx.post("firing.json").await;
    assert_eq!(body["mode"], "observe");
    rx.wait_decisions("dry run", |d| count(d, "dry_run") == 1)
        .await;
    rx.wait_runs_finished(1).await;
    let launches = rx.rec.launches();
    assert_eq!(launches.len(), 1);
    assert!(launches[0].dry_run, "observe mode must only dry-run");
    let runs = rx.get("/runs").await;
    assert_eq!(runs["runs"][0]["dry_run"], true);
    assert_eq!(runs["runs"][0]["state"]["finished"], "dry_run");
    assert!(rx.metrics().await.contains("recover_serve_acting 0"));
}

#[tokio::test]
async fn cooldown_refuses_right_after_a_run() {
    let rx = start(
        Mode::Act,
        "runs_per_window: 5, window: 1h, breaker_after_failures: 2, cooldown: 10m",
    )
    .await;
    rx.post("firing.json").await;
    rx.wait_runs_finished(1).await;
    let (_, body) = rx.post("repeated.json").await;
    assert_eq!(body["decisions"][0]["decision"], "refused_cooldown");
    assert_eq!(rx.rec.launches().len(), 1);
}

/// A run refused before its first action (no plan inputs, lock held, verdict not in
/// `when`) changed nothing: it spends no budget and starts no cooldown, and `/runs` says
/// why. With one run per window and a 10-minute cooldown, the next alert still acts.
#[tokio::test]
async fn a_refused_run_spends_no_budget_and_starts_no_cooldown() {
    let rec = Recorder::default();
    rec.outcomes.lock().unwrap().push_back(RunOutcome::Refused);
    let rx = start_with(
        Mode::Act,
        "runs_per_window: 1, window: 1h, breaker_after_failures: 1, cooldown: 10m",
        rec,
    )
    .await;
    rx.post("firing.json").await;
    let runs = rx.wait_runs_finished(1).await;
    let msg = runs["runs"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(runs["runs"][0]["state"]["finished"], "refused", "{runs:#}");
    assert!(msg.contains("no budget spent, no cooldown"), "{msg}");
    let targets = rx.get("/targets").await;
    let budget = &targets["targets"][0]["budget"];
    assert_eq!(budget["remaining"], 1, "{targets:#}");
    assert_eq!(budget["cooldown_until"], Value::Null, "{targets:#}");
    assert_eq!(budget["breaker_open"], false, "{targets:#}");

    // The next alert is checked and acts; that run spends the budget.
    let (_, body) = rx.post("repeated.json").await;
    assert_eq!(body["decisions"][0]["decision"], "checking", "{body:#}");
    rx.wait_runs_finished(2).await;
    assert_eq!(rx.rec.launches().len(), 2);
    let targets = rx.get("/targets").await;
    assert_eq!(
        targets["targets"][0]["budget"]["remaining"], 0,
        "{targets:#}"
    );
}

#[tokio::test]
async fn unauthenticated_and_malformed_requests_are_refused() {
    let rx = start(Mode::Act, NO_COOLDOWN).await;
    let (s, _) = rx
        .post_body(fixture("alertmanager/firing.json"), None)
        .await;
    assert_eq!(s, 401);
    let (s, _) = rx
        .post_body(
            fixture("alertmanager/firing.json"),
            Some("wrong-token-0123456789"),
        )
        .await;
    assert_eq!(s, 401);
    // A malformed body without credentials is still 401: nothing is parsed first.
    let (s, _) = rx
        .post_body(fixture("alertmanager/malformed_status.json"), None)
        .await;
    assert_eq!(s, 401);

    for (name, field) in [
        ("malformed_status.json", "status"),
        ("malformed_no_fingerprint.json", "alerts[0].fingerprint"),
        ("malformed_version.json", "version"),
        ("malformed_truncated.json", "body"),
    ] {
        let (s, body) = rx.post(name).await;
        assert_eq!(s, 400, "{name}: {body}");
        assert_eq!(body["field"], field, "{name}: {body}");
    }
    // Over the body limit (4096 in this config).
    let (s, _) = rx.post_body(vec![b' '; 8192], Some(TOKEN)).await;
    assert_eq!(s, 413);

    // HMAC signature instead of a token.
    let body = fixture("alertmanager/resolved.json");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let sig = recover::serve::auth::sign(HMAC, now, body.as_bytes());
    assert_eq!(rx.post_signed(body, now, &sig).await, 200);
    assert_eq!(
        rx.post_signed(fixture("alertmanager/firing.json"), now, &sig)
            .await,
        401,
        "a signature for another body"
    );

    assert_eq!(rx.rec.checks(), 0);
    let m = rx.metrics().await;
    assert_exposes(
        &m,
        &[
            r#"recover_serve_webhooks_total{result="unauthorized"} 4"#,
            // Four malformed payloads and the body over the limit.
            r#"recover_serve_webhooks_total{result="bad_request"} 5"#,
        ],
    );
}

#[tokio::test]
async fn shutdown_aborts_runs_in_progress_and_waits_for_them() {
    let rx = start_holding_runs().await;
    rx.post("firing.json").await;
    rx.wait_decisions("launch", |d| count(d, "launched") == 1)
        .await;
    let left = rx.receiver.shutdown(Duration::from_secs(10)).await;
    assert_eq!(left, 0, "the run should have ended");
    let runs = rx.get("/runs").await;
    assert_eq!(runs["runs"][0]["state"]["finished"], "aborted", "{runs}");
    let t = rx.get("/targets").await;
    assert_eq!(
        t["targets"][0]["budget"]["failures"], 0,
        "a shutdown abort is not the runbook's failure: {t}"
    );
}
