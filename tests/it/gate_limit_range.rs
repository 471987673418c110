//! Every number the admin API takes, whatever it is, ends as a `200` with the limit in
//! force or a `400` naming the field: never a crashed handler, never a gate that stops
//! admitting or serving. A rate at or below about 1e-11 used to panic in admission (a
//! period longer than a Duration or governor's 584 years) after the state file was
//! written, so every restart panicked again. Property-tested over real HTTP against one
//! in-process gate, with the awkward corners of f64 (subnormals, the edges of the range,
//! NaN and infinities, which JSON cannot carry) drawn often.

use crate::support::gate::{client, config, limit, put_limit, start, upstream, Gate};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::time::Duration;

fn rate() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        // Tiny positive rates, 1e-324 to 1e-3, on a log scale.
        (-324.0f64..-3.0).prop_map(|e| 10f64.powf(e)),
        // Ordinary rates, so that many limits pass and follow one another.
        1e-7f64..1e4,
        (0u64..u64::MAX).prop_map(f64::from_bits),
        prop::sample::select(vec![
            0.0,
            -0.0,
            f64::MIN_POSITIVE,
            5e-324,
            1e-300,
            1e-12,
            3.17e-8,
            3.2e-8,
            1e9,
            1e9 + 1.0,
            f64::MAX,
            f64::NAN,
            f64::INFINITY,
        ]),
    ]
}

/// A JSON number as serde_json would read it; NaN and infinities written as Rust prints
/// them, which is not JSON.
fn field(name: &str, v: Option<String>) -> String {
    v.map(|v| format!(r#", "{name}": {v}"#)).unwrap_or_default()
}

fn body(rate: Option<f64>, burst: Option<Option<u32>>, mif: Option<Option<u32>>) -> String {
    let num = |o: Option<u32>| o.map_or("null".to_string(), |v| v.to_string());
    format!(
        r#"{{"rate_per_s": {}{}{}}}"#,
        rate.map_or("null".to_string(), |r| format!("{r:?}")),
        field("burst", burst.map(num)),
        field("max_in_flight", mif.map(num)),
    )
}

async fn still_serving(gate: &Gate) -> Result<(), String> {
    let c = client();
    let status = c.status(&gate.url("/")).await;
    if !matches!(status, Some(200 | 429)) {
        return Err(format!("the proxy answered {status:?}"));
    }
    if c.status(&gate.admin_url("/healthz")).await != Some(200) {
        return Err("the admin listener stopped answering".into());
    }
    Ok(())
}

#[test]
fn any_number_through_the_admin_api_is_applied_or_refused_never_a_crash() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (up, gate) = rt.block_on(async {
        let up = upstream(Duration::ZERO).await;
        let gate = start(config(&[&up], limit(None, 1, None))).await;
        (up, gate)
    });
    let mut runner = TestRunner::new(Config {
        cases: 300,
        failure_persistence: None,
        ..Config::default()
    });
    let count = || prop_oneof![any::<u32>(), 0u32..1000];
    let input = (
        prop::option::weighted(0.9, rate()),
        prop::option::of(prop::option::of(count())),
        prop::option::of(prop::option::of(count())),
    );
    runner
        .run(&input, |(rate, burst, mif)| {
            let body = body(rate, burst, mif);
            rt.block_on(async {
                let r = put_limit(&gate, &body).await;
                prop_assert!(
                    r.status == 200 || r.status == 400,
                    "{body}: {} {}",
                    r.status,
                    r.body
                );
                if r.status == 400 {
                    let field = r.json()["field"].as_str().unwrap_or_default().to_string();
                    prop_assert!(
                        ["rate_per_s", "burst", "max_in_flight", "body"].contains(&field.as_str()),
                        "{body}: {}",
                        r.body
                    );
                }
                still_serving(&gate).await.map_err(TestCaseError::fail)?;
                Ok(())
            })
        })
        .unwrap();
    drop((gate, up));
}

/// The ConfigMap, the state file and the admin API read a limit with the same check, so
/// none of them can hand admission a rate it cannot enforce.
#[test]
fn every_source_refuses_a_rate_admission_cannot_enforce() {
    use recover::gate::{state, validate};
    use recover::platform::kube::limit_source::parse_limit;
    let dir = tempfile::tempdir().unwrap();
    for tiny in ["1e-300", "5e-324", "1e-12"] {
        let json = format!(r#"{{"rate_per_s": {tiny}, "burst": 1}}"#);
        let e = parse_limit(&json).unwrap_err();
        assert!(e.contains("rate_per_s") && e.contains("use 0"), "{e}");
        assert_eq!(
            validate::parse_json(json.as_bytes()).unwrap_err().field,
            "rate_per_s"
        );
        let file = dir.path().join(format!("{tiny}.json"));
        std::fs::write(&file, &json).unwrap();
        let e = state::load(&file).unwrap_err();
        assert!(e.contains("rate_per_s"), "{e}");
    }
}
