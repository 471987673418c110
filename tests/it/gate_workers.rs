//! Client connections are spread over the gate's proxy worker threads: a burst of
//! connections accepted by one worker ends up served by all of them, and every handed-over
//! connection is served like any other.

use crate::support::gate::{config, limit, open_on, run, two_cpus, upstream};
use crate::support::wire::{get, Peer};
use recover::gate::connection::PLACE_EVERY;
use recover::gate::workers::HOME_SLACK;
use recover::gate::BoundGate;
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

/// Was: the worker that ran first drained the whole backlog, and one thread served every
/// connection while the other sat idle. The burst comes from one client thread, so its
/// connections arrive on one CPU, whose worker may keep [`HOME_SLACK`] more than the other
/// and a quarter: the burst is larger than that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_connections_waiting_at_start_is_spread_over_the_workers() {
    let up = upstream(Duration::ZERO).await;
    let mut cfg = config(&[&up], limit(Some(1.0), 1, None));
    cfg.workers = NonZeroUsize::new(2);
    let bound = BoundGate::bind(cfg).await.expect("gate binds");
    let proxy = bound.proxy_addr();
    // The whole burst waits in the listen backlog before any worker runs.
    let burst = 3 * HOME_SLACK as usize;
    let mut peers = futures::future::join_all((0..burst).map(|_| Peer::connect(proxy))).await;
    let gate = run(bound);

    let mut statuses = Vec::new();
    for p in &mut peers {
        p.send(get("/")).await;
        statuses.push(p.response(false).await.head.status());
    }
    assert_eq!(
        statuses.iter().filter(|&&s| s == 200).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|&&s| s == 429).count(),
        burst - 1,
        "{statuses:?}"
    );
    let open = open_on(&gate, 2).await;
    assert_eq!(open.iter().sum::<f64>(), burst as f64, "{open:?}");
    let (least, most) = (open[0].min(open[1]), open[0].max(open[1]));
    assert!(
        least >= 8.0 && most <= least * 1.25 + HOME_SLACK as f64 + 1.0,
        "connections per worker: {open:?}"
    );

    // Every connection is counted off the worker serving it when it closes.
    drop(peers);
    let by = Instant::now() + Duration::from_secs(5);
    let mut open = open_on(&gate, 2).await;
    while open != [0.0, 0.0] && Instant::now() < by {
        tokio::time::sleep(Duration::from_millis(20)).await;
        open = open_on(&gate, 2).await;
    }
    assert_eq!(open, [0.0, 0.0], "connections per worker after all closed");
}

/// Each `gate-proxy-N` thread of this process and the CPUs it may run on
/// (`Cpus_allowed_list` of `/proc/self/task/TID/status`).
fn worker_cpus() -> Vec<(String, String)> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let dir = task.expect("a task").path();
        let Ok(name) = std::fs::read_to_string(dir.join("comm")) else {
            continue; // the thread ended meanwhile
        };
        let name = name.trim().to_string();
        if !name.starts_with("gate-proxy-") {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).expect("status");
        let cpus = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list")
            .trim()
            .to_string();
        found.push((name, cpus));
    }
    found.sort();
    found
}

/// Was: every worker could run on every CPU, and under load Linux stacked the workers
/// with the threads waking them on one CPU (the refusing p99 of 7-8 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_one_worker_per_usable_cpu_each_worker_is_bound_to_its_own() {
    let Some(allowed) = two_cpus() else { return };
    let up = upstream(Duration::ZERO).await;
    let mut cfg = config(&[&up], limit(None, 1, None));
    cfg.workers = NonZeroUsize::new(allowed.len());
    let gate = run(BoundGate::bind(cfg).await.expect("gate binds"));
    let mut peer = Peer::connect(gate.proxy).await;
    peer.send(get("/")).await;
    assert_eq!(peer.response(false).await.head.status(), 200);

    let mut want: Vec<(String, String)> = allowed
        .iter()
        .enumerate()
        .map(|(i, cpu)| (format!("gate-proxy-{i}"), cpu.to_string()))
        .collect();
    want.sort();
    // Each worker binds itself as its thread starts, which may be after this request.
    let by = Instant::now() + Duration::from_secs(5);
    let mut seen = worker_cpus();
    while seen != want && Instant::now() < by {
        tokio::time::sleep(Duration::from_millis(20)).await;
        seen = worker_cpus();
    }
    assert_eq!(seen, want);
}

/// With fewer workers than usable CPUs the gate cannot tell which CPUs are its own: no
/// worker is bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_fewer_workers_than_usable_cpus_no_worker_is_bound() {
    let Some(allowed) = two_cpus() else { return };
    let up = upstream(Duration::ZERO).await;
    let mut cfg = config(&[&up], limit(None, 1, None));
    cfg.workers = NonZeroUsize::new(1);
    let gate = run(BoundGate::bind(cfg).await.expect("gate binds"));
    let mut peer = Peer::connect(gate.proxy).await;
    peer.send(get("/")).await;
    assert_eq!(peer.response(false).await.head.status(), 200);
    let cpus = worker_cpus();
    assert_eq!(cpus.len(), 1, "{cpus:?}");
    assert_ne!(cpus[0].1, allowed[0].to_string(), "{cpus:?}");
}

/// At stop, a connection waiting for its next request is closed at once (not after the
/// 60 s idle timeout), and one inside a request gets its answer and is then closed: the stop reaches waiting connections through the connection table, with no
/// waiter of its own on each wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_stop_a_waiting_connection_closes_at_once_and_one_in_a_request_is_answered_first() {
    let up = upstream(Duration::from_millis(600)).await;
    let mut cfg = config(&[&up], limit(None, 1, None));
    cfg.workers = NonZeroUsize::new(2);
    let gate = run(BoundGate::bind(cfg).await.expect("gate binds"));
    let mut waiting = Peer::connect(gate.proxy).await;
    waiting.send(get("/first")).await;
    assert_eq!(waiting.response(false).await.head.status(), 200);
    let mut busy = Peer::connect(gate.proxy).await;
    busy.send(get("/slow")).await;
    tokio::time::sleep(Duration::from_millis(200)).await; // the slow request is upstream

    drop(gate);
    let t0 = Instant::now();
    waiting.expect_closed().await;
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    let last = busy.response(false).await;
    assert_eq!(last.head.status(), 200);
    busy.expect_closed().await;
}

/// Was: each connection went to the least loaded worker, so a client thread's
/// connections were spread over every worker, the worker on the client's own CPU was kept
/// busy by clients on the other CPUs, and the client waited for it a whole scheduler slice
/// (the refusing p99 of 6-8 ms). Connections from one CPU, below [`HOME_SLACK`], are all
/// served by the worker bound to that CPU.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_served_by_the_worker_on_the_cpu_their_packets_arrive_on() {
    let Some(allowed) = two_cpus() else { return };
    let up = upstream(Duration::ZERO).await;
    let mut cfg = config(&[&up], limit(Some(1.0), 1, None));
    cfg.workers = NonZeroUsize::new(allowed.len());
    let gate = run(BoundGate::bind(cfg).await.expect("gate binds"));
    let (home, cpu) = (1, allowed[1]);
    let proxy = gate.proxy;
    // A client thread on that CPU opens four connections and gets an answer on each.
    let conns = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        recover::gate::placement::bind_current_thread(cpu).expect("bind the client thread");
        (0..4)
            .map(|_| {
                let mut c = std::net::TcpStream::connect(proxy).expect("connect");
                c.write_all(get("/").as_bytes()).expect("send");
                let mut got = [0u8; 12];
                c.read_exact(&mut got).expect("an answer");
                assert!(got.starts_with(b"HTTP/1.1 "), "{got:?}");
                c
            })
            .collect::<Vec<_>>()
    })
    .await
    .expect("client thread");
    let open = open_on(&gate, allowed.len()).await;
    let mut want = vec![0.0; allowed.len()];
    want[home] = 4.0;
    assert_eq!(open, want, "connections per worker");
    drop(conns);
}

/// A client thread that moves to another CPU between requests is followed: after
/// [`PLACE_EVERY`] requests its connection is served by the worker bound to the new CPU.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_follows_its_client_to_another_cpu_between_requests() {
    let Some(allowed) = two_cpus() else { return };
    let up = upstream(Duration::ZERO).await;
    let mut cfg = config(&[&up], limit(Some(1.0), 1, None));
    cfg.workers = NonZeroUsize::new(allowed.len());
    let gate = run(BoundGate::bind(cfg).await.expect("gate binds"));
    let proxy = gate.proxy;
    let (first, then) = (allowed[0], allowed[1]);
    let statuses = tokio::task::spawn_blocking(move || {
        use std::io::{BufRead, BufReader, Read, Write};
        let place = recover::gate::placement::bind_current_thread;
        place(first).expect("bind the client thread");
        let mut c = BufReader::new(std::net::TcpStream::connect(proxy).expect("connect"));
        let mut statuses = Vec::new();
        for i in 0..3 * PLACE_EVERY {
            if i == 1 {
                place(then).expect("move the client thread");
            }
            c.get_mut().write_all(get("/").as_bytes()).expect("send");
            let mut line = String::new();
            c.read_line(&mut line).expect("status line");
            statuses.push(line.split(' ').nth(1).unwrap_or("").to_string());
            let mut len = 0;
            loop {
                let mut h = String::new();
                c.read_line(&mut h).expect("header");
                if h == "\r\n" {
                    break;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().expect("length");
                }
            }
            let mut body = vec![0u8; len];
            c.read_exact(&mut body).expect("body");
        }
        (c, statuses)
    })
    .await
    .expect("client thread");
    let (conn, statuses) = statuses;
    assert!(
        statuses.iter().all(|s| s == "200" || s == "429"),
        "{statuses:?}"
    );
    let open = open_on(&gate, allowed.len()).await;
    let mut want = vec![0.0; allowed.len()];
    want[1] = 1.0;
    assert_eq!(open, want, "connections per worker");
    drop(conn);
}
