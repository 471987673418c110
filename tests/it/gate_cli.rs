//! `recover gate` as a real process: a restarted gate restores the last limit from its
//! state file (over its flags), and bad flags or files exit 2 naming what is wrong.

use crate::support::gate::*;
use recover::util::child::{spawn_guarded, ChildGuard, GuardOptions};
use recover::util::net::free_loopback_addr;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_recover");

struct Running {
    _guard: ChildGuard,
    proxy: SocketAddr,
    admin: SocketAddr,
}

fn spawn_gate(dir: &Path, upstream: &str, log: &str, extra: &[&str]) -> Running {
    let proxy = free_loopback_addr().unwrap();
    let admin = free_loopback_addr().unwrap();
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
        _guard: guard,
        proxy,
        admin,
    }
}

async fn ready(g: &Running) {
    // wait_http_ok uses reqwest, which panics in test builds without a TLS provider;
    // poll with the plain client instead.
    let c = client();
    for _ in 0..200 {
        if c.status(&format!("http://{}/healthz", g.admin)).await == Some(200) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("gate on {} never became ready", g.admin);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_gate_restores_the_last_limit_not_its_flags() {
    let dir = tempfile::tempdir().unwrap();
    let up = upstream(Duration::ZERO).await;
    let flags = ["--rate", "1000", "--burst", "1000"];

    let first = spawn_gate(dir.path(), &up.url(), "first.log", &flags);
    ready(&first).await;
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

    let second = spawn_gate(dir.path(), &up.url(), "second.log", &flags);
    ready(&second).await;
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
    let free = |_: ()| free_loopback_addr().unwrap().to_string();
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
    let corrupt = dir.path().join("corrupt.json");
    std::fs::write(
        &corrupt,
        r#"{"rate_per_s": 5, "burst": 0, "max_in_flight": null}"#,
    )
    .unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--rate", "-1"], "--rate"),
        (vec!["--rate", "lots"], "--rate"),
        (vec!["--rate", "5", "--burst", "0"], "--burst"),
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
        (
            vec!["--state-file", corrupt.to_str().unwrap()],
            "corrupt.json",
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
