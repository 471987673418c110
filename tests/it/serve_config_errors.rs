//! A bad `serve.yaml` is refused at start-up (exit 2) with the line the mistake is on,
//! said once: `serve.yaml:LINE:COLUMN: field.path: message`.

use std::process::Command;

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
    let out = Command::new(env!("CARGO_BIN_EXE_recover"))
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
