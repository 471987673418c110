//! `recover plan` from numbers, as a user runs it: the real binary, its stdout and exit code.

fn plan(args: &[&str]) -> std::process::Output {
    crate::support::bin()
        .arg("plan")
        .args(args)
        .output()
        .expect("run recover plan")
}

#[test]
fn k4_at_cold_capacity_sheds_75_percent_with_a_ramp() {
    let out = plan(&[
        "--arrival",
        "200",
        "--capacity-cold",
        "200",
        "--k",
        "4",
        "--capacity",
        "250",
        "--output",
        "json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert!(
        (v["shed_fraction"].as_f64().unwrap() - 0.75).abs() < 1e-9,
        "{v}"
    );
    // Headroom 0.9 applies to the admit rate only: 0.9 x 200 / 4.
    assert!(
        (v["admit_rate"].as_f64().unwrap() - 45.0).abs() < 1e-9,
        "{v}"
    );
    let ramp = v["ramp"].as_array().unwrap();
    assert!(ramp.len() >= 3, "{v}");
    let rates: Vec<f64> = ramp
        .iter()
        .map(|s| s["rate_per_s"].as_f64().unwrap())
        .collect();
    assert!(
        rates.windows(2).all(|w| w[1] > w[0]),
        "ramp must rise: {rates:?}"
    );
    assert_eq!(rates[0], 45.0);
    // The ramp may rise to what the healthy service takes (headroom x capacity); the
    // engine lifts the limit earlier, at the first step where the gate rejects nothing.
    assert!(
        (rates.last().unwrap() - 225.0).abs() < 1e-9,
        "ends at 0.9 x capacity 250: {rates:?}"
    );
    assert!((v["ramp_end_rate"].as_f64().unwrap() - 225.0).abs() < 1e-9);
    assert_eq!(ramp[0]["hold"], "5s");
    let alts = v["alternatives"].as_array().unwrap();
    let twenty = alts.iter().find(|a| a["shed_fraction"] == 0.2).unwrap();
    assert_eq!(twenty["clears"], false);
}

#[test]
fn text_output_shows_the_arithmetic_and_smaller_sheds() {
    let out = plan(&["--arrival", "200", "--capacity-cold", "200", "--k", "4"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("max(0, 1 - 50.0 / 200.0) = 0.750"), "{text}");
    assert!(text.contains("shedding 20% leaves 0.80 x 200.0 = 160.0 req/s > capacity_cold / k = 50.0: stays stuck"), "{text}");
    assert!(text.contains("headroom"), "{text}");
}

#[test]
fn bad_numbers_are_usage_errors_naming_the_flag() {
    let out = plan(&["--arrival", "200", "--capacity-cold", "-5", "--k", "4"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--capacity-cold"));
    let out = plan(&["--arrival", "200", "--capacity-cold", "100", "--k", "0.5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--k must be at least 1"));
    let out = plan(&["--arrival", "NaN", "--capacity-cold", "100", "--k", "2"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn no_shed_when_arrival_is_already_low() {
    let out = plan(&[
        "--arrival",
        "10",
        "--capacity-cold",
        "100",
        "--k",
        "2",
        "--output",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["shed_fraction"], 0.0);
}
