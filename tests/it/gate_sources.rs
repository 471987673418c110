//! Extra limit feeds: a [`LimitSource`] handed to `serve` puts its limits in force with
//! its own version (shown in /metrics), and a bad limit from it never replaces a good one.

use crate::support::gate::*;
use recover::gate::limit_source::{LimitSource, LimitSourceError, VersionedLimit};
use recover::gate::{serve, BoundGate};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A source fed by the test, standing in for a ConfigMap watch: it forwards what it is
/// given, exactly as a real source forwards what it reads.
struct Fed(mpsc::Receiver<VersionedLimit>);

#[async_trait::async_trait]
impl LimitSource for Fed {
    fn name(&self) -> &'static str {
        "fed-by-test"
    }
    async fn run(
        mut self: Box<Self>,
        updates: mpsc::Sender<VersionedLimit>,
        shutdown: CancellationToken,
    ) -> Result<(), LimitSourceError> {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                next = self.0.recv() => match next {
                    Some(v) => {
                        let _ = updates.send(v).await;
                    }
                    None => return Ok(()),
                },
            }
        }
    }
}

async fn wait_for_metric(admin: std::net::SocketAddr, series: &str) -> String {
    for _ in 0..100 {
        let m = metrics(admin).await;
        if sample(&m, series).is_some() {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{series} never appeared");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extra_source_sets_the_limit_with_its_version_and_cannot_break_it() {
    let up = upstream(Duration::ZERO).await;
    let bound = BoundGate::bind(config(&[&up], limit(None, 1, None)))
        .await
        .unwrap();
    let (proxy, admin) = (bound.proxy_addr(), bound.admin_addr());
    let (feed, rx) = mpsc::channel(4);
    let stop = CancellationToken::new();
    let task = tokio::spawn(bound.run(vec![Box::new(Fed(rx))], stop.clone()));
    let c = client();
    assert_eq!(c.get(&format!("http://{proxy}/")).await.status, 200);

    let block = VersionedLimit {
        limit: limit(Some(0.0), 0, None),
        version: "rv-42".into(),
    };
    feed.send(block).await.unwrap();
    wait_for_metric(admin, r#"recover_gate_limit_applied_info{version="rv-42"}"#).await;
    assert_eq!(c.get(&format!("http://{proxy}/")).await.status, 429);

    // A typo in the ConfigMap: refused, the gate stays blocked, the version stays.
    let typo = VersionedLimit {
        limit: limit(Some(-3.0), 1, None),
        version: "rv-43".into(),
    };
    feed.send(typo).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let m = metrics(admin).await;
    assert_eq!(
        sample(&m, r#"recover_gate_limit_applied_info{version="rv-42"}"#),
        Some(1.0)
    );
    assert_eq!(c.get(&format!("http://{proxy}/")).await.status, 429);
    assert_eq!(up.count(), 1);

    stop.cancel();
    let stopped = tokio::time::timeout(Duration::from_secs(10), task).await;
    assert!(
        matches!(stopped, Ok(Ok(Ok(())))),
        "gate did not stop cleanly"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_stops_on_cancel() {
    let up = upstream(Duration::ZERO).await;
    let stop = CancellationToken::new();
    let task = tokio::spawn(serve(
        config(&[&up], limit(None, 1, None)),
        Vec::new(),
        stop.clone(),
    ));
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.cancel();
    let r = tokio::time::timeout(Duration::from_secs(10), task).await;
    assert!(matches!(r, Ok(Ok(Ok(())))));
}
