//! `recover serve` under a flood of alerts with a valid token: as many as the machine
//! sends in about ten seconds, each with its own fingerprint, all for one target whose
//! detection is in progress (it watches metrics that are down for its whole window).
//! The receiver keeps the first few alerts and a count, so its memory stays put.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::serve::{start, Http};

const TOKEN: &str = "flood-token-0123456789abcdef";
const PER_POST: usize = 800;
const SENDERS: usize = 4;
const FLOOD_FOR: Duration = Duration::from_secs(10);
const MB: u64 = 1_000_000;

/// (VmHWM, VmRSS) of `pid`, in bytes.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// One webhook notification with `PER_POST` firing alerts, fingerprints from `first`.
fn payload(first: u64) -> Vec<u8> {
    let alerts: Vec<String> = (first..first + PER_POST as u64)
        .map(|i| {
            format!(
                r#"{{"status":"firing","labels":{{"alertname":"ConfigServiceStuck","service":"config-service","instance":"i{i}"}},"annotations":{{}},"startsAt":"2026-11-30T02:14:05.123Z","endsAt":"0001-01-01T00:00:00Z","generatorURL":"","fingerprint":"{i:016x}"}}"#
            )
        })
        .collect();
    format!(
        r#"{{"version":"4","groupKey":"flood","truncatedAlerts":0,"status":"firing","receiver":"recover","groupLabels":{{}},"commonLabels":{{}},"commonAnnotations":{{}},"externalURL":"","alerts":[{}]}}"#,
        alerts.join(",")
    )
    .into_bytes()
}

/// An inventory whose metrics are all down: detection watches its whole window (about
/// 16 s for stuck-overload) and every alert meanwhile joins it.
fn write_files(dir: &std::path::Path) -> std::path::PathBuf {
    let down = crate::support::ports::loopback_addr();
    std::fs::write(dir.join("token"), TOKEN).unwrap();
    std::fs::write(dir.join("gate-token"), "unused").unwrap();
    std::fs::write(
        dir.join("inventory.yaml"),
        format!(
            r#"name: flood
replicas:
  - name: replica-0
    command: ["true"]
    admin_url: http://{down}
    metrics_url: http://{down}/metrics
    readiness_url: http://{down}/readyz
gate:
  admin_url: http://{down}
  token_file: gate-token
"#
        ),
    )
    .unwrap();
    let cfg = dir.join("serve.yaml");
    std::fs::write(
        &cfg,
        format!(
            r#"apiVersion: recover/v1
kind: ServeConfig
auth:
  bearer_token: {{ file: {d}/token }}
journal_dir: {d}/journal
routes:
  - name: demo
    match: {{ alertname: ConfigServiceStuck }}
    runbook: stuck-overload
    target: {{ platform: local, name: flood, inventory: {d}/inventory.yaml }}
"#,
            d = dir.display()
        ),
    )
    .unwrap();
    cfg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_alerts_joining_one_detection_keeps_serve_under_100_mb() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_files(dir.path());
    let serve = start(&cfg, None).await;
    let (pid, base) = (serve.pid, serve.base.clone());
    let (_, rss_before) = memory(pid);

    let sent = Arc::new(AtomicU64::new(0));
    let next = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let senders: Vec<_> = (0..SENDERS)
        .map(|_| {
            let (sent, next, url) = (sent.clone(), next.clone(), format!("{base}/alerts"));
            tokio::spawn(async move {
                let http = Http::default();
                let auth = format!("Bearer {TOKEN}");
                while t0.elapsed() < FLOOD_FOR {
                    let first = next.fetch_add(PER_POST as u64, Ordering::SeqCst);
                    let r = http
                        .send("POST", &url, &[("authorization", &auth)], payload(first))
                        .await
                        .expect("serve answers during the flood");
                    assert_eq!(r.status, 200, "{}", &r.body[..r.body.len().min(300)]);
                    sent.fetch_add(PER_POST as u64, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for s in senders {
        s.await.unwrap();
    }
    let took = t0.elapsed();
    let (peak, rss_after) = memory(pid);
    let sent = sent.load(Ordering::SeqCst);
    println!(
        "flood: {sent} alerts in {took:.1?} ({:.0}/s); serve RSS {:.1} MB before, {:.1} MB after, peak {:.1} MB",
        sent as f64 / took.as_secs_f64(),
        rss_before as f64 / MB as f64,
        rss_after as f64 / MB as f64,
        peak as f64 / MB as f64
    );
    assert!(
        sent >= 50_000,
        "only {sent} alerts sent: too few to show anything"
    );

    // Every alert was decided on: most joined the detection in progress.
    let m = Http::default()
        .send("GET", &format!("{base}/metrics"), &[], "")
        .await
        .unwrap()
        .body;
    let joined = m
        .lines()
        .find_map(|l| l.strip_prefix(r#"recover_serve_decisions_total{decision="joined_check"} "#))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(joined as u64 >= sent / 2, "{joined} joined of {sent}:\n{m}");
    assert!(
        peak < 100 * MB,
        "recover serve peaked at {} MB after {sent} alerts",
        peak / MB
    );
}
