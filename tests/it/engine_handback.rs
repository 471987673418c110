//! The gate after a run, against a real gate process on 127.0.0.1: a run that succeeds
//! hands the gate back (the limit it had before the run's first gate action), a runbook
//! with `spec.handback: hold` keeps its last limit with the review deadline, a failed run
//! leaves on_failure's safe hold; every summary prints the command that changes the
//! limit, and that command (`recover gate limit`) works as printed.

use crate::support::engine::*;
use std::process::{Command, Output};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn token_file(sys: &System) -> String {
    sys.dir.path().join("gate.token").display().to_string()
}

/// `recover gate limit ARGS --admin URL --token-file PATH` against the system's gate.
fn gate_limit(sys: &System, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(["gate", "limit"])
        .args(args)
        .args(["--admin", &format!("http://{}", sys.gate_admin)])
        .args(["--token-file", &token_file(sys)])
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn report(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// The names of the steps the run report lists, in order.
fn step_names(report: &serde_json::Value) -> Vec<&str> {
    report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect()
}

#[test]
fn e2e_handback_a_successful_run_restores_the_limit_from_before_the_run() {
    rt().block_on(async {
        let sys = System::start(1, "0s", 0).await;
        // An operator's limit stood before the incident: the hand-back restores it, not
        // "unlimited" and not the run's 90 req/s.
        let set = gate_limit(&sys, &["set", "--rate", "500", "--note", "before"]);
        assert_eq!(set.status.code(), Some(0), "{}", stderr(&set));
        let out = sys
            .run_cmd("e2e-handback.yaml", &["--yes", "--output", "json"])
            .output()
            .unwrap();
        assert_exit_ok(&out);
        let report = report(&out);
        let names = step_names(&report);
        assert_eq!(names, ["block-at-edge", "announce", "handback"]);
        let limit = sys.gate_limit().await;
        assert_eq!(
            limit["limit"]["rate_per_s"].as_f64(),
            Some(500.0),
            "the old code left the run's 90 req/s standing: {limit}"
        );
        let note = limit["limit"]["note"].as_str().unwrap_or_default();
        assert!(note.contains("handed back by recover run"), "{note}");
        let gate = &report["gate"];
        assert!(
            gate["said"]
                .as_str()
                .unwrap()
                .starts_with("handed back: 500.0 req/s"),
            "{gate}"
        );
        // The journal holds the hand-back like any action: before and after.
        let journal = only_journal(&sys.journal_dir()).unwrap();
        let handback: Vec<_> = journal_lines(&journal)
            .into_iter()
            .filter(|l| l["step"] == "handback" && l["action"] == "gate.set_limit")
            .collect();
        assert_eq!(handback.len(), 2, "{handback:#?}");
        assert_eq!(handback[0]["event"], "action_started");
        assert_eq!(handback[0]["before"]["rate_per_s"], 90.0, "{handback:#?}");
        // The printed command works as printed.
        let lift = gate_limit(&sys, &["lift"]);
        assert_eq!(lift.status.code(), Some(0), "{}", stderr(&lift));
        assert!(sys.gate_limit().await["limit"]["rate_per_s"].is_null());
    });
}

#[test]
fn e2e_handback_hold_keeps_the_limit_and_the_printed_command_lifts_it() {
    rt().block_on(async {
        let sys = System::start(1, "0s", 0).await;
        let out = sys
            .run_cmd("e2e-handback-hold.yaml", &["--yes"])
            .output()
            .unwrap();
        assert_exit_ok(&out);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let limit = sys.gate_limit().await;
        assert_eq!(limit["limit"]["rate_per_s"].as_f64(), Some(90.0), "{limit}");
        assert!(text.contains("gate: held at 90.0 req/s"), "{text}");
        assert!(text.contains(", review by 20"), "{text}");
        let command = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("to change it: "))
            .unwrap_or_else(|| panic!("no command in the summary: {text}"))
            .to_string();
        let token = token_file(&sys);
        assert_eq!(
            command,
            format!(
                "recover gate limit lift --admin http://{} --token-file {token}",
                sys.gate_admin
            )
        );
        let bin_dir = std::path::Path::new(BIN).parent().unwrap();
        let path = format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let ran = Command::new("sh")
            .args(["-c", &command])
            .env("PATH", path)
            .output()
            .unwrap();
        assert_eq!(ran.status.code(), Some(0), "{}", stderr(&ran));
        assert!(sys.gate_limit().await["limit"]["rate_per_s"].is_null());
    });
}

#[test]
fn e2e_handback_a_failed_run_leaves_the_safe_hold_and_says_how_to_lift_it() {
    rt().block_on(async {
        let sys = System::start(1, "0s", 0).await;
        let out = sys
            .run_cmd("e2e-relapse.yaml", &["--yes", "--output", "json"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let report = report(&out);
        let names = step_names(&report);
        assert_eq!(
            names,
            ["readmit", "hold-at-safe-rate"],
            "no hand-back after a failure"
        );
        let admit = report["plan"]["admit_rate"].as_f64().unwrap();
        let limit = sys.gate_limit().await;
        let rate = limit["limit"]["rate_per_s"].as_f64().unwrap();
        assert!((rate - admit * 0.5).abs() < 1e-6, "{limit}");
        let gate = &report["gate"];
        assert!(
            gate["said"]
                .as_str()
                .unwrap()
                .contains("safe hold, review by "),
            "{gate}"
        );
        assert!(gate["review_by"].is_string(), "{gate}");
        assert!(
            gate["commands"][0]
                .as_str()
                .unwrap()
                .starts_with("recover gate limit lift --admin http://"),
            "{gate}"
        );
    });
}

#[test]
fn e2e_handback_the_dry_run_shows_the_hand_back() {
    rt().block_on(async {
        let sys = System::start(1, "0s", 0).await;
        let out = sys.run_cmd("e2e-handback.yaml", &["--dry-run"]).output().unwrap();
        assert_exit_ok(&out);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            text.contains("would: hand the gate back: restore the limit it had before the run's first gate action"),
            "{text}"
        );
        assert!(sys.gate_limit().await["limit"]["rate_per_s"].is_null());
    });
}

#[test]
fn gate_limit_cli_refuses_bad_input_with_2_and_an_unreachable_gate_with_3() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("gate.token");
    std::fs::write(&token, TOKEN).unwrap();
    let down = crate::support::ports::loopback_addr();
    let run = |args: &[&str]| {
        Command::new(BIN)
            .args(["gate", "limit"])
            .args(args)
            .output()
            .unwrap()
    };
    let admin = format!("http://{down}");
    let tok = token.display().to_string();
    for (args, why) in [
        (vec!["lift"], "--admin URL and --token-file PATH"),
        (
            vec![
                "set",
                "--rate",
                "1e-300",
                "--admin",
                &admin,
                "--token-file",
                &tok,
            ],
            "--rate",
        ),
        (
            vec![
                "get",
                "--admin",
                &admin,
                "--token-file",
                "/nonexistent/token",
            ],
            "--token-file /nonexistent/token",
        ),
        (vec!["get", "--target", "kube"], "--namespace NS"),
        (
            vec!["get", "--admin", "127.0.0.1:1", "--token-file", &tok],
            "not an http",
        ),
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(why), "{args:?}: {}", stderr(&out));
    }
    let out = run(&["get", "--admin", &admin, "--token-file", &tok]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains(&down.to_string()), "{}", stderr(&out));
}
