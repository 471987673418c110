//! Bad input to `recover demo ...` is refused with exit 2 and a message naming the flag,
//! before anything starts.

fn run(args: &[&str]) -> (i32, String) {
    let out = crate::support::bin()
        .args(args)
        .output()
        .expect("run recover");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn workers(extra: &[&str]) -> (i32, String) {
    let mut args = vec!["demo", "workers", "--target", "http://127.0.0.1:9"];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn bad_retry_policies_name_the_flag() {
    for (policy, why) in [
        ("linear:1s", "unknown kind"),
        ("fixed:1", "with a unit"),
        ("exp:base=100ms", "max= is missing"),
        ("exp-jitter:base=2s,max=1s", "max is below base"),
    ] {
        let (code, err) = workers(&["--retry", policy]);
        assert_eq!(code, 2, "{policy}: {err}");
        assert!(err.contains("--retry"), "{policy}: flag not named: {err}");
        assert!(err.contains(why), "{policy}: reason missing: {err}");
    }
}

#[test]
fn bad_worker_numbers_name_the_flag() {
    let (code, err) = workers(&["--retry-budget=-0.5"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--retry-budget"), "{err}");
    let (code, err) = workers(&["--count", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--count"), "{err}");
    let (code, err) = run(&["demo", "workers", "--target", "ftp://x"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--target"), "{err}");
}

#[test]
fn bad_service_numbers_name_the_flag() {
    let (code, err) = run(&[
        "demo",
        "config-service",
        "--listen",
        "127.0.0.1:0",
        "--overload-factor",
        "0.5",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--overload-factor"), "{err}");
    let (code, err) = run(&[
        "demo",
        "config-service",
        "--listen",
        "127.0.0.1:0",
        "--service-time",
        "40",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--service-time"), "{err}");
}
