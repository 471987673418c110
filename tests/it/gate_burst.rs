//! A burst the engine passes for a readmission wave (up to a few thousand) goes through the
//! admin API as sent and is enforced exactly, with governor's semantics as
//! [`recover::gate::admission`] applies them: a new limit carries over no more than the old
//! limiter had left, up to the new burst, and then admits at the rate.

use crate::support::gate::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One cell per 1000 s: none refills while the test runs.
const SLOW: f64 = 0.001;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_thousands_set_through_the_admin_api_admits_exactly_that_many() {
    for burst in [1000u32, 3000] {
        let up = upstream(Duration::ZERO).await;
        // A fresh limiter starts full: 5000 cells to carry over.
        let gate = start(config(&[&up], limit(Some(SLOW), 5000, None))).await;
        let r = put_limit(
            &gate,
            &format!(r#"{{"rate_per_s": {SLOW}, "burst": {burst}}}"#),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.json()["limit"]["burst"], burst, "{}", r.body);
        assert_eq!(
            sample(&metrics(gate.admin).await, "recover_gate_limit_burst"),
            Some(f64::from(burst))
        );
        let extra = 200;
        let (ok, refused) = send(&gate.url("/"), u64::from(burst) + extra, 8).await;
        assert_eq!(
            (ok, refused),
            (u64::from(burst), extra),
            "burst {burst}: admitted / refused"
        );
        assert_eq!(up.count(), u64::from(burst));
    }
}

/// Send `n` requests from `workers` concurrent clients; (200s, 429s).
async fn send(url: &str, n: u64, workers: usize) -> (u64, u64) {
    let next = Arc::new(AtomicU64::new(0));
    let (ok, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let tasks: Vec<_> = (0..workers)
        .map(|_| {
            let (url, next, ok, refused) =
                (url.to_string(), next.clone(), ok.clone(), refused.clone());
            tokio::spawn(async move {
                let c = client();
                while next.fetch_add(1, Ordering::SeqCst) < n {
                    match c.status(&url).await {
                        Some(200) => ok.fetch_add(1, Ordering::SeqCst),
                        Some(429) => refused.fetch_add(1, Ordering::SeqCst),
                        other => panic!("unexpected answer {other:?}"),
                    };
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    (ok.load(Ordering::SeqCst), refused.load(Ordering::SeqCst))
}
