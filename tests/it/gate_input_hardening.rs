//! Inputs the gate used to take at face value: a state file holding a JSON array (read
//! by position as a limit; now set aside, the gate starting at its flags), a lowercase `bearer` scheme (refused, though the scheme is
//! case-insensitive), an upstream response cut short mid-body (counted as 2xx), and a
//! closed log pipe (the next log line killed the task that wrote it: SIGTERM was lost).

#[allow(dead_code)] // the wire helpers serve several test files; this one uses a few
use crate::support::gate::{client, metrics, sample, start, TOKEN};
use crate::support::wire::{get, ok, raw, Peer, Upstream};
use recover::gate::GateConfig;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

/// The child's exit status, or `None` (after killing it) when it runs past `within`.
fn exit_within(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if t0.elapsed() > within {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn free() -> String {
    crate::support::ports::loopback_addr().to_string()
}

/// Read by position, `[1,2,3]` would have been rate 1, burst 2, in-flight 3. The gate
/// refuses it, says why naming the file and field, and starts at its flags.
#[test]
fn a_state_file_holding_an_array_is_refused_naming_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("gate-state.json");
    std::fs::write(&state, "[1,2,3]").unwrap();
    let admin = free();
    let mut child = crate::support::bin()
        .args([
            "gate",
            "--upstream",
            "http://127.0.0.1:9",
            "--listen",
            &free(),
            "--rate",
            "0",
        ])
        .args(["--admin-listen", &admin, "--state-file"])
        .arg(&state)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let m = rt.block_on(async {
        let healthz = format!("http://{admin}/healthz");
        for _ in 0..200 {
            if client().status(&healthz).await == Some(200) {
                return metrics(admin.parse().unwrap()).await;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the gate did not start");
    });
    let _ = child.kill();
    let _ = child.wait();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(
        sample(&m, "recover_gate_state_file_rejected_total"),
        Some(1.0)
    );
    assert_eq!(
        sample(&m, "recover_gate_limit_rate_per_second"),
        Some(0.0),
        "the flags"
    );
    assert!(err.contains("gate-state.json"), "{err}");
    assert!(
        err.contains("field body") && err.contains("not an array"),
        "{err}"
    );
}

#[test]
fn the_gate_stops_on_sigterm_when_nobody_reads_its_log_any_more() {
    let admin = free();
    let mut child = crate::support::bin()
        .args([
            "gate",
            "--upstream",
            "http://127.0.0.1:9",
            "--listen",
            &free(),
        ])
        .args(["--admin-listen", &admin])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while std::net::TcpStream::connect(&admin).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the gate never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The supervisor reading its log goes away: every log line now fails to write.
    drop(child.stderr.take());
    // SAFETY: a plain kill(2) of our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let status = exit_within(&mut child, Duration::from_secs(30));
    assert!(
        status.is_some(),
        "the gate ignored SIGTERM once its log pipe was closed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_takes_the_bearer_scheme_in_any_case() {
    let up = crate::support::gate::upstream(Duration::ZERO).await;
    let mut cfg = GateConfig::loopback(vec![up.url()]);
    cfg.admin_token = Some(TOKEN.into());
    let gate = start(cfg).await;
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let auth = format!("{scheme} {TOKEN}");
        let r = client()
            .send(
                "GET",
                &gate.admin_url("/admin/limit"),
                &[("authorization", &auth)],
                "",
            )
            .await
            .unwrap();
        assert_eq!(r.status, 200, "{scheme}: {}", r.body);
    }
    let r = client()
        .send(
            "GET",
            &gate.admin_url("/admin/limit"),
            &[("authorization", "bearer wrong")],
            "",
        )
        .await
        .unwrap();
    assert_eq!(r.status, 401);
}

/// The value of a counter once it reaches `want`, or after 5 s of waiting for it.
async fn counter_reaches(admin: std::net::SocketAddr, series: &str, want: f64) -> Option<f64> {
    let t0 = Instant::now();
    loop {
        let v = sample(&metrics(admin).await, series);
        if v >= Some(want) || t0.elapsed() > Duration::from_secs(5) {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_cut_short_by_the_upstream_is_counted_as_an_error_not_2xx() {
    let up = Upstream::start(|g| {
        if g.head.target() == "/cut" {
            // Promises 100 bytes, sends 5, hangs up.
            raw("HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n", b"short").then_close()
        } else {
            ok("whole")
        }
    })
    .await;
    let gate = start(GateConfig::loopback(vec![format!("http://{}", up.addr)])).await;

    let mut c = Peer::connect(gate.proxy).await;
    c.send(get("/cut")).await;
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), c.stream.read_to_end(&mut got))
        .await
        .expect("the gate closes the cut response's connection")
        .ok();
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with("HTTP/1.1 200") && text.ends_with("short"),
        "{text}"
    );

    let mut c = Peer::connect(gate.proxy).await;
    c.send(get("/whole")).await;
    assert_eq!(c.response(false).await.text(), "whole");

    let error = r#"recover_gate_upstream_responses_total{class="error"}"#;
    let two = r#"recover_gate_upstream_responses_total{class="2xx"}"#;
    assert_eq!(counter_reaches(gate.admin, error, 1.0).await, Some(1.0));
    assert_eq!(
        counter_reaches(gate.admin, two, 1.0).await,
        Some(1.0),
        "the cut response counted as 2xx"
    );
}
