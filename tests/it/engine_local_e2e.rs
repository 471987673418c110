//! End-to-end runs of the engine against real local processes: a full run, a dry run that
//! changes nothing, and a run killed with SIGKILL mid-restart then resumed (with a second
//! concurrent run refused while the first holds the lock).

use crate::support::engine::*;
use std::time::{Duration, Instant};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn e2e_full_run_restarts_every_replica_and_lifts_the_gate() {
    rt().block_on(async {
        let sys = System::start(2, "0s", 10).await;
        let before = sys.pids();
        let out = sys
            .run_cmd("e2e-local.yaml", &["--yes", "--output", "json"])
            .output()
            .unwrap();
        assert_exit_ok(&out);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["outcome"], "succeeded");
        let steps = report["steps"].as_array().unwrap();
        let names: Vec<&str> = steps.iter().map(|s| s["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "block-at-edge",
                "drain-backlog",
                "batched-restart",
                "warm-caches",
                "readmit",
                "handback"
            ]
        );
        assert!(
            steps.iter().all(|s| s["outcome"] == "succeeded"),
            "{steps:#?}"
        );
        assert_eq!(steps[2]["figures"]["restarted"], 2.0);
        assert!(steps[1]["figures"]["drained"].is_number());
        // Every replica runs a new process; the gate is lifted with a note naming the run.
        let after = sys.pids();
        for (b, a) in before.iter().zip(&after) {
            assert!(
                a.is_some() && a != b,
                "pids before {before:?} after {after:?}"
            );
        }
        let limit = sys.gate_limit().await;
        assert!(limit["limit"]["rate_per_s"].is_null(), "{limit}");
        let note = limit["limit"]["note"].as_str().unwrap_or_default();
        assert!(note.contains(report["run_id"].as_str().unwrap()), "{note}");
        // The journal ends with run_finished and history lists the run as succeeded.
        let journal = only_journal(&sys.journal_dir()).unwrap();
        let lines = journal_lines(&journal);
        assert_eq!(lines.last().unwrap()["event"], "run_finished");
        let text = sys.history();
        assert!(
            text.contains("succeeded") && text.contains(report["run_id"].as_str().unwrap()),
            "{text}"
        );
    });
}

#[test]
fn e2e_dry_run_changes_nothing() {
    rt().block_on(async {
        let sys = System::start(2, "0s", 0).await;
        let limit_before = sys.gate_limit().await;
        let pids_before = sys.pids();
        let drained_before = sys
            .service_metric(0, "recover_demo_service_drained_total")
            .await;
        let out = sys
            .run_cmd("e2e-local.yaml", &["--dry-run"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_exit_ok(&out);
        // The plan's numbers and every action appear.
        assert!(stdout.contains("plan: shed"), "{stdout}");
        assert!(
            stdout.contains("would: set the gate to 22.5 req/s"),
            "{stdout}"
        );
        assert!(stdout.contains("would: batch 1: restart svc-0"), "{stdout}");
        assert!(stdout.contains("would: batch 2: restart svc-1"), "{stdout}");
        assert!(
            stdout.contains("would: POST /admin/drain on svc-0, svc-1 at once"),
            "{stdout}"
        );
        // Nothing changed: same gate limit and version, same processes, nothing drained,
        // no journal, no lock.
        assert_eq!(sys.gate_limit().await, limit_before);
        assert_eq!(sys.pids(), pids_before);
        assert_eq!(
            sys.service_metric(0, "recover_demo_service_drained_total")
                .await,
            drained_before
        );
        assert!(!sys.journal_dir().exists());
        assert!(!sys.platform.state_dir().join("lock").exists());
    });
}

#[test]
fn e2e_killed_mid_restart_then_resumed_without_restarting_finished_replicas() {
    rt().block_on(async {
        // Each replica takes 2s to become ready, so the restart step lasts ~6s.
        let sys = System::start(3, "2s", 0).await;
        let original = sys.pids();
        let mut engine = sys
            .run_cmd("e2e-local.yaml", &["--yes"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        let journal = loop {
            if let Some(j) = only_journal(&sys.journal_dir()) {
                break j;
            }
            if let Ok(Some(status)) = engine.try_wait() {
                let mut err = String::new();
                std::io::Read::read_to_string(engine.stderr.as_mut().unwrap(), &mut err).unwrap();
                panic!("the engine exited early ({status}):\n{err}");
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "no journal appeared"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        // A second run on the same target is refused while the first holds the lock.
        let second = sys.run_cmd("e2e-local.yaml", &["--yes"]).output().unwrap();
        let err = String::from_utf8_lossy(&second.stderr);
        assert_eq!(second.status.code(), Some(3), "{err}");
        let run_id = journal.file_stem().unwrap().to_string_lossy().to_string();
        assert!(err.contains("lock") && err.contains(&run_id), "{err}");
        // Kill the engine once svc-0 is restarted and ready: mid-step.
        loop {
            let done = journal_lines(&journal)
                .iter()
                .any(|l| l["action"] == "replica.ready" && l["replica"] == "svc-0");
            if done {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "svc-0 never became ready"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        engine.kill().unwrap();
        engine.wait().unwrap();
        let at_kill = sys.pids();
        assert_ne!(
            at_kill[0], original[0],
            "svc-0 was restarted before the kill"
        );
        let lines = journal_lines(&journal);
        assert!(lines.iter().all(|l| l["event"] != "run_finished"));
        // History shows it as interrupted; resume finishes it.
        let text = sys.history();
        assert!(text.contains("interrupted"), "{text}");
        let out = std::process::Command::new(BIN)
            .args(["resume", &run_id[..12], "--yes", "--output", "json"])
            .arg("--journal-dir")
            .arg(sys.journal_dir())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_exit_ok(&out);
        assert!(stderr.contains("stale lock"), "{stderr}");
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["outcome"], "succeeded");
        assert_eq!(report["run_id"], run_id.as_str());
        let after = sys.pids();
        assert_eq!(
            after[0], at_kill[0],
            "svc-0 was restarted again after resume"
        );
        assert_ne!(after[2], original[2], "svc-2 was never restarted");
        // Each replica has exactly one finished restart in the journal.
        let lines = journal_lines(&journal);
        for r in ["svc-0", "svc-1", "svc-2"] {
            let n = lines
                .iter()
                .filter(|l| {
                    l["event"] == "action_finished"
                        && l["action"] == "replica.restart"
                        && l["replica"] == r
                })
                .count();
            assert_eq!(n, 1, "{r} restarted {n} times");
        }
        assert_eq!(lines.last().unwrap()["event"], "run_finished");
    });
}

/// Demand above the ramp's ceiling (headroom x capacity): the gate still rejects at the
/// last rate, so the ramp holds there, then settles instead of lifting the limit (lifting
/// would let the turned-away clients in as one wave), and says what a human does next.
#[test]
fn e2e_ramp_settles_at_its_ceiling_when_demand_exceeds_it() {
    rt().block_on(async {
        // 40 workers polling every second offer about 40 req/s; the plan is told the
        // service takes 20, so the ramp may rise to 0.9 x 20 = 18 req/s.
        let sys = System::start(1, "0s", 40).await;
        let assume = [
            "--assume-arrival-rate",
            "40",
            "--assume-capacity-cold",
            "20",
            "--assume-k",
            "2",
            "--assume-capacity",
            "20",
        ];
        let out = sys
            .run_cmd_assuming("e2e-settle.yaml", &assume, &["--yes", "--output", "json"])
            .output()
            .unwrap();
        assert_exit_ok(&out);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["outcome"], "succeeded");
        let readmit = &report["steps"][1];
        assert_eq!(readmit["name"], "readmit");
        assert_eq!(readmit["figures"]["lifted"], 0.0, "{readmit:#}");
        let text = readmit.to_string();
        assert!(text.contains("then lift the limit"), "{readmit:#}");
        assert!(
            report["gate"]["said"]
                .as_str()
                .is_some_and(|s| s.contains("the readmission settled there")),
            "the hand-back keeps a settled limit: {report:#}"
        );
        let limit = sys.gate_limit().await;
        let rate = limit["limit"]["rate_per_s"].as_f64();
        assert!(
            rate.is_some_and(|r| (r - 18.0).abs() < 0.01),
            "the gate should stay at the ceiling, 18 req/s: {limit}"
        );
    });
}
