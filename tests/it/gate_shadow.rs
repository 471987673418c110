//! A limit in shadow over real sockets: decided like the same limit enforced, counted on
//! `/metrics` by reason, nothing refused; switched on and off through the admin API, bad
//! input refused naming the field.

use crate::support::gate::*;
use std::time::Duration;

/// Send exactly `n` requests to `url`, request `i` at `i / rate` seconds from now whatever
/// the answers before it: the same arrivals however the gate answers.
async fn paced(url: String, n: usize, rate: f64) -> Tally {
    let c = client();
    let start = tokio::time::Instant::now();
    let mut sent = Vec::with_capacity(n);
    for i in 0..n {
        tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 / rate)).await;
        let (c, url) = (c.clone(), url.clone());
        sent.push(tokio::spawn(async move { c.status(&url).await }));
    }
    let mut t = Tally::default();
    for s in sent {
        match s.await.unwrap() {
            Some(200) => t.ok += 1,
            Some(429) => t.rejected += 1,
            _ => t.other += 1,
        }
    }
    t
}

fn rate_limit(shadow: bool) -> String {
    format!(r#"{{"rate_per_s": 50, "burst": 25, "shadow": {shadow}}}"#)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_counts_what_the_same_limit_refuses_enforced_and_refuses_nothing() {
    // 400 requests at 200/s against 50/s: about 3 in 4 over the limit.
    const N: usize = 400;
    const OFFERED: f64 = 200.0;
    let up = upstream(Duration::ZERO).await;

    let enforced = start(config(&[&up], limit(None, 1, None))).await;
    assert_eq!(put_limit(&enforced, &rate_limit(false)).await.status, 200);
    let e = paced(enforced.url("/"), N, OFFERED).await;
    let m = metrics(enforced.admin).await;
    let refused = sample(
        &m,
        r#"recover_gate_requests_total{outcome="rejected_rate"}"#,
    )
    .unwrap();
    assert_eq!(e.rejected as f64, refused, "{e:?}");
    assert!(refused > N as f64 / 2.0, "the limit is below demand: {e:?}");
    assert_eq!(
        sample(&m, r#"recover_gate_shadow_refusals_total{reason="rate"}"#),
        Some(0.0)
    );

    let shadow = start(config(&[&up], limit(None, 1, None))).await;
    let r = put_limit(&shadow, &rate_limit(true)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["limit"]["shadow"], true, "{}", r.body);
    let s = paced(shadow.url("/"), N, OFFERED).await;
    assert_eq!((s.ok, s.rejected, s.other), (N as u64, 0, 0), "{s:?}");
    let m = metrics(shadow.admin).await;
    let would = sample(&m, r#"recover_gate_shadow_refusals_total{reason="rate"}"#).unwrap();
    assert_eq!(
        sample(
            &m,
            r#"recover_gate_requests_total{outcome="rejected_rate"}"#
        ),
        Some(0.0)
    );
    assert_eq!(
        sample(&m, r#"recover_gate_requests_total{outcome="admitted"}"#),
        Some(N as f64)
    );
    eprintln!("enforced refused {refused} of {N}; shadow counted {would}");
    assert!(
        (would - refused).abs() <= 0.02 * refused,
        "shadow counted {would}, enforced refused {refused}"
    );
    assert_eq!(sample(&m, "recover_gate_shadow"), Some(1.0));
    assert_eq!(
        sample(&m, "recover_gate_shadow_rate_per_second"),
        Some(50.0)
    );
    assert!(m.contains("recover_gate_limit_rate_per_second +Inf"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_shows_the_concurrency_its_cap_would_have_held() {
    let up = upstream(Duration::from_millis(400)).await;
    let gate = start(config(&[&up], limit(None, 1, None))).await;
    let r = put_limit(
        &gate,
        r#"{"rate_per_s": null, "max_in_flight": 4, "shadow": true}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let c = client();
    let calls: Vec<_> = (0..10)
        .map(|_| {
            let (c, url) = (c.clone(), gate.url("/"));
            tokio::spawn(async move { c.status(&url).await })
        })
        .collect();
    let admin = gate.admin;
    let held = crate::support::eventually(Duration::from_secs(5), || async move {
        let m = metrics(admin).await;
        sample(&m, "recover_gate_in_flight") == Some(10.0)
            && sample(&m, "recover_gate_shadow_in_flight") == Some(4.0)
    })
    .await;
    assert!(held, "{}", metrics(gate.admin).await);
    for c in calls {
        assert_eq!(c.await.unwrap(), Some(200));
    }
    let m = metrics(gate.admin).await;
    assert_eq!(
        sample(
            &m,
            r#"recover_gate_shadow_refusals_total{reason="in_flight"}"#
        ),
        Some(6.0)
    );
    assert_eq!(sample(&m, "recover_gate_shadow_in_flight"), Some(0.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_switches_on_and_off_through_the_admin_api() {
    let up = upstream(Duration::ZERO).await;
    let gate = start(config(&[&up], limit(None, 1, None))).await;
    let c = client();
    let m = metrics(gate.admin).await;
    assert_eq!(sample(&m, "recover_gate_shadow"), Some(0.0));
    for reason in ["rate", "in_flight"] {
        let series = format!(r#"recover_gate_shadow_refusals_total{{reason="{reason}"}}"#);
        assert_eq!(sample(&m, &series), Some(0.0), "{m}");
    }

    // Blocking everything, in shadow: every request passes and is counted.
    let r = put_limit(&gate, r#"{"rate_per_s": 0, "shadow": true}"#).await;
    assert_eq!(r.status, 200, "{}", r.body);
    for _ in 0..3 {
        assert_eq!(c.get(&gate.url("/")).await.status, 200);
    }
    let m = metrics(gate.admin).await;
    assert_eq!(
        sample(&m, r#"recover_gate_shadow_refusals_total{reason="rate"}"#),
        Some(3.0)
    );

    // Out of shadow, the same limit refuses.
    let r = put_limit(&gate, r#"{"rate_per_s": 0}"#).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.json()["limit"].get("shadow").is_none(), "{}", r.body);
    assert_eq!(c.get(&gate.url("/")).await.status, 429);
    let m = metrics(gate.admin).await;
    assert_eq!(sample(&m, "recover_gate_shadow"), Some(0.0));
    assert_eq!(
        sample(&m, r#"recover_gate_shadow_refusals_total{reason="rate"}"#),
        Some(3.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_shadow_input_is_a_400_naming_the_field_and_keeps_the_limit() {
    let up = upstream(Duration::ZERO).await;
    let gate = start(config(&[&up], limit(Some(50.0), 5, None))).await;
    for body in [
        r#"{"rate_per_s": 10, "shadow": "yes"}"#,
        r#"{"rate_per_s": 10, "shadow": 1}"#,
        r#"{"rate_per_s": null, "shadow": true}"#,
    ] {
        let r = put_limit(&gate, body).await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert_eq!(r.json()["field"], "shadow", "{body}: {}", r.body);
        assert!(
            r.json()["error"].as_str().unwrap().contains("shadow"),
            "{}",
            r.body
        );
    }
    let m = metrics(gate.admin).await;
    assert_eq!(sample(&m, "recover_gate_shadow"), Some(0.0));
    assert_eq!(sample(&m, "recover_gate_limit_rate_per_second"), Some(50.0));
}
