//! The slow-replica rehearsal through the real binary: four real replicas behind the real
//! gate, one made five times slower at run time, the detector's slow_replica verdict,
//! the shipped runbook restarting that one replica, and a round-robin baseline. Timings
//! are shortened (the runbook's grace, persist, per-replica window and checks, the gate's
//! ejection times, the scenario's steady and measuring periods) so the test stays short; the figures with the shipped numbers come from
//! `recover rehearse --runbook slow-replica --scenario examples/scenarios/slow-replica.yaml`.

use std::process::Stdio;

/// The shipped runbook with shorter waits: the same steps, checks and signals.
fn quick_runbook(dir: &std::path::Path) -> std::path::PathBuf {
    let root = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{root}/runbooks/slow-replica.yaml")).unwrap();
    let quick = text
        .replace("persist: 10s", "persist: 4s")
        .replace("grace: 5s", "grace: 2s")
        .replace("[10s]", "[5s]")
        .replace("consecutive_successes: 10", "consecutive_successes: 3");
    assert_ne!(quick, text, "the runbook's persist or checks were renamed");
    let p = dir.join("slow-replica-quick.yaml");
    std::fs::write(&p, quick).unwrap();
    p
}

fn quick_scenario(dir: &std::path::Path) -> std::path::PathBuf {
    let root = env!("CARGO_MANIFEST_DIR");
    let text =
        std::fs::read_to_string(format!("{root}/examples/scenarios/slow-replica.yaml")).unwrap();
    let quick = text
        .replace(
            "gate_args: [--balance, least-outstanding]",
            "gate_args: [--balance, least-outstanding, --outlier-base-ejection, 3s, --outlier-ramp, 2s]",
        )
        .replace("measure: 10s", "measure: 3s")
        .replace("steady: 3s", "steady: 1s");
    assert_ne!(
        quick, text,
        "the scenario's gate_args or measure were renamed"
    );
    let p = dir.join("slow-replica-quick-scenario.yaml");
    std::fs::write(&p, quick).unwrap();
    p
}

#[test]
fn e2e_slow_replica_rehearsal_restarts_only_the_slow_one_and_p99_comes_back() {
    let tmp = tempfile::tempdir().unwrap();
    let rb = quick_runbook(tmp.path());
    let sc = quick_scenario(tmp.path());
    let dir = tmp.path().join("run");
    let out = crate::support::bin()
        .args(["rehearse", "--output", "json", "--runbook"])
        .arg(&rb)
        .arg("--scenario")
        .arg(&sc)
        .arg("--report-dir")
        .arg(&dir)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not the report JSON ({e}): {stdout}"));
    let on_disk: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(r, on_disk);
    assert_eq!(out.status.code(), Some(0), "{r:#}");
    assert_eq!(r["recovered"], true, "{r:#}");
    assert!(r["failure"].is_null(), "{r:#}");
    // The main report's schema, with this rehearsal's figures beside the common ones.
    assert_eq!(r["schema_version"], 1, "{r:#}");
    assert!(dir.join("timeline.svg").is_file() && dir.join("series.csv").is_file());
    let slow = &r["slow_replica"];
    assert_eq!(slow["detected"], "replica-1", "{r:#}");
    let f = |k: &str| {
        slow[k]
            .as_f64()
            .unwrap_or_else(|| panic!("{k} missing: {r:#}"))
    };
    assert!(f("after_p99_s") <= 2.0 * f("healthy_p99_s"), "{r:#}");
    // Round robin keeps sending the slow replica its quarter: worse than the gate's.
    assert!(f("baseline_p99_s") > f("after_p99_s"), "{r:#}");
    // Only the slow replica was restarted: the journal has one restart, of replica-1.
    let journal_dir = dir.join("main").join("journal");
    let mut restarts = vec![];
    for e in std::fs::read_dir(&journal_dir).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        for line in text.lines().filter(|l| l.contains("replica.restart")) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            if v.to_string().contains("started") {
                restarts.push(v.to_string());
            }
        }
    }
    assert!(
        !restarts.is_empty() && restarts.iter().all(|l| l.contains("replica-1")),
        "{restarts:?}"
    );
}
