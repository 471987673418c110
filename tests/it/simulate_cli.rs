//! `recover simulate` as a user runs it: the real binary, its JSON, its errors and exit
//! codes, the plot file and the compare table.

use std::process::Output;

fn recover(args: &[&str]) -> Output {
    crate::support::bin()
        .arg("simulate")
        .args(args)
        .output()
        .expect("run recover")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn json_has_the_summary_fields_and_is_byte_for_byte_stable() {
    let args = [
        "--scenario",
        "config-deploy",
        "--output",
        "json",
        "--set",
        "overload_factor=4",
        "--seed",
        "7",
    ];
    let a = recover(&args);
    assert_eq!(a.status.code(), Some(0), "{}", stderr(&a));
    let b = recover(&args);
    assert_eq!(a.stdout, b.stdout);
    let v: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    for field in [
        "peak_calls",
        "given_up",
        "settled_s",
        "recovered",
        "time_to_recover_s",
        "series",
    ] {
        assert!(v.get(field).is_some(), "missing {field}");
    }
    assert_eq!(v["recovered"], false);
    assert_eq!(v["series"].as_array().unwrap().len(), 300);
}

#[test]
fn retry_storm_json_reports_peak_given_up_and_settled() {
    let o = recover(&["--scenario", "retry-storm", "--output", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["peak_calls"], 16);
    assert_eq!(v["given_up"], 4);
    assert_eq!(v["settled_s"], 8.0);
    assert_eq!(v["series"][7]["served"], 4);
}

#[test]
fn set_turns_the_stuck_system_into_one_that_recovers() {
    let o = recover(&["--scenario", "config-deploy", "--set", "shedding=true"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("recovered: yes"), "{text}");
}

#[test]
fn unknown_or_unparsable_parameters_exit_2_naming_the_key() {
    let o = recover(&["--scenario", "config-deploy", "--set", "overload=2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown parameter `overload`"),
        "{}",
        stderr(&o)
    );
    let o = recover(&["--scenario", "config-deploy", "--set", "timeout=fast"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--set timeout=fast"), "{}", stderr(&o));
    let o = recover(&["--scenario", "config-deploy", "--set", "cold_factor=3"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cold_factor"), "{}", stderr(&o));
    let o = recover(&["--scenario", "retry-storm", "--policy", "sometimes"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("sometimes"), "{}", stderr(&o));
    let o = recover(&["--scenario", "no-such-thing"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn scenario_file_errors_name_file_line_column_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "model: config-deploy\nsystem:\n  clients: 50\n  capacty: 20\n",
    )
    .unwrap();
    let o = recover(&["--scenario", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("bad.yaml:4:3: system.capacty: unknown field"),
        "{e}"
    );
}

#[test]
fn scenario_file_with_a_plan_runs_the_procedure() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.yaml");
    std::fs::write(
        &path,
        "model: config-deploy\nseed: 3\nsystem:\n  plan_at: 60s\n  duration: 200s\nplan:\n  shed_fraction: 0.87\n  admit_rate: 22\n  arithmetic: []\n  ramp:\n    - {rate_per_s: 40, hold: 5s}\n    - {rate_per_s: 80, hold: 5s}\n",
    )
    .unwrap();
    let o = recover(&["--scenario", path.to_str().unwrap(), "--output", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["seed"], 3);
    assert_eq!(v["reference"], "plan_start");
    assert_eq!(v["recovered"], true);
    assert_eq!(v["series"][62]["gate_rate"], 22.0);
}

#[test]
fn plot_writes_an_svg_of_the_series() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.svg");
    let o = recover(&[
        "--scenario",
        "config-deploy",
        "--plot",
        path.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..100.min(svg.len())]);
    assert!(svg.contains("useful/s") && svg.contains("<polyline"));
}

#[test]
fn compare_shows_which_single_change_recovers() {
    let o = recover(&[
        "--scenario",
        "config-deploy",
        "--compare",
        "--output",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    let get = |name: &str| {
        rows.iter()
            .find(|r| r["variant"] == name)
            .unwrap_or_else(|| panic!("{name}"))
    };
    assert_eq!(get("baseline")["recovered"], false);
    assert_eq!(get("load shedding")["recovered"], true);
    assert_eq!(get("overload factor 1")["recovered"], true);
    // Once stuck, spreading retries no longer helps, but shedding still gets it out.
    assert_eq!(get("jitter")["recovers_if_changed_when_stuck"], false);
    assert_eq!(get("load shedding")["recovers_if_changed_when_stuck"], true);
    assert!(
        get("load shedding")["time_to_recover_after_change_s"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(rows.len() >= 7);
}
