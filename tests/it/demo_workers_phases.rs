//! `recover demo workers` as a real process against a server this test controls: where each
//! client of the retry loop stands, read from the workers' own `/metrics`
//! (`_next_attempt_within{le_s}`, `_attempt_left_within{le_s}`), checked against when the
//! server saw each client's attempts. Each worker sends an `Idempotency-Key` its retries
//! repeat, and its polls never succeed here, so a key is one worker for the whole test.

use crate::support::demo::{free_addr, http, scrape, spawn, wait_http_ok, Scrape};
use recover::util::child::ChildGuard;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const NEXT: &str = "recover_demo_workers_next_attempt_within";
const LEFT: &str = "recover_demo_workers_attempt_left_within";
const IN_LOOP: &str = "recover_demo_workers_in_retry_loop";
const OUT: &str = "recover_demo_workers_retrying_in_flight";

/// The most a worker takes to act on what happened on the wire: the answer's way back on
/// loopback and its task's turn on a shared 2-core machine; a client whose last attempt
/// is nearer the scrape than this is counted as unknown rather than guessed.
const SLACK_S: f64 = 0.25;

/// What the test server does with each request.
#[derive(Clone, Copy)]
enum Answer {
    /// 503 at once: every client waits out its retry delay, then tries again.
    Refuse,
    /// Never answer: every attempt is out until its client gives up.
    Hang,
}

/// Each request the server saw: the worker's key, its attempt number, when it arrived.
type Log = Arc<Mutex<Vec<(String, u32, Instant)>>>;

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
                        log.lock().unwrap().push((key, n, Instant::now()));
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

/// Each worker's attempts as the server saw them, oldest first.
fn by_worker(log: &Log) -> HashMap<String, Vec<(u32, Instant)>> {
    let mut map: HashMap<String, Vec<(u32, Instant)>> = HashMap::new();
    for (key, n, at) in log.lock().unwrap().iter() {
        map.entry(key.clone()).or_default().push((*n, *at));
    }
    map
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

/// `a - b`, seconds, negative when `a` is earlier.
fn secs(a: Instant, b: Instant) -> f64 {
    a.saturating_duration_since(b).as_secs_f64() - b.saturating_duration_since(a).as_secs_f64()
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
/// due within it, each as long after the scrape as its last refusal plus the delay says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_waiting_out_a_fixed_delay_are_due_as_their_last_refusal_says() {
    const COUNT: usize = 30;
    const DELAY_S: f64 = 2.0;
    let (target, log) = server(Answer::Refuse).await;
    let (metrics, _workers) = workers(target, COUNT, "1s", "2s").await;
    all_in_loop(metrics, COUNT).await;
    rehearsal_reads_the_page(metrics, COUNT).await;
    for _ in 0..3 {
        let (t0, page, t1) = scrape_between(metrics).await;
        let (mut known, mut unknown) = (Vec::new(), 0);
        let workers = by_worker(&log);
        assert_eq!(workers.len(), COUNT, "one key per worker");
        for attempts in workers.values() {
            let seen: Vec<Instant> = attempts
                .iter()
                .map(|(_, at)| *at)
                .filter(|at| *at <= t1)
                .collect();
            let last = *seen.last().expect("every worker has tried");
            // Refused at `last`, told within the slack, due a delay after that; unknown
            // while it may still be hearing the refusal or may have sent again.
            if secs(t0, last) < SLACK_S || secs(t1, last) >= DELAY_S {
                unknown += 1;
                continue;
            }
            let lo = (secs(last, t1) + DELAY_S).max(0.0);
            let hi = (secs(last, t0) + SLACK_S + DELAY_S).max(0.0);
            known.push((lo, hi));
        }
        let (next, next_total) = ladder(&page, NEXT);
        let (_, left_total) = ladder(&page, LEFT);
        check_rungs(NEXT, &next, &known, unknown);
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
        assert!(known.len() >= COUNT / 2, "too few workers known: {known:?}");
        tokio::time::sleep(Duration::from_millis(350)).await;
    }
}

/// A service that never answers: every retry attempt is out with its client's timeout
/// (1.5 s) from when it was sent left at most, each waiting one due a delay (1 s) after
/// its attempt was given up on, and a first attempt out counts in neither
/// ladder (its client is not in the loop yet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_with_attempts_out_give_up_as_their_timeout_says() {
    const COUNT: usize = 20;
    const TIMEOUT_S: f64 = 1.5;
    const DELAY_S: f64 = 1.0;
    let (target, log) = server(Answer::Hang).await;
    let (metrics, _workers) = workers(target, COUNT, "1500ms", "1s").await;

    // First attempts out, nobody in the loop: both ladders empty.
    let until = Instant::now() + Duration::from_secs(20);
    let first = loop {
        if let Some((_, _, at)) = log.lock().unwrap().first() {
            break *at;
        }
        assert!(Instant::now() < until, "no attempt reached the server");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let (_, page, t1) = scrape_between(metrics).await;
    if secs(t1, first) < TIMEOUT_S - SLACK_S {
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
    for _ in 0..5 {
        let (t0, page, t1) = scrape_between(metrics).await;
        let (mut out, mut waiting, mut unknown) = (Vec::new(), Vec::new(), 0);
        for attempts in by_worker(&log).values() {
            let &(n, last) = attempts.iter().rfind(|(_, at)| *at <= t1).expect("tried");
            let since = secs(t0, last);
            if n >= 2 && (0.0..TIMEOUT_S - SLACK_S).contains(&since) {
                // Sent within the slack before it arrived, given up on a timeout after.
                out.push((
                    (secs(last, t1) - SLACK_S + TIMEOUT_S).max(0.0),
                    secs(last, t0) + TIMEOUT_S,
                ));
            } else if since > TIMEOUT_S + SLACK_S && secs(t1, last) < TIMEOUT_S + DELAY_S - SLACK_S
            {
                // Given up on (within the slack of its deadline), waiting out the delay.
                let lo = (secs(last, t1) - SLACK_S + TIMEOUT_S + DELAY_S).max(0.0);
                let hi = (secs(last, t0) + TIMEOUT_S + SLACK_S + DELAY_S).max(0.0);
                waiting.push((lo, hi));
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
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Over 2.5 s of 2.5 s cycles (1.5 s out, 1 s waiting) most clients were told apart.
    assert!(
        known_out >= COUNT,
        "too few attempts known out: {known_out}"
    );
    assert!(
        known_waiting >= COUNT / 2,
        "too few known waiting: {known_waiting}"
    );
}
