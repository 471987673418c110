//! Runbook files over the size limit (1 MiB) or the step limit (200) are refused with
//! exit 2 naming the limit, before they cost memory: a 300,000-step file took 643 MB to
//! parse. Peak memory of `recover runbooks validate` (from wait4) is printed for each case.

use std::process::Stdio;

/// The built-in stuck-overload runbook with its steps replaced by `n` notify steps.
fn runbook_with_steps(n: usize) -> String {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/runbooks/stuck-overload.yaml"
    ))
    .unwrap();
    let start = src.find("\n  steps:\n").expect("a steps list") + "\n  steps:\n".len();
    let end = src.find("\n  on_failure:\n").expect("an on_failure list") + 1;
    let mut out = src[..start].to_string();
    for i in 0..n {
        out.push_str(&format!(
            "    - name: s{i}\n      action: notify\n      with: {{message: m}}\n"
        ));
    }
    out.push_str(&src[end..]);
    out
}

/// Exit code, stderr and peak RSS (bytes, from wait4's rusage) of
/// `recover runbooks validate FILE`.
// Reaped by wait4 below, which std does not see.
#[allow(clippy::zombie_processes)]
fn validate(file: &std::path::Path) -> (Option<i32>, String, u64) {
    let mut child = crate::support::bin()
        .args(["runbooks", "validate"])
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value; wait4 fills it and reaps our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4: {}", std::io::Error::last_os_error());
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (code, err, usage.ru_maxrss as u64 * 1024)
}

#[test]
fn a_runbook_within_the_limits_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("two-hundred.yaml");
    std::fs::write(&f, runbook_with_steps(198)).unwrap(); // plus its 2 on_failure steps
    let (code, err, _) = validate(&f);
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn a_runbook_over_200_steps_is_refused_naming_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("too-many.yaml");
    std::fs::write(&f, runbook_with_steps(201)).unwrap();
    let (code, err, _) = validate(&f);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("too-many.yaml:"), "{err}");
    assert!(
        err.contains("spec.steps") && err.contains("limit is 200"),
        "{err}"
    );
}

#[test]
fn a_runbook_over_1_mib_is_refused_before_it_is_parsed() {
    let dir = tempfile::tempdir().unwrap();
    let huge = dir.path().join("huge.yaml");
    let text = runbook_with_steps(300_000);
    std::fs::write(&huge, &text).unwrap();
    let (code, err, peak) = validate(&huge);
    println!(
        "{} bytes, 300,000 steps: exit {code:?}, peak RSS {:.1} MB",
        text.len(),
        peak as f64 / 1e6
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("huge.yaml:") && err.contains("(1 MiB)"),
        "{err}"
    );
    assert!(peak < 100_000_000, "validate peaked at {peak} bytes");

    // Just under the size limit, as many steps as fit: refused by the step limit after a
    // parse whose memory the size limit bounds.
    let base = runbook_with_steps(0).len();
    let per_step = runbook_with_steps(1).len() - base;
    let fits = (1024 * 1024 - base) / (per_step + 4); // names grow to s12345
    let most = dir.path().join("most.yaml");
    let text = runbook_with_steps(fits);
    assert!(text.len() <= 1024 * 1024, "{}", text.len());
    std::fs::write(&most, &text).unwrap();
    let (code, err, peak) = validate(&most);
    println!(
        "{} bytes, {fits} steps: exit {code:?}, peak RSS {:.1} MB",
        text.len(),
        peak as f64 / 1e6
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("limit is 200"), "{err}");
    assert!(peak < 100_000_000, "validate peaked at {peak} bytes");
}

#[test]
fn a_runbook_whose_expressions_nest_thousands_deep_is_refused_not_a_crash() {
    let src = runbook_with_steps(3);
    let dir = tempfile::tempdir().unwrap();
    // A condition is parsed when the runbook is loaded.
    let deep_condition = src.replace(
        "queue_depth <= params.max_queue",
        &format!(
            "{}queue_depth <= params.max_queue",
            "not not ".repeat(20_000)
        ),
    );
    assert_ne!(deep_condition, src, "the condition to deepen is gone");
    let f = dir.path().join("deep-condition.yaml");
    std::fs::write(&f, deep_condition).unwrap();
    let (code, err, _) = validate(&f);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("nested more than 100 levels deep"), "{err}");

    // A signal's scrape expression is parsed when the runbook is loaded, before any read.
    let deep_signal = src.replace(
        "scrape: avg(recover_demo_service_warm_fraction@service)",
        &format!("scrape: {}1{}", "(".repeat(20_000), ")".repeat(20_000)),
    );
    assert_ne!(deep_signal, src, "the signal to deepen is gone");
    let f = dir.path().join("deep-signal.yaml");
    std::fs::write(&f, deep_signal).unwrap();
    let out = crate::support::bin()
        .args([
            "detect",
            "--observe",
            "1s",
            "--metrics-url",
            "gate=http://127.0.0.1:1/metrics",
        ])
        .arg("--runbook")
        .arg(&f)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("spec.signals.warm_fraction.scrape") && err.contains("nested more than 100"),
        "{err}"
    );
}
