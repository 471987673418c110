//! `recover gate` as a real process: a restarted gate restores the last limit from its
//! state file (over its flags), a state file it cannot apply is set aside and the gate
//! starts at its flags (no crash loop), and bad flags or files exit 2 naming what is wrong.

use crate::support::gate::*;
use recover::util::child::{spawn_guarded, ChildGuard, GuardOptions};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::BIN;

struct Running {
    guard: ChildGuard,
    proxy: SocketAddr,
    admin: SocketAddr,
    log: std::path::PathBuf,
}

fn spawn_gate(dir: &Path, upstream: &str, log: &str, extra: &[&str]) -> Running {
    let proxy = crate::support::ports::loopback_addr();
    let admin = crate::support::ports::loopback_addr();
    let token = dir.join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let mut cmd = Command::new(BIN);
    cmd.args(["gate", "--upstream", upstream])
        .args(["--listen", &proxy.to_string()])
        .args(["--admin-listen", &admin.to_string()])
        .arg("--admin-token-file")
        .arg(&token)
        .arg("--state-file")
        .arg(dir.join("state.json"))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(log)).unwrap());
    let guard = spawn_guarded("gate", cmd, GuardOptions::default()).unwrap();
    Running {
        guard,
        proxy,
        admin,
        log: dir.join(log),
    }
}

async fn ready(g: &mut Running) {
    // wait_http_ok uses reqwest, which panics in test builds without a TLS provider;
    // poll with the plain client instead.
    let c = client();
    for _ in 0..200 {
        if c.status(&format!("http://{}/healthz", g.admin)).await == Some(200) {
            return;
        }
        if g.guard.has_exited() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Its log says why: a gate that exited (it could not bind, say) is not waited for.
    let log = std::fs::read_to_string(&g.log).unwrap_or_default();
    panic!("gate on {} never became ready; its log:\n{log}", g.admin);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_gate_restores_the_last_limit_not_its_flags() {
    let dir = tempfile::tempdir().unwrap();
    let up = upstream(Duration::ZERO).await;
    let flags = ["--rate", "1000", "--burst", "1000"];

    let mut first = spawn_gate(dir.path(), &up.url(), "first.log", &flags);
    ready(&mut first).await;
    let auth = format!("Bearer {TOKEN}");
    let r = client()
        .send(
            "PUT",
            &format!("http://{}/admin/limit", first.admin),
            &[("authorization", &auth)],
            r#"{"rate_per_s": 0.1, "burst": 1, "max_in_flight": null, "note": "recovery"}"#,
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    drop(first); // SIGTERM, as a deploy or a crash-restart would

    let mut second = spawn_gate(dir.path(), &up.url(), "second.log", &flags);
    ready(&mut second).await;
    let r = client()
        .send(
            "GET",
            &format!("http://{}/admin/limit", second.admin),
            &[("authorization", &auth)],
            "",
        )
        .await
        .unwrap();
    assert_eq!(r.json()["limit"]["rate_per_s"], 0.1, "{}", r.body);
    assert_eq!(r.json()["limit"]["note"], "recovery");

    let before = up.count();
    let c = client();
    let mut ok = 0;
    for _ in 0..20 {
        if c.status(&format!("http://{}/", second.proxy)).await == Some(200) {
            ok += 1;
        }
    }
    assert!(
        ok <= 2,
        "a restarted gate came back open: {ok} of 20 admitted"
    );
    assert_eq!(up.count() - before, ok);
    let log = std::fs::read_to_string(dir.path().join("second.log")).unwrap();
    assert!(
        log.contains("state file"),
        "no log line about the state file:\n{log}"
    );
}

fn run_bad(args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN)
        .arg("gate")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_flags_and_files_exit_2_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let up = ["--upstream", "http://127.0.0.1:9"];
    let free = |_: ()| crate::support::ports::loopback_addr().to_string();
    let listen = [
        "--listen".to_string(),
        free(()),
        "--admin-listen".into(),
        free(()),
    ];
    let listen: Vec<&str> = listen.iter().map(String::as_str).collect();

    let missing = dir.path().join("no-such-token");
    let published = dir.path().join("published-token");
    std::fs::write(&published, "change-me-recover-demo\n").unwrap();
    let empty = dir.path().join("empty-token");
    std::fs::write(&empty, "\n").unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--rate", "-1"], "--rate"),
        (vec!["--rate", "lots"], "--rate"),
        (vec!["--rate", "5", "--burst", "0"], "--burst"),
        (
            vec!["--rate", "1e-12"],
            "--rate: 1e-12 is below the smallest rate",
        ),
        (vec!["--rate", "1", "--burst", "4000000000"], "--burst"),
        (vec!["--upstream-timeout", "2"], "--upstream-timeout"),
        (vec!["--client-idle-timeout", "0s"], "--client-idle-timeout"),
        (vec!["--listen", "nowhere"], "--listen"),
        (
            vec!["--admin-token-file", missing.to_str().unwrap()],
            "no-such-token",
        ),
        (
            vec!["--admin-token-file", published.to_str().unwrap()],
            "published example value",
        ),
        (
            vec!["--admin-token-file", empty.to_str().unwrap()],
            "openssl rand",
        ),
    ];
    for (extra, needle) in cases {
        let mut args: Vec<&str> = up.to_vec();
        args.extend(&listen);
        args.extend(&extra);
        let (code, err) = run_bad(&args);
        assert_eq!(code, 2, "{extra:?}: exit {code}\n{err}");
        assert!(
            err.contains(needle),
            "{extra:?}: stderr does not name {needle}:\n{err}"
        );
    }
    let (code, err) = run_bad(&["--upstream", "ftp://x:1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--upstream"), "{err}");
}

async fn admin(g: &Running, method: &str, body: &str) -> crate::support::gate::Reply {
    let auth = format!("Bearer {TOKEN}");
    client()
        .send(
            method,
            &format!("http://{}/admin/limit", g.admin),
            &[("authorization", &auth)],
            body,
        )
        .await
        .unwrap()
}

/// A rate admission cannot represent is refused before anything is stored: the gate keeps
/// serving and comes back after a restart (the old gate panicked on `1e-300` after writing
/// it to its state file, and every restart panicked again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_rate_is_refused_and_the_gate_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let up = upstream(Duration::ZERO).await;
    let mut first = spawn_gate(dir.path(), &up.url(), "first.log", &[]);
    ready(&mut first).await;
    let r = admin(&first, "PUT", r#"{"rate_per_s": 1e-300}"#).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["field"], "rate_per_s", "{}", r.body);
    assert!(!dir.path().join("state.json").exists(), "nothing stored");
    let r = admin(&first, "PUT", r#"{"rate_per_s": 5}"#).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // Serving: from unlimited, a new rate starts with an empty bucket, so maybe a 429.
    let status = client().status(&format!("http://{}/", first.proxy)).await;
    assert!(matches!(status, Some(200 | 429)), "{status:?}");
    drop(first);
    let mut second = spawn_gate(dir.path(), &up.url(), "second.log", &[]);
    ready(&mut second).await;
    assert_eq!(
        admin(&second, "GET", "").await.json()["limit"]["rate_per_s"],
        5.0
    );
}

/// The state file the old gate left behind (a rate it could not enforce) no longer keeps
/// the edge down: the gate says so, moves the file aside, counts it, and starts at its
/// flags; the next start is clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_file_that_cannot_be_applied_is_set_aside_and_the_flags_start() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    std::fs::write(&state, "{\n  \"rate_per_s\": 1e-300,\n  \"burst\": 1\n}\n").unwrap();
    let up = upstream(Duration::ZERO).await;
    let flags = ["--rate", "1000", "--burst", "1000"];
    let mut first = spawn_gate(dir.path(), &up.url(), "first.log", &flags);
    ready(&mut first).await;
    let r = admin(&first, "GET", "").await;
    assert_eq!(r.json()["limit"]["rate_per_s"], 1000.0, "{}", r.body);
    let note = r.json()["limit"]["note"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(note.contains("could not be applied"), "{note}");
    let m = metrics(first.admin).await;
    assert_eq!(
        sample(&m, "recover_gate_state_file_rejected_total"),
        Some(1.0)
    );
    assert_eq!(
        client().status(&format!("http://{}/", first.proxy)).await,
        Some(200)
    );
    assert!(!state.exists(), "the bad file is still in the way");
    let aside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("state.json.rejected-"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert!(note.contains(&aside[0]), "{note}");
    let log = std::fs::read_to_string(dir.path().join("first.log")).unwrap();
    assert!(log.contains("ERROR") && log.contains("rate_per_s"), "{log}");
    drop(first);
    let mut second = spawn_gate(dir.path(), &up.url(), "second.log", &flags);
    ready(&mut second).await;
    let m = metrics(second.admin).await;
    assert_eq!(
        sample(&m, "recover_gate_state_file_rejected_total"),
        Some(0.0)
    );
}
