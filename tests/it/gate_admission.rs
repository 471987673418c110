//! Admission over real sockets: the gate holds the rate it is given, a rejected request
//! never reaches the upstream, and a limit change through the admin API takes effect at
//! once without opening a burst above the new limit.

use crate::support::eventually;
use crate::support::gate::*;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_100_per_s_under_1000_offered_and_rejects_without_touching_upstream() {
    let up = upstream(Duration::ZERO).await;
    let gate = start(config(&[&up], limit(Some(100.0), 5, None))).await;

    let (tally, elapsed) = flood_for(gate.url("/config"), 1000.0, 20, Duration::from_secs(5)).await;

    let admitted_rate = tally.ok as f64 / elapsed.as_secs_f64();
    assert!(
        (90.0..=110.0).contains(&admitted_rate),
        "admitted {admitted_rate:.1}/s over {elapsed:?}, want 100/s +-10% ({tally:?})"
    );
    assert!(
        tally.rejected as f64 > 2.0 * tally.ok as f64,
        "the flood was not over the limit, test proves nothing: {tally:?}"
    );
    assert_eq!(tally.other, 0, "{tally:?}");
    assert_eq!(
        up.count(),
        tally.ok,
        "the upstream saw exactly the admitted requests, no rejected one"
    );
    let m = metrics(gate.admin).await;
    assert_eq!(
        sample(&m, r#"recover_gate_requests_total{outcome="admitted"}"#),
        Some(tally.ok as f64)
    );
    assert_eq!(
        sample(
            &m,
            r#"recover_gate_requests_total{outcome="rejected_rate"}"#
        ),
        Some(tally.rejected as f64)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejection_is_a_429_with_retry_after() {
    let up = upstream(Duration::ZERO).await;
    let gate = start(config(&[&up], limit(Some(0.5), 1, None))).await;
    let c = client();
    assert_eq!(c.get(&gate.url("/")).await.status, 200);
    let r = c.get(&gate.url("/")).await;
    assert_eq!(r.status, 429);
    let retry: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry), "retry-after {retry}");
    assert_eq!(up.count(), 1);
}

/// Upstream requests seen during `window`, while a flood keeps going.
async fn admitted_during(up: &Upstream, window: Duration) -> (u64, Duration) {
    let before = up.count();
    let t = Instant::now();
    tokio::time::sleep(window).await;
    (up.count() - before, t.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_changes_apply_at_once_and_open_no_burst() {
    let up = upstream(Duration::ZERO).await;
    let gate = start(config(&[&up], limit(Some(20.0), 20, None))).await;
    let stop = CancellationToken::new();
    let (tally, flood_task) = flood(gate.url("/"), 400.0, 16, stop.clone());

    // Drain the starting burst, then raise the burst tenfold and more under load. A
    // freshly built limiter would let 400 through at once; the gate must keep to 20/s.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let r = put_limit(
        &gate,
        r#"{"rate_per_s": 20, "burst": 400, "max_in_flight": null}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let (n, w) = admitted_during(&up, Duration::from_secs(1)).await;
    let bound = 20.0 * w.as_secs_f64() + 10.0;
    assert!(
        (n as f64) <= bound,
        "raising the burst let {n} through in {w:?} (bound {bound:.0})"
    );

    // Raise the rate: it applies from the next request on, so the window admits more than
    // the old 20/s could have, and no more than the new 150/s. The lower end is the old
    // limit's ceiling, not a throughput the flood must reach: a loaded machine offers less.
    let r = put_limit(
        &gate,
        r#"{"rate_per_s": 150, "burst": 1, "max_in_flight": null}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let (n, w) = admitted_during(&up, Duration::from_secs(1)).await;
    let old_ceiling = 20.0 * w.as_secs_f64() + 10.0;
    let upper = 150.0 * w.as_secs_f64() + 10.0;
    assert!(
        n as f64 > old_ceiling && n as f64 <= upper,
        "after raising to 150/s: {n} in {w:?} (want above the old {old_ceiling:.0}, at most {upper:.0})"
    );

    // Block all: the very next request is refused.
    let r = put_limit(
        &gate,
        r#"{"rate_per_s": 0, "burst": 0, "max_in_flight": null}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    // Requests admitted before the change may still be on their way: wait until none is.
    eventually(Duration::from_secs(5), || async {
        sample(&metrics(gate.admin).await, "recover_gate_in_flight") == Some(0.0)
    })
    .await;
    let (n, _) = admitted_during(&up, Duration::from_millis(700)).await;
    assert_eq!(n, 0, "rate 0 must block everything");

    stop.cancel();
    let _ = flood_task.await;
    assert!(tally.snapshot().rejected > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_cap_rejects_the_excess_at_once() {
    let up = upstream(Duration::from_millis(300)).await;
    let gate = start(config(&[&up], limit(None, 1, Some(2)))).await;
    let c = client();
    let started = Instant::now();
    let reqs: Vec<_> = (0..6)
        .map(|_| {
            let (c, url) = (c.clone(), gate.url("/"));
            tokio::spawn(async move { c.get(&url).await.status })
        })
        .collect();
    let mut statuses = Vec::new();
    for r in reqs {
        statuses.push(r.await.unwrap());
    }
    statuses.sort();
    assert_eq!(statuses, vec![200, 200, 429, 429, 429, 429], "{started:?}");
    assert_eq!(up.count(), 2);
    let m = metrics(gate.admin).await;
    assert_eq!(
        sample(
            &m,
            r#"recover_gate_requests_total{outcome="rejected_in_flight"}"#
        ),
        Some(4.0)
    );
    assert_eq!(sample(&m, "recover_gate_in_flight"), Some(0.0));
}
