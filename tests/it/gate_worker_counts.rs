//! However many proxy workers run (one, more than the CPUs, or more than a process
//! restricted with `taskset` may use), every request is answered once, in order, and the
//! upstream sees exactly what was admitted: no worker is bound then, and no connection
//! moves, but clients changing CPUs between requests must not notice.

use crate::gate_moves::{gate_config, get, Answer, Client};
use crate::support::gate::{client, limit, start, TOKEN};
use crate::support::wire::{echo, Upstream};
use crate::support::BIN;
use recover::gate::connection::PLACE_EVERY;
use recover::gate::placement::{allowed_cpus, bind_current_thread};
use recover::util::child::{spawn_guarded, GuardOptions};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Per batch: requests pipelined in one write.
const BATCH: usize = PLACE_EVERY as usize + 3;
const ROUNDS: usize = 4;

/// Two clients at once, each on its own connection, each writing [`ROUNDS`] pipelined
/// batches and changing CPUs between them. Each client's targets and answers, in order.
async fn two_clients(proxy: SocketAddr) -> Vec<(Vec<String>, Vec<Answer>)> {
    let cpus = allowed_cpus().expect("the CPUs this test may use");
    let clients = (0..2).map(|k| {
        let cpus = cpus.clone();
        tokio::task::spawn_blocking(move || {
            let mut c = Client::connect(proxy);
            let (mut sent, mut got) = (Vec::new(), Vec::new());
            for round in 0..ROUNDS {
                bind_current_thread(cpus[(k + round) % cpus.len()]).expect("bind");
                let targets: Vec<String> =
                    (0..BATCH).map(|i| format!("/c{k}/r{round}/{i}")).collect();
                c.write(
                    targets
                        .iter()
                        .map(|t| get(t))
                        .collect::<String>()
                        .as_bytes(),
                );
                got.extend((0..BATCH).map(|_| c.answer()));
                sent.extend(targets);
            }
            (sent, got)
        })
    });
    futures::future::join_all(clients)
        .await
        .into_iter()
        .map(|r| r.expect("client thread"))
        .collect()
}

/// Every answer a 200 carrying its own request, or a 429, on a kept connection; the
/// number admitted, which must be what the upstream saw.
fn check(results: &[(Vec<String>, Vec<Answer>)], upstream_saw: &[String]) -> usize {
    let mut admitted = Vec::new();
    for (sent, got) in results {
        assert_eq!(sent.len(), got.len());
        for (t, a) in sent.iter().zip(got) {
            assert!(!a.close, "{t}: {a:?}");
            match a.status {
                200 => {
                    assert_eq!(a.body, format!("GET {t}"), "answered in order");
                    admitted.push(t.clone());
                }
                429 => {}
                _ => panic!("{t}: {a:?}"),
            }
        }
    }
    let mut saw = upstream_saw.to_vec();
    saw.sort();
    admitted.sort();
    assert_eq!(
        saw, admitted,
        "the upstream saw exactly the admitted, once each"
    );
    admitted.len()
}

async fn serves_correctly_in_process(workers: usize) {
    let up = Upstream::start(echo).await;
    let gate = start(gate_config(&up, limit(None, 1, None), workers)).await;
    let all = two_clients(gate.proxy).await;
    assert_eq!(check(&all, &up.targets()), 2 * ROUNDS * BATCH);

    let up = Upstream::start(echo).await;
    let gate = start(gate_config(&up, limit(Some(0.001), 3, None), workers)).await;
    let all = two_clients(gate.proxy).await;
    assert_eq!(check(&all, &up.targets()), 3, "the burst, no more");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_worker_serves_every_request_once_in_order() {
    serves_correctly_in_process(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_workers_than_cpus_serve_every_request_once_in_order() {
    let cpus = allowed_cpus().expect("the CPUs this test may use").len();
    serves_correctly_in_process(cpus + 1).await;
}

/// `recover gate` under `taskset -c 0`: one usable CPU, with the workers asked for (more
/// than it) and with the default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_restricted_to_one_cpu_serves_every_request_once_in_order() {
    for workers in [Some("2"), None] {
        for (rate, burst, want) in [
            (None, None, 2 * ROUNDS * BATCH),
            (Some("0.001"), Some("3"), 3),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let up = Upstream::start(echo).await;
            let (proxy, admin) = (
                crate::support::ports::loopback_addr(),
                crate::support::ports::loopback_addr(),
            );
            let token = dir.path().join("token");
            std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
            let mut cmd = Command::new("taskset");
            cmd.args(["-c", "0", BIN, "gate"])
                .args(["--upstream", &format!("http://{}", up.addr)])
                .args(["--listen", &proxy.to_string()])
                .args(["--admin-listen", &admin.to_string()])
                .arg("--admin-token-file")
                .arg(&token)
                .arg("--state-file")
                .arg(dir.path().join("state.json"))
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if let Some(w) = workers {
                cmd.args(["--workers", w]);
            }
            if let (Some(r), Some(b)) = (rate, burst) {
                cmd.args(["--rate", r, "--burst", b]);
            }
            let _gate = spawn_guarded("gate", cmd, GuardOptions::default()).unwrap();
            let c = client();
            let mut ready = false;
            for _ in 0..200 {
                if c.status(&format!("http://{admin}/healthz")).await == Some(200) {
                    ready = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert!(ready, "the gate never became ready");
            let all = two_clients(proxy).await;
            assert_eq!(
                check(&all, &up.targets()),
                want,
                "workers {workers:?}, rate {rate:?}"
            );
        }
    }
}
