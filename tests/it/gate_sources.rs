//! Extra limit feeds: a [`LimitSource`] handed to `serve` puts its limits in force with
//! its own version (shown in /metrics), and a bad limit from it never replaces a good one.

use crate::support::eventually;
use crate::support::gate::*;
use recover::gate::limit_source::{LimitSource, LimitSourceError, VersionedLimit};
use recover::gate::{serve, BoundGate};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A source fed by the test, standing in for a ConfigMap watch: it forwards what it is
/// given, exactly as a real source forwards what it reads. It also counts the updates the
/// gate has taken: a refused one changes nothing the test could poll for, so this is how
/// the test knows the gate has seen it.
struct Fed {
    feed: mpsc::Receiver<VersionedLimit>,
    taken: Arc<AtomicU64>,
}

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
                next = self.feed.recv() => match next {
                    Some(v) => {
                        let _ = updates.send(v).await;
                        // The gate's one reader applies or refuses each update as it takes
                        // it off the channel: once the channel is empty, it has this one.
                        let _ = updates.reserve_many(updates.max_capacity()).await;
                        self.taken.fetch_add(1, Ordering::SeqCst);
                    }
                    None => return Ok(()),
                },
            }
        }
    }
}

async fn wait_for_metric(admin: std::net::SocketAddr, series: &str) {
    let appeared = eventually(Duration::from_secs(5), || async {
        sample(&metrics(admin).await, series).is_some()
    })
    .await;
    assert!(appeared, "{series} never appeared");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extra_source_sets_the_limit_with_its_version_and_cannot_break_it() {
    let up = upstream(Duration::ZERO).await;
    let bound = BoundGate::bind(config(&[&up], limit(None, 1, None)))
        .await
        .unwrap();
    let (proxy, admin) = (bound.proxy_addr(), bound.admin_addr());
    let (feed, rx) = mpsc::channel(4);
    let taken = Arc::new(AtomicU64::new(0));
    let fed = Fed {
        feed: rx,
        taken: taken.clone(),
    };
    let stop = CancellationToken::new();
    let task = tokio::spawn(bound.run(vec![Box::new(fed)], stop.clone()));
    let c = client();
    // Fail static: until the source gives a limit, none is known and everything is refused.
    assert_eq!(c.get(&format!("http://{proxy}/")).await.status, 429);
    feed.send(VersionedLimit::new(limit(None, 1, None), "rv-41"))
        .await
        .unwrap();
    wait_for_metric(admin, r#"recover_gate_limit_applied_info{version="rv-41"}"#).await;
    assert_eq!(c.get(&format!("http://{proxy}/")).await.status, 200);

    let block = VersionedLimit::new(limit(Some(0.0), 0, None), "rv-42");
    feed.send(block).await.unwrap();
    wait_for_metric(admin, r#"recover_gate_limit_applied_info{version="rv-42"}"#).await;
    assert_eq!(c.get(&format!("http://{proxy}/")).await.status, 429);

    // A typo in the ConfigMap: refused, the gate stays blocked, the version stays.
    let typo = VersionedLimit::new(limit(Some(-3.0), 1, None), "rv-43");
    feed.send(typo).await.unwrap();
    let seen = eventually(Duration::from_secs(5), || async {
        taken.load(Ordering::SeqCst) == 3
    })
    .await;
    assert!(seen, "the gate never took the bad limit");
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
