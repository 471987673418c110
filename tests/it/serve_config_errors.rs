//! A bad `serve.yaml` is refused at start-up (exit 2) with the line the mistake is on,
//! said once: `serve.yaml:LINE:COLUMN: field.path: message`; so is a route to a runbook
//! that does not exist.

const CONFIG: &str = "\
apiVersion: recover/v1
kind: ServeConfig
auth:
  bearer_token:
    env: SERVE_TEST_TOKEN
budget:
  runs_per_window: 3
  window: 60
routes:
  - name: stuck
    match:
      alertname: ConfigServiceStuck
    runbook: stuck-overload
    target:
      platform: local
      name: demo
      inventory: inventory.yaml
";

#[test]
fn a_bad_value_is_reported_at_its_own_line_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("serve.yaml");
    std::fs::write(&path, CONFIG).unwrap();
    let out = crate::support::bin()
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!("{}:8:3: budget.window: invalid duration", path.display());
    assert!(err.contains(&want), "want {want:?} in {err}");
    assert!(
        !err.contains(" at line "),
        "the location is said twice: {err}"
    );
}

/// Before, a route to a runbook that does not exist was accepted, and found out when the
/// first alert's detection failed.
#[test]
fn a_route_to_a_runbook_that_does_not_exist_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("serve.yaml");
    let text = CONFIG
        .replace("runbook: stuck-overload", "runbook: stuck-overlaod")
        .replace("window: 60", "window: 60s");
    std::fs::write(&path, text).unwrap();
    let log = dir.path().join("serve.log");
    let mut serve = crate::support::bin()
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&path)
        .env("SERVE_TEST_TOKEN", "a-token-long-enough-0123456789")
        .current_dir(dir.path())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // Accepted, it would listen until stopped: give it 20 s to refuse.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = serve.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = serve.kill();
            let _ = serve.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let err = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.and_then(|s| s.code()), Some(2), "{err}");
    let (line, field) = (
        format!("{}:13:", path.display()),
        "routes[0].runbook: no runbook named \"stuck-overlaod\"",
    );
    assert!(
        err.contains(&line) && err.contains(field),
        "want {line}COL: {field} in {err}"
    );
}
