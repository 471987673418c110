//! Check before acting, with real processes: a replica started by hand (no pid file in
//! the platform's state directory) makes a run refuse before its first action, exit 3,
//! naming the inventory field that fixes it, with the gate's limit untouched; once the
//! inventory adopts the replica by its listening port, the same run gets past the check
//! (a dry run, so nothing else changes) and the platform owns the process.

use crate::support::engine::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_started_by_hand_refuses_until_the_inventory_adopts_it() {
    let sys = System::start(1, "0s", 0).await;
    let state = sys.platform.state_dir().to_path_buf();
    let pid = sys.pids()[0].expect("the replica runs");
    // Forget that recover started it: as if an engineer had started it by hand.
    std::fs::remove_file(state.join("svc-0.pid")).unwrap();
    let limit_before = sys.gate_limit().await;

    let out = sys.run_cmd("e2e-local.yaml", &["--yes"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let port = sys.services[0].port();
    assert!(
        stderr.contains("precondition(s) unmet")
            && stderr.contains("[step batched-restart]")
            && stderr.contains(&format!("adopt: {{port: {port}}}")),
        "{stderr}"
    );
    assert_eq!(sys.gate_limit().await, limit_before, "the gate was touched");
    assert!(!sys.journal_dir().exists(), "a journal means it started");
    assert!(recover::platform::local::process::running(pid));

    // Adopt it by its port: the check passes and the pid file names the same process.
    let inv = std::fs::read_to_string(&sys.inventory).unwrap();
    let adopted = inv.replace(
        "    readiness_url:",
        &format!("    adopt: {{port: {port}}}\n    readiness_url:"),
    );
    std::fs::write(&sys.inventory, adopted).unwrap();
    let out = sys
        .run_cmd("e2e-local.yaml", &["--dry-run"])
        .output()
        .unwrap();
    assert_exit_ok(&out);
    let recorded = std::fs::read_to_string(state.join("svc-0.pid")).unwrap();
    assert_eq!(recorded.trim(), pid.to_string());
    // A bad adoption is a refusal that says what was looked for.
    let wrong = std::fs::read_to_string(&sys.inventory).unwrap().replace(
        &format!("adopt: {{port: {port}}}"),
        "adopt: {pid: 999999999}",
    );
    std::fs::write(&sys.inventory, wrong).unwrap();
    std::fs::remove_file(state.join("svc-0.pid")).unwrap();
    let out = sys
        .run_cmd("e2e-local.yaml", &["--dry-run"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("no process with pid 999999999"), "{stderr}");
}
