//! `recover serve` against what an authenticated but careless or hostile sender can send:
//! alert text with newlines and escape sequences (kept on its log line, escaped), a flood
//! of alerts (a log line a period with a count, not a line an alert), and one notification
//! of 22.9 MB under a raised body cap (read once, not held again as alerts, decisions and
//! a JSON tree of its answer).

use std::path::Path;
use std::time::Duration;

use crate::support::serve::{start, Http, Serve};

const TOKEN: &str = "hardening-token-0123456789abcdef";
const MB: u64 = 1_000_000;

/// VmHWM (peak resident memory) of `pid`, in bytes.
fn peak(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// A config whose one route's detection watches metrics that are down for its whole
/// window (about 16 s), so every alert meanwhile joins it.
fn write_config(dir: &Path, max_body_bytes: usize) -> std::path::PathBuf {
    let down = crate::support::ports::loopback_addr();
    std::fs::write(dir.join("token"), TOKEN).unwrap();
    std::fs::write(dir.join("gate-token"), "unused").unwrap();
    let inventory = format!(
        "name: hard\nreplicas:\n  - name: replica-0\n    command: [\"true\"]\n    admin_url: http://{down}\n    metrics_url: http://{down}/metrics\n    readiness_url: http://{down}/readyz\ngate:\n  admin_url: http://{down}\n  token_file: gate-token\n"
    );
    std::fs::write(dir.join("inventory.yaml"), inventory).unwrap();
    let cfg = dir.join("serve.yaml");
    let d = dir.display();
    std::fs::write(
        &cfg,
        format!(
            "apiVersion: recover/v1\nkind: ServeConfig\nauth:\n  bearer_token: {{ file: {d}/token }}\njournal_dir: {d}/journal\nmax_body_bytes: {max_body_bytes}\nroutes:\n  - name: hard\n    match: {{ alertname: ConfigServiceStuck }}\n    runbook: stuck-overload\n    target: {{ platform: local, name: hard, inventory: {d}/inventory.yaml }}\n"
        ),
    )
    .unwrap();
    cfg
}

/// A notification of `alerts` firing alerts, fingerprints `fingerprint(i)`.
fn notification(alerts: usize, fingerprint: impl Fn(usize) -> String) -> Vec<u8> {
    let mut body = String::from(
        r#"{"version":"4","groupKey":"g","truncatedAlerts":0,"status":"firing","receiver":"recover","groupLabels":{},"commonLabels":{},"commonAnnotations":{},"externalURL":"","alerts":["#,
    );
    for i in 0..alerts {
        if i > 0 {
            body.push(',');
        }
        let fp = serde_json::to_string(&fingerprint(i)).unwrap();
        body.push_str(&format!(
            r#"{{"status":"firing","labels":{{"alertname":"ConfigServiceStuck","service":"config-service","instance":"i{i}"}},"annotations":{{}},"startsAt":"2026-11-30T02:14:05.123Z","endsAt":"0001-01-01T00:00:00Z","generatorURL":"","fingerprint":{fp}}}"#
        ));
    }
    body.push_str("]}");
    body.into_bytes()
}

async fn post(s: &Serve, body: Vec<u8>) -> serde_json::Value {
    let auth = format!("Bearer {TOKEN}");
    // Bounded against a hung serve, not timed: the 23 MB case is 4 s alone and over 10 s
    // beside the rest of the suite.
    let r = Http::default()
        .send_within(
            Duration::from_secs(60),
            "POST",
            &format!("{}/alerts", s.base),
            &[("authorization", &auth)],
            body,
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", &r.body[..r.body.len().min(300)]);
    serde_json::from_str(&r.body).unwrap()
}

/// Before: each alert's fingerprint went to the log raw (a newline started a forged line,
/// an escape sequence reached the terminal), and each alert was an INFO line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alert_text_stays_on_its_line_and_a_flood_is_a_line_a_period() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), 1 << 20);
    let log = dir.path().join("serve.log");
    let s = start(&cfg, Some(&log)).await;
    let hostile =
        |i: usize| format!("fp{i}\n2026-12-01T00:00:00Z  INFO FORGED run finished\x1b[2J");
    let mut sent = 0;
    for round in 0..10 {
        let body = notification(800, |i| hostile(round * 800 + i));
        let answer = post(&s, body).await;
        sent += 800;
        assert_eq!(answer["alerts"], 800);
    }
    drop(s);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains('\x1b'), "an escape sequence reached the log");
    assert!(
        !text
            .lines()
            .any(|l| l.contains("INFO FORGED") && !l.contains("fp")),
        "a forged line:\n{text}"
    );
    assert!(text.contains("fp0\\n2026-12-01T00:00:00Z  INFO FORGED run finished\\u{1b}[2J"));
    let joined = text.lines().filter(|l| l.contains("joined_check")).count();
    assert!(
        (1..=3).contains(&joined),
        "{joined} lines for {sent} alerts joining one detection:\n{text}"
    );
    assert!(text.lines().count() < 20, "{text}");
}

/// Before: a 23 MB notification of 86,000 alerts peaked serve at 463 MB (debug build),
/// holding it as alerts, decisions and a JSON tree of its 32 MB answer at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_notification_is_read_once_and_answered_in_brief() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), 64 << 20);
    let s = start(&cfg, Some(&dir.path().join("serve.log"))).await;
    let alerts = 95_000;
    let body = notification(alerts, |i| format!("{i:016x}"));
    let size = body.len() as u64;
    assert!(size > 22 * MB, "{size}");
    let before = peak(s.pid);
    let answer = post(&s, body).await;
    let grew = peak(s.pid).saturating_sub(before);
    println!(
        "a {:.1} MB notification of {alerts} alerts: serve's peak grew {:.1} MB",
        size as f64 / MB as f64,
        grew as f64 / MB as f64
    );
    assert_eq!(answer["alerts"], alerts);
    assert_eq!(answer["decisions"].as_array().unwrap().len(), 1000);
    assert_eq!(answer["counts"]["checking"], 1);
    assert_eq!(answer["counts"]["joined_check"], alerts - 1);
    assert!(
        grew < 3 * size,
        "serve's peak grew {} MB for a {} MB notification",
        grew / MB,
        size / MB
    );
}
