//! `recover serve` in the cluster keeps its budgets and breakers in a ConfigMap (as its
//! own service account, with its Role): a receiver rescheduled to another node loads the
//! open breaker the previous one saved, instead of starting from nothing on an emptyDir.

use crate::support::eventually;
use crate::support::kube::*;
use recover::serve::state::{ConfigMapStore, StateStore};
use std::time::{Duration, SystemTime};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_breaker_survives_a_rescheduled_receiver() {
    let c = FakeCluster::start(1, Duration::from_millis(100)).await;
    let first = ConfigMapStore::new(c.client_as(SERVE_SA), NS, "recover-serve-state");
    let mut book = first.load().await.unwrap();
    assert!(book.targets.is_empty());
    let t = book
        .targets
        .entry("kube:recover-demo/config-service".into())
        .or_default();
    t.failures = 2;
    t.breaker_opened_at = Some(SystemTime::now());
    // Saved in the background, as the receiver does while it holds its lock.
    first.save_soon(book.clone());
    drop(first);
    let second = ConfigMapStore::new(c.client_as(SERVE_SA), NS, "recover-serve-state");
    let saved = eventually(Duration::from_secs(5), || async {
        second.load().await.map(|b| b == book).unwrap_or(false)
    })
    .await;
    assert!(saved, "the breaker never reached the ConfigMap");
    let loaded = second.load().await.unwrap();
    assert!(loaded.targets["kube:recover-demo/config-service"]
        .breaker_opened_at
        .is_some());
    // Another ConfigMap is out of its Role's reach.
    let other = ConfigMapStore::new(c.client_as(SERVE_SA), NS, "recover-serve");
    let e = other.load().await.unwrap_err().to_string();
    assert!(
        e.contains("forbidden") && e.contains("get configmaps"),
        "{e}"
    );
}
