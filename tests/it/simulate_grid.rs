//! `recover simulate --grid`: the report over a small grid is consistent with itself
//! (every point has a k or an unknown with a reason; each error is computed from the
//! values shown; a point is outside exactly when an error is beyond its bound or unknown,
//! with a reason; the summary counts the rows) and the same seed gives the same report.

use serde_json::Value;
use std::process::Command;

fn grid(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_recover"))
        .args(["simulate", "--grid"])
        .args(args)
        .output()
        .unwrap()
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64()
}

#[test]
fn a_small_grid_report_is_consistent_and_the_same_for_a_seed() {
    let args = ["--points", "6", "--seed", "11", "--output", "json"];
    let a = grid(&args);
    assert_eq!(
        a.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&a.stderr)
    );
    let b = grid(&args);
    assert_eq!(a.stdout, b.stdout, "same seed, same report");
    let r: Value = serde_json::from_slice(&a.stdout).unwrap();
    let points = r["points"].as_array().unwrap();
    assert_eq!(points.len(), 6);
    let (kw, pw) = (
        r["k_within"].as_f64().unwrap(),
        r["prediction_within"].as_f64().unwrap(),
    );
    let (mut k_in, mut p_in, mut both) = (0, 0, 0);
    for p in points {
        let name = p["n"].to_string();
        let k_true = num(&p["k_true"]).unwrap();
        let k_ok = match (num(&p["k"]), p["k_unknown"].as_str()) {
            (Some(k), _) => {
                let e = num(&p["k_error"]).unwrap();
                assert!((e - (k - k_true) / k_true).abs() < 1e-9, "point {name}");
                e.abs() <= kw
            }
            (None, Some(why)) => {
                assert!(!why.is_empty() && p["k_error"].is_null(), "point {name}");
                false
            }
            (None, None) => panic!("point {name}: neither k nor a reason"),
        };
        let p_ok = match (num(&p["predicted_s"]), num(&p["simulated_s"])) {
            (Some(pr), Some(s)) => {
                let e = num(&p["prediction_error"]).unwrap();
                assert!((e - (pr - s) / s).abs() < 1e-9, "point {name}");
                e.abs() <= pw
            }
            _ => {
                assert!(p["prediction_error"].is_null(), "point {name}");
                let why = [&p["predicted_unknown"], &p["simulated_unknown"]];
                assert!(
                    why.iter()
                        .any(|w| w.as_str().is_some_and(|s| !s.is_empty())),
                    "point {name}: no reason"
                );
                false
            }
        };
        let outside = p["outside"].as_array().unwrap();
        assert_eq!(
            outside.is_empty(),
            k_ok && p_ok,
            "point {name}: {outside:?}"
        );
        assert!(outside.iter().all(|o| !o.as_str().unwrap().is_empty()));
        k_in += usize::from(k_ok);
        p_in += usize::from(p_ok);
        both += usize::from(k_ok && p_ok);
    }
    let s = &r["summary"];
    assert_eq!(s["points"], 6);
    assert_eq!(s["k_within"], k_in);
    assert_eq!(s["prediction_within"], p_in);
    assert_eq!(s["within"], both);
    let by_reason: u64 = s["outside_by_reason"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(by_reason as usize, 6 - both);

    // The text lists every point outside with its reasons.
    let t = grid(&["--points", "6", "--seed", "11"]);
    let text = String::from_utf8_lossy(&t.stdout);
    for p in points
        .iter()
        .filter(|p| !p["outside"].as_array().unwrap().is_empty())
    {
        let line = format!("  grid-{}: {}", p["n"], p["outside"][0].as_str().unwrap());
        assert!(text.contains(&line), "{line}\n{text}");
    }
    assert!(text.contains(&format!("both: {both}/6")), "{text}");
}

#[test]
fn bad_grid_flags_exit_2() {
    for args in [
        &["--points", "0"][..],
        &["--scenario", "config-deploy"][..],
        &["--compare"][..],
        &["--runbook", "no-such-runbook", "--points", "1"][..],
    ] {
        let out = grid(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
