//! A limit lowered while clients keep sending on connections that move between workers:
//! of the requests written after the admin API acknowledged the change, no more are
//! admitted than the new limit allows (its burst starts empty after an unlimited gate)
//! plus at most one per worker thread deciding at the moment of the change.

use crate::gate_moves::{gate_config, get, Client};
use crate::support::gate::two_cpus;
use crate::support::gate::{limit, put_limit, start};
use crate::support::wire::{echo, Upstream};
use recover::gate::connection::PLACE_EVERY;
use recover::gate::placement::bind_current_thread;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const BATCH: usize = PLACE_EVERY as usize + 2;
/// Batches each client writes once it has seen the change acknowledged.
const AFTER: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_lowered_mid_stream_holds_for_moving_connections_once_acknowledged() {
    let Some(cpus) = two_cpus() else { return };
    let up = Upstream::start(echo).await;
    let gate = start(gate_config(&up, limit(None, 1, None), cpus.len())).await;
    let acked = Arc::new(AtomicBool::new(false));
    let proxy = gate.proxy;
    let clients: Vec<_> = (0..2)
        .map(|k| {
            let (cpus, acked) = (cpus.clone(), acked.clone());
            tokio::task::spawn_blocking(move || {
                let mut c = Client::connect(proxy);
                // (written after the acknowledgement, status) per request.
                let mut seen = Vec::new();
                let mut after = 0;
                let mut round = 0;
                while after < AFTER {
                    bind_current_thread(cpus[(k + round) % cpus.len()]).expect("bind");
                    let late = acked.load(Ordering::SeqCst);
                    let batch: String = (0..BATCH)
                        .map(|i| get(&format!("/c{k}/r{round}/{i}")))
                        .collect();
                    c.write(batch.as_bytes());
                    for _ in 0..BATCH {
                        let a = c.answer();
                        assert!(!a.close, "{a:?}");
                        seen.push((late, a.status));
                    }
                    after += usize::from(late);
                    round += 1;
                }
                seen
            })
        })
        .collect();
    // Let some traffic through unlimited, then lower the limit while it flows.
    while up.got().len() < 2 * BATCH && !clients.iter().any(|c| c.is_finished()) {
        tokio::task::yield_now().await;
    }
    let r = put_limit(&gate, r#"{"rate_per_s": 0.001, "burst": 2}"#).await;
    assert_eq!(r.status, 200, "{}", r.body);
    acked.store(true, Ordering::SeqCst);
    let mut seen = Vec::new();
    for c in clients {
        seen.extend(c.await.expect("client thread"));
    }
    assert!(seen.iter().all(|&(_, s)| s == 200 || s == 429), "{seen:?}");
    let admitted_late = seen.iter().filter(|&&(late, s)| late && s == 200).count();
    assert!(
        admitted_late <= cpus.len(),
        "{admitted_late} of the requests written after the change were admitted"
    );
    let admitted = seen.iter().filter(|&&(_, s)| s == 200).count();
    assert_eq!(
        up.got().len(),
        admitted,
        "the upstream saw exactly the admitted"
    );
}
