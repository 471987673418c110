//! `recover demo workers` as a real process against a server this test controls: where each
//! client of the retry loop stands, read from the workers' own `/metrics`
//! (`_next_attempt_within{le_s}`, `_attempt_left_within{le_s}`), checked against what the
//! server saw of each client's attempts. Each worker sends an `Idempotency-Key` its retries
//! repeat, and its polls never succeed here, so a key is one worker for the whole test.
//!
//! No tolerance on timing: each client's time left at the scrape is bounded by instants on
//! the wire. A waiting client's next attempt is due no sooner than a retry delay after the
//! server saw its last one (it hears the answer later) and no later than the server sees
//! the next (it sends when due); an attempt out is given up on at the deadline it carries
//! (`x-deadline-ms`, the instant the worker gives up at, to the millisecond below).

use crate::support::demo::{free_addr, http, scrape, spawn, wait_http_ok, Scrape};
use recover::util::child::ChildGuard;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const NEXT: &str = "recover_demo_workers_next_attempt_within";
const LEFT: &str = "recover_demo_workers_attempt_left_within";
const IN_LOOP: &str = "recover_demo_workers_in_retry_loop";
const OUT: &str = "recover_demo_workers_retrying_in_flight";

/// `x-deadline-ms` is whole milliseconds below the worker's deadline, and the server reads
/// the wall clock and the monotonic one apart: the deadline is within this above it.
const DEADLINE_MS_S: f64 = 0.002;

/// What the test server does with each request.
#[derive(Clone, Copy)]
enum Answer {
    /// 503 at once: every client waits out its retry delay, then tries again.
    Refuse,
    /// Never answer: every attempt is out until its client gives up.
    Hang,
}

/// One request the server saw.
#[derive(Debug, Clone, Copy)]
struct Seen {
    /// Its `x-attempt` (1: a poll's first attempt).
    n: u32,
    at: Instant,
    /// Its `x-deadline-ms`, on the monotonic clock.
    deadline: Instant,
}

/// Each request the server saw, with the worker's key.
type Log = Arc<Mutex<Vec<(String, Seen)>>>;

/// The instant `ms` (milliseconds since the epoch) names, read against `(at, wall)`, the
/// same instant on both clocks.
fn on_monotonic(ms: u64, at: Instant, wall: SystemTime) -> Instant {
    let then = UNIX_EPOCH + Duration::from_millis(ms);
    match then.duration_since(wall) {
        Ok(ahead) => at + ahead,
        Err(e) => at - e.duration(),
    }
}

async fn server(answer: Answer) -> (SocketAddr, Log) {
    let addr = free_addr();
    let listener = TcpListener::bind(addr).await.expect("bind the test server");
    let log: Log = Arc::default();
    let l = log.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let log = l.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Ok(n) = conn.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let (at, wall) = (Instant::now(), SystemTime::now());
                        let head = String::from_utf8_lossy(&buf[..end]).to_string();
                        buf.drain(..end + 4);
                        let header = |name: &str| {
                            head.lines()
                                .filter_map(|l| l.split_once(':'))
                                .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
                                .map(|(_, v)| v.trim().to_string())
                        };
                        let key = header("idempotency-key").unwrap_or_default();
                        let n = header("x-attempt")
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(0);
                        let ms = header("x-deadline-ms")
                            .and_then(|v| v.parse().ok())
                            .expect("every attempt carries x-deadline-ms");
                        let deadline = on_monotonic(ms, at, wall);
                        log.lock().unwrap().push((key, Seen { n, at, deadline }));
                        if let Answer::Refuse = answer {
                            let reply =
                                b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n";
                            if conn.write_all(reply).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    (addr, log)
}

/// `recover demo workers` polling `target` forever with a fixed retry delay, every worker
/// sending an idempotency key.
async fn workers(
    target: SocketAddr,
    count: usize,
    timeout: &str,
    delay: &str,
) -> (SocketAddr, ChildGuard) {
    let metrics = free_addr();
    let args: Vec<String> = [
        "demo",
        "workers",
        "--target",
        &format!("http://{target}"),
        "--count",
        &count.to_string(),
        "--interval",
        "1s",
        "--timeout",
        timeout,
        "--retry",
        &format!("fixed:{delay}"),
        "--idempotency-key",
        "--metrics-listen",
        &metrics.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let guard = spawn("workers", &args);
    wait_http_ok(
        &format!("http://{metrics}/healthz"),
        Duration::from_secs(20),
    )
    .await;
    (metrics, guard)
}

/// One scrape of the workers with the instants just before and just after it.
async fn scrape_between(metrics: SocketAddr) -> (Instant, Scrape, Instant) {
    let before = Instant::now();
    let page = scrape(metrics).await;
    (before, page, Instant::now())
}

/// A ladder's finite rungs `(le_s, count)`, increasing, and its `+Inf` total.
fn ladder(page: &Scrape, name: &str) -> (Vec<(f64, f64)>, f64) {
    let prefix = format!("{name}{{le_s=\"");
    let mut rungs: Vec<(f64, f64)> = page
        .0
        .iter()
        .filter_map(|(k, v)| {
            let le = k.strip_prefix(&prefix)?.strip_suffix("\"}")?;
            (le != "+Inf").then(|| (le.parse().expect("a number le"), *v))
        })
        .collect();
    rungs.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert_eq!(rungs.len(), 130, "{name}: the ladder's edges");
    (rungs, page.get(&format!("{name}{{le_s=\"+Inf\"}}")))
}

/// Every rung counts at least the clients surely within it and at most those possibly
/// within it: `known` are each client's least and most time left at the scrape,
/// `unknown` the clients whose phase the server's log cannot tell.
fn check_rungs(name: &str, rungs: &[(f64, f64)], known: &[(f64, f64)], unknown: usize) {
    for &(le, count) in rungs {
        let surely = known.iter().filter(|(_, hi)| *hi <= le).count();
        let maybe = known.iter().filter(|(lo, _)| *lo <= le).count() + unknown;
        assert!(
            surely as f64 <= count && count <= maybe as f64,
            "{name}{{le_s=\"{le}\"}} = {count}, expected {surely}..={maybe}; known {known:?}, unknown {unknown}"
        );
    }
}

/// Wait until every one of `count` workers is in the retry loop.
async fn all_in_loop(metrics: SocketAddr, count: usize) {
    let until = Instant::now() + Duration::from_secs(30);
    while scrape(metrics).await.get(IN_LOOP) < count as f64 {
        assert!(
            Instant::now() < until,
            "the workers never all entered the loop"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Each worker's attempts as the server saw them, oldest first.
fn by_worker(log: &Log) -> HashMap<String, Vec<Seen>> {
    let mut map: HashMap<String, Vec<Seen>> = HashMap::new();
    for (key, seen) in log.lock().unwrap().iter() {
        map.entry(key.clone()).or_default().push(*seen);
    }
    map
}

/// `a - b`, seconds, negative when `a` is earlier.
fn secs(a: Instant, b: Instant) -> f64 {
    a.saturating_duration_since(b).as_secs_f64() - b.saturating_duration_since(a).as_secs_f64()
}

/// Of one worker's attempts, the last the server saw by `t1` and the first after it.
fn around(attempts: &[Seen], t1: Instant) -> (Seen, Option<Seen>) {
    let last = *attempts
        .iter()
        .rfind(|a| a.at <= t1)
        .expect("every worker has tried");
    (last, attempts.iter().find(|a| a.at > t1).copied())
}

/// A waiting client's least and most time left at a scrape taken between `t0` and `t1`,
/// if the wire shows it was waiting then. It was free to wait no sooner than `free` (the
/// server saw its last attempt, or the deadline it gave up at) and due a `delay` later,
/// so it had not sent again by `t1` if that is later; it sends `next` once due, so it was
/// waiting by `t0` if `next` came at most a delay after `t0`.
fn waiting_left(
    free: Instant,
    next: Option<Seen>,
    delay: f64,
    t0: Instant,
    t1: Instant,
) -> Option<(f64, f64)> {
    let next = next?;
    let soonest = secs(free, t1) + delay;
    (soonest > 0.0 && secs(next.at, t0) <= delay).then(|| (soonest, secs(next.at, t0)))
}

/// The rehearsal's reading of the workers' real page: both ladders, every edge, and the
/// clients in the loop all placed (a client between phases is in one of them).
async fn rehearsal_reads_the_page(metrics: SocketAddr, count: usize) {
    use recover::rehearse::series::{RawScrape, Role, TargetScrape};
    let (status, text) = http("GET", &format!("http://{metrics}/metrics"), None, "")
        .await
        .expect("scrape");
    assert_eq!(status, 200);
    let r = RawScrape {
        t_s: 0.0,
        read_s: 0.0,
        service_pages_first: false,
        targets: vec![TargetScrape {
            role: Role::Clients,
            instance: metrics.to_string(),
            points: Some(recover::rehearse::expo::parse(&text)),
        }],
    };
    let p = recover::rehearse::client_phases::client_phases(&r).expect("phases read");
    assert_eq!(p.waiting_next.edges.len(), 130);
    assert_eq!(p.in_flight_left.edges.len(), 130);
    assert_eq!(p.waiting_next.total + p.in_flight_left.total, count as f64);
}

/// A service that refuses at once: every client in the loop is waiting out its 2 s delay,
/// due within it, each when its last refusal and its next attempt say.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_waiting_out_a_fixed_delay_are_due_as_their_last_refusal_says() {
    const COUNT: usize = 30;
    const DELAY_S: f64 = 2.0;
    let (target, log) = server(Answer::Refuse).await;
    let (metrics, _workers) = workers(target, COUNT, "1s", "2s").await;
    all_in_loop(metrics, COUNT).await;
    rehearsal_reads_the_page(metrics, COUNT).await;
    let mut known = 0;
    for _ in 0..3 {
        let (t0, page, t1) = scrape_between(metrics).await;
        // Every client waiting at the scrape sends again within a delay.
        tokio::time::sleep(Duration::from_secs_f64(DELAY_S + 0.5)).await;
        let workers = by_worker(&log);
        assert_eq!(workers.len(), COUNT, "one key per worker");
        let (mut waiting, mut unknown) = (Vec::new(), 0);
        for attempts in workers.values() {
            let (last, next) = around(attempts, t1);
            match waiting_left(last.at, next, DELAY_S, t0, t1) {
                Some(left) => waiting.push(left),
                None => unknown += 1,
            }
        }
        let (next, next_total) = ladder(&page, NEXT);
        let (_, left_total) = ladder(&page, LEFT);
        check_rungs(NEXT, &next, &waiting, unknown);
        assert_eq!(
            next_total + left_total,
            page.get(IN_LOOP),
            "every client in the loop stands somewhere"
        );
        assert_eq!(page.get(IN_LOOP), COUNT as f64);
        assert!(
            (left_total - page.get(OUT)).abs() <= unknown as f64,
            "out: {left_total} vs {}",
            page.get(OUT)
        );
        let at_delay = next
            .iter()
            .find(|(le, _)| *le == DELAY_S)
            .expect("an edge at 2 s")
            .1;
        assert_eq!(
            at_delay, next_total,
            "no client waits longer than the delay"
        );
        known += waiting.len();
    }
    assert!(
        known >= COUNT,
        "too few clients known waiting: {known} in 3 scrapes"
    );
}

/// A service that never answers: every retry attempt out has at most its client's
/// timeout (1.5 s) left and is given up on at the deadline it carries; each waiting
/// client is due a delay (1 s) after that deadline; a poll's first attempt out counts in
/// neither ladder (its client is not in the loop yet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_with_attempts_out_give_up_as_their_timeout_says() {
    const COUNT: usize = 20;
    const TIMEOUT_S: f64 = 1.5;
    const DELAY_S: f64 = 1.0;
    let (target, log) = server(Answer::Hang).await;
    let spawned = Instant::now();
    let (metrics, _workers) = workers(target, COUNT, "1500ms", "1s").await;

    // First attempts out and none sent after the spawn has timed out yet: nobody in the
    // loop, both ladders empty.
    let until = Instant::now() + Duration::from_secs(20);
    while log.lock().unwrap().is_empty() {
        assert!(Instant::now() < until, "no attempt reached the server");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (_, page, t1) = scrape_between(metrics).await;
    if secs(t1, spawned) < TIMEOUT_S {
        assert_eq!(page.get(IN_LOOP), 0.0);
        assert_eq!(
            ladder(&page, LEFT).1,
            0.0,
            "a first attempt is not a retry out"
        );
        assert_eq!(ladder(&page, NEXT).1, 0.0);
    }

    all_in_loop(metrics, COUNT).await;
    let (mut known_out, mut known_waiting) = (0, 0);
    for _ in 0..4 {
        let (t0, page, t1) = scrape_between(metrics).await;
        tokio::time::sleep(Duration::from_secs_f64(DELAY_S + 0.5)).await;
        let (mut out, mut waiting, mut unknown) = (Vec::new(), Vec::new(), 0);
        for attempts in by_worker(&log).values() {
            let (last, next) = around(attempts, t1);
            if last.n >= 2 && last.at <= t0 && last.deadline > t1 {
                // A retry sent before the scrape, not given up on before its deadline.
                let left = (
                    secs(last.deadline, t1),
                    secs(last.deadline, t0) + DEADLINE_MS_S,
                );
                out.push(left);
            } else if let Some(left) = waiting_left(last.deadline, next, DELAY_S, t0, t1) {
                waiting.push(left);
            } else {
                unknown += 1;
            }
        }
        let (left, left_total) = ladder(&page, LEFT);
        let (next, next_total) = ladder(&page, NEXT);
        check_rungs(LEFT, &left, &out, unknown);
        check_rungs(NEXT, &next, &waiting, unknown);
        assert_eq!(next_total + left_total, page.get(IN_LOOP));
        assert_eq!(page.get(IN_LOOP), COUNT as f64);
        assert!(
            (left_total - page.get(OUT)).abs() <= unknown as f64,
            "out: {left_total} vs {}",
            page.get(OUT)
        );
        let at_timeout = left
            .iter()
            .find(|(le, _)| *le == TIMEOUT_S)
            .expect("an edge at 1.5 s")
            .1;
        assert_eq!(
            at_timeout, left_total,
            "no attempt has more than the timeout left"
        );
        (known_out, known_waiting) = (known_out + out.len(), known_waiting + waiting.len());
    }
    // Four scrapes of 2.5 s cycles (1.5 s out, 1 s waiting): most clients told apart.
    assert!(
        known_out >= COUNT,
        "too few attempts known out: {known_out}"
    );
    assert!(
        known_waiting >= COUNT / 2,
        "too few known waiting: {known_waiting}"
    );
}
