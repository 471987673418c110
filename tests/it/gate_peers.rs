//! A gate sharing its limit with other replicas: ready only once it knows how many share
//! it, then enforcing its share and showing it (gauges, peer count, `GET /admin/limit`),
//! following every change of the count; with `--admin-read-only` the admin API cannot
//! change the limit.

use crate::support::eventually;
use crate::support::gate::*;
use recover::gate::limit_source::{LimitSourceError, PeerSource};
use recover::gate::share::Peers;
use recover::gate::BoundGate;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A peer source fed by the test, as the EndpointSlice watch feeds a gate.
struct Fed(mpsc::Receiver<Peers>);

#[async_trait::async_trait]
impl PeerSource for Fed {
    fn name(&self) -> &'static str {
        "fed-by-test"
    }
    async fn run(
        mut self: Box<Self>,
        updates: mpsc::Sender<Peers>,
        shutdown: CancellationToken,
    ) -> Result<(), LimitSourceError> {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                next = self.0.recv() => match next {
                    Some(p) => { let _ = updates.send(p).await; }
                    None => return Ok(()),
                },
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_gate_is_ready_once_it_knows_its_share_and_follows_the_count() {
    let up = upstream(Duration::ZERO).await;
    let mut cfg = config(&[&up], limit(Some(90.0), 9, Some(30)));
    cfg.admin_writes = false;
    let (feed, rx) = mpsc::channel(4);
    let bound = BoundGate::bind(cfg)
        .await
        .unwrap()
        .with_peer_source(Box::new(Fed(rx)));
    let admin = bound.admin_addr();
    let stop = CancellationToken::new();
    tokio::spawn(bound.run(Vec::new(), stop.clone()));
    let c = client();
    let readyz = || async { c.status(&format!("http://{admin}/readyz")).await };
    assert!(
        eventually(Duration::from_secs(5), || async {
            readyz().await == Some(503)
        })
        .await
    );
    assert_eq!(
        c.status(&format!("http://{admin}/healthz")).await,
        Some(200),
        "alive all the same"
    );

    feed.send(Peers::new(3, 0)).await.unwrap();
    assert!(
        eventually(Duration::from_secs(5), || async {
            readyz().await == Some(200)
        })
        .await
    );
    let m = metrics(admin).await;
    assert_eq!(sample(&m, "recover_gate_limit_peers"), Some(3.0));
    assert_eq!(sample(&m, "recover_gate_limit_rate_per_second"), Some(30.0));
    assert_eq!(sample(&m, "recover_gate_limit_max_in_flight"), Some(10.0));
    assert_eq!(sample(&m, "recover_gate_limit_burst"), Some(3.0));

    // A replica goes away: the share grows at once, same version.
    feed.send(Peers::new(2, 1)).await.unwrap();
    let followed = eventually(Duration::from_secs(5), || async {
        sample(&metrics(admin).await, "recover_gate_limit_rate_per_second") == Some(45.0)
    })
    .await;
    assert!(followed);
    let j = admin_limit(admin).await;
    assert_eq!(
        (j["peers"].clone(), j["version"].clone()),
        (2.into(), "0".into())
    );
    assert_eq!(j["limit"]["rate_per_s"], 90.0);
    assert_eq!(
        (
            j["share"]["rate_per_s"].clone(),
            j["share"]["max_in_flight"].clone()
        ),
        (45.0.into(), 15.into())
    );

    // The limit comes from the ConfigMap only: the admin API cannot change it.
    let auth = format!("Bearer {TOKEN}");
    let r = c
        .send(
            "PUT",
            &format!("http://{admin}/admin/limit"),
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
            ],
            r#"{"rate_per_s": null, "burst": 1, "max_in_flight": null}"#,
        )
        .await
        .unwrap();
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(r.body.contains("ConfigMap"), "{}", r.body);
    stop.cancel();
}
