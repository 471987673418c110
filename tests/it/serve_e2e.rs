//! `recover serve` end to end with real processes: the demo system (gate, config service,
//! workers) is driven into a stuck overload, the replicas are handed to the local
//! platform, and recorded Alertmanager payloads are posted over HTTP to a receiver whose
//! launcher is the real engine, planning with the shipped runbook's declarations. One
//! system, staged once, carries the whole story:
//! observe mode changes nothing; a failing runbook opens the breaker, which refuses until
//! a human resets it, and leaves its safe hold on the gate, on top of which serve refuses
//! to act (saying so in the answer, the decision log, the metric and the notify hook, with
//! the command that lifts it) until the printed command lifts it; the real runbook recovers the system, stuck for a minute by then,
//! once although the alert repeats; the budget then refuses; resolved alerts never act.

use recover::rehearse::orchestrate::sweep;
use recover::rehearse::rehearsal::detector_config;
use recover::rehearse::scenario::Scenario;
use recover::rehearse::stage::Stage;
use recover::serve::{config, engine_launcher, Mode, Receiver};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::fixture;
use crate::support::serve::{assert_exposes, Http};

const TOKEN: &str = "e2e-token-0123456789abcdef";
const ADMIN: &str = "e2e-admin-token-0123456789";

/// Kills whatever the test started if it panics half-way.
struct Sweep(Vec<String>);
impl Drop for Sweep {
    fn drop(&mut self) {
        sweep(&self.0);
    }
}

/// The shipped runbook (its own declarations of capacity and cold factor: the receiver
/// connects to a service already stuck, with no healthy moment to measure them in), with
/// detection windows sized for a test; and a runbook that always fails, leaving a safe
/// hold on the gate as the shipped runbook's on_failure does.
fn write_runbooks(dir: &Path) {
    let src = recover::runbook::find("stuck-overload", &[])
        .unwrap()
        .source;
    let mut rb: serde_yaml::Value = serde_yaml::from_str(&src).unwrap();
    let detect = &mut rb["spec"]["detect"];
    detect["grace"] = "2s".into();
    detect["persist"] = "4s".into();
    std::fs::write(
        dir.join("stuck-overload.yaml"),
        serde_yaml::to_string(&rb).unwrap(),
    )
    .unwrap();
    rb["metadata"]["name"] = "doomed".into();
    rb["spec"]["steps"] = serde_yaml::from_str(
        "[{name: hopeless, action: wait.until, with: {check: steady}, timeout: 2s}]",
    )
    .unwrap();
    rb["spec"]["on_failure"] = serde_yaml::from_str(
        "[{name: hold, action: gate.limit, with: {rate: plan.admit_rate * 0.5, deadline: 1h}}, {name: page, action: notify, with: {message: doomed}}]",
    )
    .unwrap();
    std::fs::write(dir.join("doomed.yaml"), serde_yaml::to_string(&rb).unwrap()).unwrap();
}

fn serve_config(dir: &Path, inventory: &Path) -> config::ServeConfig {
    std::fs::write(dir.join("token"), TOKEN).unwrap();
    std::fs::write(dir.join("admin"), ADMIN).unwrap();
    let text = format!(
        r#"apiVersion: recover/v1
kind: ServeConfig
auth:
  bearer_token: {{ file: {d}/token }}
  admin_token: {{ file: {d}/admin }}
budget: {{ runs_per_window: 2, window: 1h, breaker_after_failures: 1, cooldown: 1ms }}
recheck: {{ after: 1s, max: 10 }}
state_file: {d}/serve-state.json
journal_dir: {d}/journal
runbook_dir: {d}/runbooks
notify_hook: {{ command: [/bin/sh, -c, 'cat >> "$0"; echo >> "$0"', {d}/notified.jsonl] }}
routes:
  - name: stuck
    match: {{ alertname: ConfigServiceStuck }}
    runbook: stuck-overload
    target: {{ platform: local, name: rehearsal, inventory: {inv} }}
  - name: doomed
    match: {{ alertname: ConfigServiceDoomed }}
    runbook: doomed
    target: {{ platform: local, name: rehearsal, inventory: {inv} }}
"#,
        d = dir.display(),
        inv = inventory.display()
    );
    config::parse(&text, "serve.yaml").unwrap()
}

struct Rx {
    base: String,
    http: Http,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn start(cfg: config::ServeConfig, mode: Mode) -> Rx {
    let launcher = engine_launcher::launcher(&cfg).unwrap();
    let rx = Receiver::new(cfg, mode, launcher).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, stop) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(recover::serve::http::serve(listener, rx, async move {
        let _ = stop.await;
    }));
    Rx {
        base,
        http: Http::default(),
        _stop: tx,
    }
}

impl Rx {
    async fn post(&self, body: impl AsRef<[u8]>) -> Value {
        let auth = format!("Bearer {TOKEN}");
        let (s, v) = self
            .http
            .post_json(
                &format!("{}/alerts", self.base),
                &[("authorization", &auth)],
                body,
            )
            .await;
        assert_eq!(s, 200, "{v}");
        v
    }

    async fn decision(&self, body: impl AsRef<[u8]>) -> String {
        self.post(body).await["decisions"][0]["decision"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Wait (bounded) for the newest run to finish; returns it.
    async fn finished_run(&self, n: usize, limit: Duration) -> Value {
        let start = Instant::now();
        loop {
            let runs = self.http.get_json(&format!("{}/runs", self.base)).await;
            let list = runs["runs"].as_array().unwrap();
            if list.len() >= n && list[0]["state"] != "running" {
                return list[0].clone();
            }
            let d = self
                .http
                .get_json(&format!("{}/decisions", self.base))
                .await;
            assert!(
                start.elapsed() < limit,
                "no finished run #{n} after {limit:?}: runs {runs}; decisions {d}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

fn doomed_alert() -> Vec<u8> {
    fixture("alertmanager/firing.json")
        .replace("ConfigServiceStuck", "ConfigServiceDoomed")
        .replace("5c2a6e1bd1f08c3e", "d00d00d00d00d00d")
        .into_bytes()
}

fn pids(state_dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(state_dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".pid"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_serve_recovers_a_stuck_system_once_and_the_guards_hold() {
    recover::util::http::ensure_tls_provider();
    let tmp = tempfile::tempdir().unwrap();
    let sc = Scenario::default();
    let rb = recover::runbook::find("stuck-overload", &[]).unwrap();
    let exe = PathBuf::from(crate::support::BIN);
    let mut stage = Stage::start(&exe, &sc, &rb.runbook.signals, &tmp.path().join("sys"))
        .await
        .expect("demo system up and steady");
    let _sweep = Sweep(stage.sys.markers());
    let trig = stage.trigger().await.expect("trigger");
    // A true alert: wait until the rehearsal's own detector says Stuck.
    let det = detector_config(&rb.runbook.detect, &sc);
    recover::rehearse::detection::wait_stuck(&stage.feed, stage.clock, &det, sc.detect_timeout)
        .await
        .expect("the demo system gets stuck");
    // Hand the running replicas to the local platform, as the rehearsal does.
    let inventory = stage.sys.hand_over().expect("inventory and pid files");
    let state_dir = stage.sys.topology.state_dir();
    std::fs::create_dir_all(tmp.path().join("runbooks")).unwrap();
    write_runbooks(&tmp.path().join("runbooks"));
    let cfg = serve_config(tmp.path(), &inventory);
    let gate_limit = format!("http://{}/admin/limit", stage.sys.addrs().gate_admin);
    let gate_auth = format!("Bearer {}", stage.sys.token);
    let http = Http::default();
    let limit = || async {
        http.send("GET", &gate_limit, &[("authorization", &gate_auth)], vec![])
            .await
            .unwrap()
            .body
    };
    let limit_before = limit().await;
    let pids_before = pids(&state_dir);

    // 1. Observe mode: detection runs for real, the run is a dry run, nothing changes.
    {
        let obs = start(cfg.clone(), Mode::Observe).await;
        assert_eq!(
            obs.decision(fixture("alertmanager/firing.json")).await,
            "checking"
        );
        let run = obs.finished_run(1, Duration::from_secs(60)).await;
        assert_eq!(run["dry_run"], true, "{run}");
        assert_eq!(run["state"]["finished"], "dry_run", "{run}");
        assert!(
            run["report"]["plan"].is_object(),
            "the dry run records its plan: {run}"
        );
        assert_eq!(limit().await, limit_before, "observe mode changed the gate");
        assert_eq!(
            pids(&state_dir),
            pids_before,
            "observe mode restarted replicas"
        );
    }
    std::fs::remove_file(tmp.path().join("serve-state.json")).ok();

    // 2. Act mode: a failing runbook opens the breaker (after 1 failure in this config).
    let rx = start(cfg, Mode::Act).await;
    assert_eq!(rx.decision(doomed_alert()).await, "checking");
    let run = rx.finished_run(1, Duration::from_secs(60)).await;
    assert_eq!(run["state"]["finished"], "failed", "{run}");
    assert_eq!(
        rx.decision(fixture("alertmanager/firing.json")).await,
        "refused_breaker"
    );
    assert_eq!(
        pids(&state_dir),
        pids_before,
        "a refused alert must not act"
    );
    // A human resets it.
    let auth = format!("Bearer {ADMIN}");
    let (s, _) = rx
        .http
        .post_json(
            &format!("{}/admin/reset", rx.base),
            &[("authorization", &auth)],
            br#"{"target":"local:rehearsal"}"#.to_vec(),
        )
        .await;
    assert_eq!(s, 200);

    // 2b. The failed run left its safe hold on the gate: serve does not act on top of it
    // and says why and what a human should do, everywhere a person might look.
    let held: Value = serde_json::from_str(&limit().await).unwrap();
    assert!(held["limit"]["rate_per_s"].is_number(), "{held}");
    let answer = rx.post(fixture("alertmanager/firing.json")).await;
    let d = &answer["decisions"][0];
    assert_eq!(d["decision"], "refused_standing_limit", "{answer}");
    let message = d["message"].as_str().unwrap().to_string();
    let command = message
        .split('`')
        .find(|s| s.starts_with("recover gate limit lift "))
        .unwrap_or_else(|| panic!("no command in the refusal: {message}"))
        .to_string();
    assert!(
        command.contains(&format!("--admin http://{}", stage.sys.addrs().gate_admin)),
        "{command}"
    );
    assert!(message.contains("review by 20"), "{message}");
    let decisions = rx
        .http
        .get_json(&format!("{}/decisions", rx.base))
        .await
        .to_string();
    assert!(decisions.contains("refused_standing_limit"), "{decisions}");
    let m = rx.http.get_text(&format!("{}/metrics", rx.base)).await;
    assert_exposes(
        &m,
        &[
            r#"recover_serve_alerts_refused_total{reason="standing_limit"} 1"#,
            r#"recover_serve_alerts_refused_total{reason="breaker"} 1"#,
        ],
    );
    let notified = tmp.path().join("notified.jsonl");
    let start_n = Instant::now();
    let event = loop {
        let text = std::fs::read_to_string(&notified).unwrap_or_default();
        if let Some(line) = text
            .lines()
            .find(|l| l.contains("\"reason\":\"standing_limit\""))
        {
            break serde_json::from_str::<Value>(line).unwrap();
        }
        assert!(
            start_n.elapsed() < Duration::from_secs(10),
            "the notify hook was not told: {text:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(event["event"], "refused");
    assert_eq!(event["target"], "local:rehearsal");
    assert!(
        event["message"].as_str().unwrap().contains(&command),
        "{event}"
    );
    assert_eq!(
        pids(&state_dir),
        pids_before,
        "a refused alert must not act"
    );
    // The printed command works as printed; the next alert is checked again.
    let bin_dir = Path::new(crate::support::BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let lifted = std::process::Command::new("sh")
        .args(["-c", &command])
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        lifted.status.success(),
        "{command}: {}",
        String::from_utf8_lossy(&lifted.stderr)
    );

    // 3. The real runbook recovers the system once, although the alert repeats (an
    // Unknown verdict from a scrape the stuck service answered late is rechecked). The
    // service has been stuck for at least 60 s by then, and the receiver has no sample
    // from before its own check: the 3 am case, with the shipped runbook's declarations.
    stage.until(trig.ended_s + 60.0).await;
    assert_eq!(
        rx.decision(fixture("alertmanager/firing.json")).await,
        "checking"
    );
    let start_t = Instant::now();
    let mut seen = Vec::new();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        seen.push(rx.decision(fixture("alertmanager/repeated.json")).await);
        let runs = rx.http.get_json(&format!("{}/runs", rx.base)).await;
        let list = runs["runs"].as_array().unwrap();
        if list.len() >= 2 && list[0]["state"] != "running" {
            break;
        }
        assert!(
            start_t.elapsed() < Duration::from_secs(150),
            "no recovery run finished: {runs}; decisions on repeats: {seen:?}"
        );
    }
    assert!(
        seen.iter().any(|d| d == "joined_run"),
        "repeats during the run join it: {seen:?}"
    );
    let run = rx.finished_run(2, Duration::from_secs(5)).await;
    assert_eq!(run["state"]["finished"], "succeeded", "{run}");
    assert_eq!(run["runbook"], "stuck-overload");
    assert!(run["alerts"].as_array().unwrap().len() > 1, "{run}");
    let one = rx
        .http
        .get_json(&format!("{}/runs/{}", rx.base, run["id"].as_str().unwrap()))
        .await;
    assert!(
        one["journal"].as_array().is_some_and(|j| !j.is_empty()),
        "GET /runs/ID serves the journal: {one}"
    );
    // The run acted: it drained every replica, and with each ready and the gate below
    // their warm capacity it restarted none (the shipped runbook's `when: needed`).
    let journal = one["journal"].as_array().unwrap();
    assert!(
        journal
            .iter()
            .any(|e| e["event"] == "action_finished" && e["action"] == "replica.drain"),
        "the runbook drained the replicas: {one}"
    );
    assert!(
        journal.iter().any(|e| e["event"] == "step_finished"
            && e["step"] == "batched-restart"
            && e["message"]
                .as_str()
                .is_some_and(|m| m.contains("no restart needed"))),
        "the restart step says why it restarted nothing: {one}"
    );
    assert_eq!(
        pids(&state_dir),
        pids_before,
        "a drain sufficed: no replica restarted"
    );

    // 4. The budget (2 runs per hour) refuses a third; resolved never acts.
    let runs = rx.http.get_json(&format!("{}/runs", rx.base)).await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 2, "{runs}");
    assert_eq!(
        rx.decision(fixture("alertmanager/firing.json")).await,
        "refused_budget"
    );
    assert_eq!(
        rx.decision(fixture("alertmanager/resolved.json")).await,
        "ignored_resolved"
    );
    let m = rx.http.get_text(&format!("{}/metrics", rx.base)).await;
    assert_exposes(
        &m,
        &[
            r#"recover_serve_runs_total{outcome="succeeded"} 1"#,
            r#"recover_serve_runs_total{outcome="failed"} 1"#,
            r#"recover_serve_budget_remaining{target="local:rehearsal"} 0"#,
        ],
    );

    stage.finish().await;
}
