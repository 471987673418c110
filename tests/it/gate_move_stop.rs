//! A stop that meets a connection on its way between workers: the connection, between
//! requests, is closed at once like any waiting one, and requests in flight on the worker
//! it was headed for are still answered, each answer saying `Connection: close`.

use crate::gate_moves::{gate_config_for, on_cpu, Client};
use crate::support::gate::{limit, start};
use crate::support::gate::{open_on, two_cpus};
use recover::gate::connection::PLACE_EVERY;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Semaphore};

/// An upstream that answers `GET /hold-X` only once the test releases `X`, and says
/// which held requests arrived.
struct Held {
    addr: SocketAddr,
    gates: HashMap<&'static str, Arc<Semaphore>>,
    arrived: mpsc::UnboundedReceiver<String>,
}

impl Held {
    async fn start(names: &[&'static str]) -> Held {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let gates: HashMap<&'static str, Arc<Semaphore>> = names
            .iter()
            .map(|&n| (n, Arc::new(Semaphore::new(0))))
            .collect();
        let (tx, arrived) = mpsc::unbounded_channel();
        let shared = gates.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let (gates, tx) = (shared.clone(), tx.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    loop {
                        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                            let mut chunk = [0u8; 4096];
                            match s.read(&mut chunk).await {
                                Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                                _ => return,
                            }
                            continue;
                        };
                        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                        buf.drain(..end + 4);
                        let path = head.split(' ').nth(1).unwrap_or("").to_string();
                        if let Some(name) = path.strip_prefix("/hold-") {
                            let _ = tx.send(name.to_string());
                            if let Some(g) = gates.get(name) {
                                let _ = g.acquire().await.map(|p| p.forget());
                            }
                        }
                        let reply = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{path}",
                            path.len()
                        );
                        if s.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Held {
            addr,
            gates,
            arrived,
        }
    }

    async fn wait_arrival(&mut self, name: &str) {
        let got = self.arrived.recv().await.expect("upstream running");
        assert_eq!(got, name);
    }

    fn release(&self, name: &str) {
        self.gates[name].add_permits(1);
    }
}

/// Was: a connection whose [`PLACE_EVERY`]th answer came back after the stop began was
/// still handed to the worker of its client's new CPU, which no longer took connections
/// from its inbox: the connection stayed open, served by nobody, until that worker's own
/// requests finished or the drain's grace ran out and cut them off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_moving_at_stop_closes_at_once_and_the_other_workers_requests_are_answered() {
    let Some(cpus) = two_cpus() else { return };
    let mut up = Held::start(&["c", "d"]).await;
    let gate = start(gate_config_for(up.addr, limit(None, 1, None), cpus.len())).await;
    let proxy = gate.proxy;

    // C: served by worker 0, one request short of a look at where it belongs.
    let lead: String = (1..PLACE_EVERY)
        .map(|i| crate::gate_moves::get(&format!("/c{i}")))
        .collect();
    let ((), c) = on_cpu(cpus[0], (), move |_| {
        let mut c = Client::connect(proxy);
        c.write(lead.as_bytes());
        for _ in 1..PLACE_EVERY {
            assert_eq!(c.answer().status, 200);
        }
        c
    })
    .await;
    // D: served by worker 1, its request held upstream.
    let ((), d) = on_cpu(cpus[1], (), move |_| {
        let mut d = Client::connect(proxy);
        d.write(crate::gate_moves::get("/hold-d").as_bytes());
        d
    })
    .await;
    up.wait_arrival("d").await;
    assert_eq!(open_on(&gate, 2).await, [1.0, 1.0], "C on worker 0, D on 1");
    // C's client now runs on worker 1's CPU; its next request is held upstream.
    let (mut c, ()) = on_cpu(cpus[1], c, |c| {
        c.write(crate::gate_moves::get("/hold-c").as_bytes())
    })
    .await;
    up.wait_arrival("c").await;

    drop(gate);
    // The stop has reached every worker once none accepts any more.
    while tokio::net::TcpStream::connect(proxy).await.is_ok() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    up.release("c");
    let (c_answer, c_closed) = tokio::task::spawn_blocking(move || {
        let a = c.answer();
        (a, c.closed())
    })
    .await
    .unwrap();
    assert_eq!(c_answer.status, 200, "{c_answer:?}");
    assert!(c_closed, "C closes after its answer");
    let mut d = d;
    assert!(
        d.nothing_yet(),
        "C was closed only once worker 1's request in flight had ended"
    );
    // Only now is D's request let go: it was in flight when the stop came.
    up.release("d");
    let d_answer = tokio::task::spawn_blocking(move || d.answer())
        .await
        .unwrap();
    assert_eq!(d_answer.status, 200, "{d_answer:?}");
}

/// Was: a request in flight when the stop came was answered keep-alive (the gate decided
/// when it forwarded the request) and then closed, so a client sending its next request
/// at once raced the close. The answer says `Connection: close`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_flight_at_stop_is_answered_with_connection_close() {
    let mut up = Held::start(&["a"]).await;
    let gate = start(gate_config_for(up.addr, limit(None, 1, None), 1)).await;
    let proxy = gate.proxy;
    let mut a = tokio::task::spawn_blocking(move || {
        let mut a = Client::connect(proxy);
        a.write(crate::gate_moves::get("/hold-a").as_bytes());
        a
    })
    .await
    .unwrap();
    up.wait_arrival("a").await;
    drop(gate);
    while tokio::net::TcpStream::connect(proxy).await.is_ok() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    up.release("a");
    let (answer, closed) = tokio::task::spawn_blocking(move || {
        let got = a.answer();
        (got, a.closed())
    })
    .await
    .unwrap();
    assert_eq!((answer.status, answer.close), (200, true), "{answer:?}");
    assert!(closed, "the gate closes the connection after the answer");
}
