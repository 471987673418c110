//! A connection moved between proxy workers between requests (its client thread went to
//! another CPU) loses nothing: pipelined requests written at the move, a request body split
//! across the move point, a limit lowered while connections move, and 429s under
//! keep-alive are each answered exactly once, in order, and the upstream sees exactly what
//! was admitted. Moves need one worker bound per usable CPU; with fewer CPUs the tests say
//! so and stop.

use crate::support::gate::{limit, put_limit, start, TOKEN};
use crate::support::gate::{open_on, two_cpus};
use crate::support::wire::{echo, Upstream};
use recover::gate::connection::PLACE_EVERY;
use recover::gate::limit::Limit;
use recover::gate::placement::bind_current_thread;
use recover::gate::GateConfig;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::num::NonZeroUsize;
use std::time::Duration;

pub fn gate_config(up: &Upstream, limit: Limit, workers: usize) -> GateConfig {
    gate_config_for(up.addr, limit, workers)
}

pub fn gate_config_for(upstream: SocketAddr, limit: Limit, workers: usize) -> GateConfig {
    let mut cfg = GateConfig::loopback(vec![format!("http://{upstream}")]);
    cfg.admin_token = Some(TOKEN.into());
    cfg.limit = limit;
    cfg.workers = NonZeroUsize::new(workers);
    cfg
}

/// A blocking client on one connection, for a thread bound to a CPU.
pub struct Client(BufReader<TcpStream>);

/// One response: status, whether it says the connection closes, body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub close: bool,
    pub body: String,
}

impl Client {
    pub fn connect(proxy: SocketAddr) -> Client {
        let c = TcpStream::connect(proxy).expect("connect");
        // A hang fails the test instead of stalling it; no assertion rides on it.
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Client(BufReader::new(c))
    }

    pub fn write(&mut self, bytes: &[u8]) {
        self.0.get_mut().write_all(bytes).expect("send");
    }

    pub fn answer(&mut self) -> Answer {
        let mut line = String::new();
        self.0.read_line(&mut line).expect("status line");
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status in {line:?}"));
        let (mut len, mut close) = (0, false);
        loop {
            let mut h = String::new();
            self.0.read_line(&mut h).expect("header");
            if h == "\r\n" {
                break;
            }
            let h = h.to_ascii_lowercase();
            if let Some(v) = h.strip_prefix("content-length:") {
                len = v.trim().parse().expect("length");
            }
            if h.starts_with("connection:") && h.contains("close") {
                close = true;
            }
        }
        let mut body = vec![0u8; len];
        self.0.read_exact(&mut body).expect("body");
        Answer {
            status,
            close,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    }

    /// Whether nothing has arrived to read yet (without waiting).
    pub fn nothing_yet(&mut self) -> bool {
        if !self.0.buffer().is_empty() {
            return false;
        }
        let s = self.0.get_ref();
        s.set_nonblocking(true).unwrap();
        let mut b = [0u8; 1];
        let quiet = matches!(s.peek(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
        s.set_nonblocking(false).unwrap();
        quiet
    }

    /// Whether the gate closed the connection (EOF or reset) with nothing more to read.
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        !matches!(self.0.read(&mut b), Ok(n) if n > 0)
    }
}

pub fn get(target: &str) -> String {
    format!("GET {target} HTTP/1.1\r\nhost: gate\r\n\r\n")
}

/// Run `f` on a thread bound to `cpu` with the client, and give the client back.
pub async fn on_cpu<T: Send + 'static, R: Send + 'static>(
    cpu: usize,
    mut client: T,
    f: impl FnOnce(&mut T) -> R + Send + 'static,
) -> (T, R) {
    tokio::task::spawn_blocking(move || {
        bind_current_thread(cpu).expect("bind the client thread");
        let r = f(&mut client);
        (client, r)
    })
    .await
    .expect("client thread")
}

/// Rounds a test plays at most, waiting to see its connection move: a move follows the
/// CPU the connection's last segment came from, and a client's acknowledgements are sent
/// from wherever the kernel processed the gate's answer, so not every round moves.
const MAX_ROUNDS: usize = 60;

/// How many times the connection changed workers between rounds.
fn moves(holders: &[usize]) -> usize {
    holders.windows(2).filter(|w| w[0] != w[1]).count()
}

/// The worker each round ended on, from the workers' connection gauges, for one open
/// connection.
fn holder(open: &[f64]) -> usize {
    assert_eq!(open.iter().sum::<f64>(), 1.0, "{open:?}");
    open.iter().position(|&n| n == 1.0).expect("one holder")
}

/// Pipelined requests written while the connection is between workers: the
/// [`PLACE_EVERY`]th answer leaves the gate's buffer empty and the move is decided while
/// the next batch, written right behind, waits in the socket. Every request is answered
/// once, in order, and reaches the upstream once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_written_at_a_move_are_each_answered_once_in_order() {
    let Some(cpus) = two_cpus() else { return };
    let up = Upstream::start(echo).await;
    let gate = start(gate_config(&up, limit(None, 1, None), cpus.len())).await;
    let mut client = Client::connect(gate.proxy);
    let mut sent = Vec::new();
    let mut answered = Vec::new();
    let mut holders = Vec::new();
    for round in 0..MAX_ROUNDS {
        if round >= 6 && moves(&holders) >= 2 {
            break;
        }
        let cpu = cpus[(round + 1) % 2];
        let first: Vec<String> = (0..PLACE_EVERY as usize)
            .map(|i| format!("/r{round}/a{i}"))
            .collect();
        let behind: Vec<String> = (0..5).map(|i| format!("/r{round}/b{i}")).collect();
        sent.extend(first.iter().chain(&behind).cloned());
        let (c, got) = on_cpu(cpu, client, move |c| {
            c.write(first.iter().map(|t| get(t)).collect::<String>().as_bytes());
            c.write(behind.iter().map(|t| get(t)).collect::<String>().as_bytes());
            (0..first.len() + behind.len())
                .map(|_| c.answer())
                .collect::<Vec<_>>()
        })
        .await;
        client = c;
        for a in got {
            assert_eq!((a.status, a.close), (200, false), "{a:?}");
            answered.push(a.body);
        }
        holders.push(holder(&open_on(&gate, cpus.len()).await));
    }
    let want: Vec<String> = sent.iter().map(|t| format!("GET {t}")).collect();
    assert_eq!(answered, want, "each answer once, in order");
    assert_eq!(
        up.targets(),
        sent,
        "the upstream saw each request once, in order"
    );
    assert!(
        moves(&holders) >= 1,
        "the connection never moved: {holders:?}"
    );
}

/// A request whose body is split across the point where the client changed CPUs, and a
/// head left partly read when the move would be decided: the move waits for an empty
/// buffer, and every body reaches the upstream whole, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_or_a_head_split_across_the_move_point_arrives_whole_once() {
    let Some(cpus) = two_cpus() else { return };
    let up = Upstream::start(|g| {
        crate::support::wire::ok(format!(
            "{} {}",
            g.head.target(),
            String::from_utf8_lossy(&g.body)
        ))
    })
    .await;
    let gate = start(gate_config(&up, limit(None, 1, None), cpus.len())).await;
    let mut client = Client::connect(gate.proxy);
    let mut want = Vec::new();
    for round in 0..4usize {
        let (before, after) = (cpus[round % 2], cpus[(round + 1) % 2]);
        let lead: String = (1..PLACE_EVERY)
            .map(|i| get(&format!("/r{round}/g{i}")))
            .collect();
        let body = format!("body-of-round-{round}-").repeat(40);
        let (half, rest) = body.split_at(body.len() / 2);
        let post = format!(
            "POST /r{round}/post HTTP/1.1\r\nhost: gate\r\ncontent-length: {}\r\n\r\n{half}",
            body.len()
        );
        // The next head, cut in two: its first part lands in the gate's buffer with
        // the end of the body.
        let next = get(&format!("/r{round}/next"));
        let (head_a, head_b) = next.split_at(9);
        let (rest, head_a, head_b) = (rest.to_string(), head_a.to_string(), head_b.to_string());
        for i in 1..PLACE_EVERY {
            want.push(format!("/r{round}/g{i} "));
        }
        want.push(format!("/r{round}/post {body}"));
        want.push(format!("/r{round}/next "));
        let (c, ()) = on_cpu(before, client, move |c| {
            c.write(format!("{lead}{post}").as_bytes())
        })
        .await;
        let (c, got) = on_cpu(after, c, move |c| {
            c.write(format!("{rest}{head_a}").as_bytes());
            let mut got: Vec<Answer> = (0..PLACE_EVERY).map(|_| c.answer()).collect();
            c.write(head_b.as_bytes());
            got.push(c.answer());
            got
        })
        .await;
        client = c;
        for a in got {
            assert_eq!((a.status, a.close), (200, false), "{a:?}");
        }
    }
    let seen: Vec<String> = up
        .got()
        .iter()
        .map(|g| format!("{} {}", g.head.target(), String::from_utf8_lossy(&g.body)))
        .collect();
    assert_eq!(seen, want, "each request and body once, whole, in order");
    drop(client);
}

/// 429s under keep-alive, some with bodies the gate steps over, while the connection
/// moves: every request answered once, the connection kept, the upstream sees only the
/// one admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_under_keep_alive_survive_moves() {
    let Some(cpus) = two_cpus() else { return };
    let up = Upstream::start(echo).await;
    let gate = start(gate_config(&up, limit(Some(0.001), 1, None), cpus.len())).await;
    let mut client = Client::connect(gate.proxy);
    let mut statuses = Vec::new();
    let mut holders = Vec::new();
    for round in 0..MAX_ROUNDS {
        if round >= 6 && moves(&holders) >= 2 {
            break;
        }
        let cpu = cpus[(round + 1) % 2];
        let batch: String = (0..PLACE_EVERY + 3)
            .map(|i| match i % 3 {
                0 => format!(
                    "POST /r{round}/{i} HTTP/1.1\r\nhost: gate\r\ncontent-length: 5\r\n\r\nhello"
                ),
                _ => get(&format!("/r{round}/{i}")),
            })
            .collect();
        let (c, got) = on_cpu(cpu, client, move |c| {
            let (a, b) = batch.split_at(batch.len() / 2);
            c.write(a.as_bytes());
            c.write(b.as_bytes());
            (0..PLACE_EVERY + 3).map(|_| c.answer()).collect::<Vec<_>>()
        })
        .await;
        client = c;
        for a in got {
            assert!(!a.close, "{a:?}");
            statuses.push(a.status);
        }
        holders.push(holder(&open_on(&gate, cpus.len()).await));
    }
    assert_eq!(statuses.iter().filter(|&&s| s == 200).count(), 1);
    assert_eq!(
        statuses.iter().filter(|&&s| s == 429).count(),
        statuses.len() - 1
    );
    assert_eq!(up.got().len(), 1, "the upstream saw only the admitted one");
    assert!(
        moves(&holders) >= 1,
        "the connection never moved: {holders:?}"
    );
}

/// Connections moving while the limit is lowered: once the admin API has answered, no
/// request sent after that is admitted beyond the new limit's burst (none carried from an
/// unlimited gate) plus at most one per worker thread deciding at the change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lowered_limit_holds_for_moving_connections_once_acknowledged() {
    let Some(cpus) = two_cpus() else { return };
    let up = Upstream::start(echo).await;
    let gate = start(gate_config(&up, limit(None, 1, None), cpus.len())).await;
    let mut clients: Vec<Client> = (0..2).map(|_| Client::connect(gate.proxy)).collect();
    let burst = 2u32;
    let mut before = 0;
    let mut after = Vec::new();
    for round in 0..6usize {
        if round == 2 {
            let body = format!(r#"{{"rate_per_s": 0.001, "burst": {burst}}}"#);
            let r = put_limit(&gate, &body).await;
            assert_eq!(r.status, 200, "{}", r.body);
        }
        let mut next = Vec::new();
        for (k, client) in clients.into_iter().enumerate() {
            let cpu = cpus[(round + k + 1) % 2];
            let batch: String = (0..PLACE_EVERY + 2)
                .map(|i| get(&format!("/c{k}/r{round}/{i}")))
                .collect();
            let (c, got) = on_cpu(cpu, client, move |c| {
                c.write(batch.as_bytes());
                (0..PLACE_EVERY + 2).map(|_| c.answer()).collect::<Vec<_>>()
            })
            .await;
            next.push(c);
            for a in got {
                assert!(!a.close, "{a:?}");
                if round < 2 {
                    assert_eq!(a.status, 200, "{a:?}");
                    before += 1;
                } else {
                    after.push(a.status);
                }
            }
        }
        clients = next;
    }
    let admitted_after = after.iter().filter(|&&s| s == 200).count();
    assert!(
        admitted_after <= cpus.len(),
        "{admitted_after} admitted after the change (burst starts empty from unlimited; \
         at most one per worker thread): {after:?}"
    );
    assert!(after.iter().all(|&s| s == 200 || s == 429), "{after:?}");
    assert_eq!(
        up.got().len(),
        before + admitted_after,
        "the upstream saw exactly the admitted"
    );
}
