//! `recover serve` as a user runs it: the real binary, its flags and exit codes, its
//! config errors, the webhook over HTTP, and `recover serve reset` against it.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::serve::{self, Http, Serve};
use crate::support::{bin, fixture};

const TOKEN: &str = "cli-token-0123456789abcdef";
const ADMIN: &str = "cli-admin-token-0123456789";

fn write_config(dir: &Path) -> std::path::PathBuf {
    std::fs::write(dir.join("token"), TOKEN).unwrap();
    let cfg = format!(
        r#"apiVersion: recover/v1
kind: ServeConfig
auth:
  bearer_token: {{ file: {d}/token }}
  admin_token: {{ env: SERVE_TEST_ADMIN }}
recheck: {{ after: 1h, max: 1 }}
state_file: {d}/state.json
journal_dir: {d}/journal
routes:
  - name: demo
    match: {{ alertname: ConfigServiceStuck }}
    runbook: stuck-overload
    target: {{ platform: local, name: demo, inventory: {d}/no-such-inventory.yaml }}
"#,
        d = dir.display()
    );
    let p = dir.join("serve.yaml");
    std::fs::write(&p, cfg).unwrap();
    p
}

#[test]
fn config_errors_name_file_line_and_field_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_config(dir.path());
    let text = std::fs::read_to_string(&p)
        .unwrap()
        .replace("recheck: { after: 1h", "recheck: { aftr: 1h");
    std::fs::write(&p, text).unwrap();
    let out = bin()
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("serve.yaml:6:"), "{err}");
    assert!(err.contains("recheck") && err.contains("aftr"), "{err}");

    let out = bin().args(["serve", "--config"]).arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--listen"));
}

async fn start(dir: &Path, mode: Option<&str>) -> Serve {
    let cfg = write_config(dir);
    serve::start_with(&cfg, Some(&dir.join("serve.log")), |cmd| {
        cmd.env("SERVE_TEST_ADMIN", ADMIN);
        if let Some(m) = mode {
            cmd.args(["--mode", m]);
        }
    })
    .await
}

#[tokio::test]
async fn binary_receives_alerts_refuses_strangers_and_never_acts_on_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), Some("act")).await;
    let http = Http::default();
    let url = format!("{}/alerts", s.base);
    let (status, _) = http
        .post_json(&url, &[], fixture("alertmanager/firing.json"))
        .await;
    assert_eq!(status, 401);
    let auth = format!("Bearer {TOKEN}");
    let (status, body) = http
        .post_json(
            &url,
            &[("authorization", &auth)],
            fixture("alertmanager/firing.json"),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["mode"], "act");
    assert_eq!(body["decisions"][0]["decision"], "checking");
    // The inventory does not exist: detection cannot run, the verdict is Unknown, and
    // Unknown is recorded for a recheck, never acted on.
    let start = Instant::now();
    let last = loop {
        let d = http.get_json(&format!("{}/decisions", s.base)).await;
        let last = d["decisions"].as_array().unwrap().last().cloned().unwrap();
        if last["decision"] != "checking" {
            break last;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{d}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(last["decision"], "recheck_scheduled", "{last}");
    assert_eq!(last["verdict"], "unknown", "{last}");
    let runs = http.get_json(&format!("{}/runs", s.base)).await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 0);
    let m = http.get_text(&format!("{}/metrics", s.base)).await;
    assert!(
        m.contains(r#"recover_serve_decisions_total{decision="recheck_scheduled"} 1"#),
        "{m}"
    );
    assert!(m.contains("recover_serve_acting 1"), "{m}");
}

fn reset_cmd(base: &str, target: &str, token: &str) -> std::process::Output {
    bin()
        .args(["serve", "reset", target, "--url", base])
        .env("RECOVER_SERVE_ADMIN_TOKEN", token)
        .output()
        .unwrap()
}

#[tokio::test]
async fn reset_command_talks_to_the_running_receiver() {
    let dir = tempfile::tempdir().unwrap();
    // Leave an open breaker in the state file, as a previous life of the receiver would.
    std::fs::write(
        dir.path().join("state.json"),
        r#"{"targets":{"local:demo":{"starts":[],"failures":2,
            "breaker_opened_at":{"secs_since_epoch":1700000000,"nanos_since_epoch":0},
            "last_failures":["run x: failed: step restart timed out"]}}}"#,
    )
    .unwrap();
    let s = start(dir.path(), None).await;
    let http = Http::default();
    let t = http.get_json(&format!("{}/targets", s.base)).await;
    assert_eq!(t["mode"], "observe", "observe is the default mode");
    assert_eq!(t["targets"][0]["budget"]["breaker_open"], true, "{t}");
    let auth = format!("Bearer {TOKEN}");
    let (_, body) = http
        .post_json(
            &format!("{}/alerts", s.base),
            &[("authorization", &auth)],
            fixture("alertmanager/firing.json"),
        )
        .await;
    assert_eq!(
        body["decisions"][0]["decision"], "refused_breaker",
        "{body}"
    );

    let base = s.base.clone();
    let (wrong, unknown, ok) = tokio::task::spawn_blocking(move || {
        (
            reset_cmd(&base, "local:demo", "not-the-admin-token"),
            reset_cmd(&base, "local:nope", ADMIN),
            reset_cmd(&base, "local:demo", ADMIN),
        )
    })
    .await
    .unwrap();
    assert_eq!(wrong.status.code(), Some(3), "{wrong:?}");
    assert_eq!(unknown.status.code(), Some(2), "{unknown:?}");
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
    assert!(String::from_utf8_lossy(&ok.stdout).contains("local:demo: breaker closed"));
    let t = http.get_json(&format!("{}/targets", s.base)).await;
    assert_eq!(t["targets"][0]["budget"]["breaker_open"], false, "{t}");
    let state = std::fs::read_to_string(dir.path().join("state.json")).unwrap();
    assert!(state.contains("\"breaker_opened_at\": null"), "{state}");
}
