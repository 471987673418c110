//! The scrape source against pages with many series: evaluating a window costs the
//! samples in it (counted, not timed), only the series the signals read are kept, and a
//! page or a target past the caps is refused with a reason naming the count and the
//! target, never held in memory without end.

use recover::metrics::scrape::expr;
use recover::metrics::scrape::{compile, Compiled, ScrapeEndpoint, Scraper, SERIES_CAP};
use recover::metrics::signal::{Reading, SignalSpec};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::{Duration, SystemTime};

fn ep() -> ScrapeEndpoint {
    ScrapeEndpoint {
        role: "service".into(),
        instance: "r0".into(),
        locator: "http://127.0.0.1:9/metrics".into(),
    }
}

fn signals(exprs: &[(&str, &str)]) -> BTreeMap<String, Compiled> {
    let specs = exprs
        .iter()
        .map(|(name, scrape)| {
            let spec = SignalSpec {
                scrape: Some(scrape.to_string()),
                promql: None,
                help: None,
                per_replica: false,
            };
            (name.to_string(), spec)
        })
        .collect();
    compile(&specs).unwrap()
}

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
}

/// `series` counters of one name, each at `count`, and as many series of another name.
fn page(series: usize, count: u64) -> String {
    let mut p = String::with_capacity(series * 80);
    for i in 0..series {
        let _ = writeln!(p, "req_total{{route=\"/r/{i}\",code=\"200\"}} {count}");
        let _ = writeln!(p, "unread_bytes_total{{route=\"/r/{i}\"}} {count}");
    }
    p
}

/// Before, a rate looked every series up in every page of its window by a linear search:
/// 20,000 series over 11 scrapes took about 2.2 billion comparisons. Now each series'
/// samples in the window are read once.
#[test]
fn a_rate_over_many_series_reads_each_sample_in_its_window_once() {
    const N: usize = 20_000;
    let compiled = signals(&[("rps", "sum(rate(req_total[10s]))")]);
    let mut s = Scraper::for_signals(&compiled);
    for t in 0..=10u64 {
        s.record(&ep(), at(t), Ok(&page(N, 5 * t)));
    }
    let e = expr::parse("sum(rate(req_total[10s]))").unwrap();
    let (value, work) = s.eval_counted(&e, at(10));
    // 5 a second on each series.
    assert_eq!(value, Ok(5.0 * N as f64));
    let in_window = (N * 11) as u64;
    assert_eq!(work.series, N as u64, "{work:?}");
    assert!(work.samples <= in_window, "{work:?} over {in_window}");
}

#[test]
fn only_the_series_the_signals_read_are_kept_and_for_their_window_only() {
    const N: usize = 5_000;
    let compiled = signals(&[("rps", "sum(rate(req_total[4s]))")]);
    let mut s = Scraper::for_signals(&compiled);
    for t in 0..30u64 {
        s.record(&ep(), at(t), Ok(&page(N, t)));
    }
    let kept = s.retained();
    assert_eq!(kept.series, N, "unread_bytes_total is not kept: {kept:?}");
    // The longest window is 4 s: 1.5 x 4 s of one-second scrapes, and the one that ends it.
    assert!(kept.points <= N * 7, "{kept:?}");
    let one_key = "req_total".len() + "route".len() + "code".len() + "200".len();
    assert!(kept.key_bytes < N * (one_key + 8), "{kept:?}");
}

/// A hostile target puts a 4 MiB label value on a series the signals read: it is stored
/// once, not once a scrape (17.5 MB a scrape before, for a 16 MiB value).
#[test]
fn a_large_label_on_a_read_series_is_stored_once_over_the_window() {
    let compiled = signals(&[("rps", "sum(rate(req_total[30s]))")]);
    let mut s = Scraper::for_signals(&compiled);
    let big = "x".repeat(4 << 20);
    for t in 0..20u64 {
        let p = format!("req_total{{junk=\"{big}\"}} {t}\n");
        s.record(&ep(), at(t), Ok(&p));
    }
    let kept = s.retained();
    assert_eq!((kept.series, kept.points), (1, 20), "{kept:?}");
    assert!(kept.key_bytes < (4 << 20) + 64, "{kept:?}");
}

/// The same label changing on every scrape would grow with the window: past the cap on
/// a target's names and labels the page is refused, with the reason.
#[test]
fn labels_that_change_every_scrape_are_refused_past_the_key_byte_cap() {
    let compiled = signals(&[("rps", "sum(rate(req_total[60s]))")]);
    let mut s = Scraper::for_signals(&compiled);
    let big = "x".repeat(12 << 20);
    for t in 0..3u64 {
        let p = format!("req_total{{junk=\"{t}{big}\"}} {t}\n");
        s.record(&ep(), at(t), Ok(&p));
    }
    assert!(s.retained().key_bytes <= 32 << 20, "{:?}", s.retained());
    let snap = s.snapshot(&compiled, at(2));
    match &snap.readings["rps"] {
        Reading::Missing { reason } => assert!(
            reason.contains("bytes of names and labels, over the cap of 33554432")
                && reason.contains("service target r0"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_page_over_the_series_cap_is_refused_naming_the_target_and_the_count() {
    let compiled = signals(&[("rps", "sum(rate(req_total[10s]))")]);
    let mut s = Scraper::for_signals(&compiled);
    let over = SERIES_CAP + 1;
    s.record(&ep(), at(0), Ok(&page(over, 0)));
    s.record(&ep(), at(1), Ok(&page(over, 1)));
    assert_eq!(s.retained().series, 0);
    let snap = s.snapshot(&compiled, at(1));
    match &snap.readings["rps"] {
        Reading::Missing { reason } => {
            let want = format!("{over} series of the metrics the signals read, over the cap of {SERIES_CAP} series a page");
            assert!(
                reason.contains(&want) && reason.contains("service target r0"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    // Unread series do not count: the same number of another name passes.
    let compiled = signals(&[("rps", "sum(rate(other_total[10s]))")]);
    let mut s = Scraper::for_signals(&compiled);
    s.record(
        &ep(),
        at(0),
        Ok(&format!("{}other_total 1\n", page(over, 0))),
    );
    s.record(
        &ep(),
        at(1),
        Ok(&format!("{}other_total 2\n", page(over, 1))),
    );
    assert_eq!(
        s.snapshot(&compiled, at(1)).readings["rps"],
        Reading::Value { value: 1.0 }
    );
}

/// `recover detect` against a real HTTP server whose page (for every role) holds more
/// series of a signal's metric than the cap: exit 12, the summary naming the target and
/// the count.
#[test]
fn detect_refuses_a_page_over_the_series_cap_with_exit_12() {
    let mut body = String::new();
    for i in 0..=SERIES_CAP {
        let _ = writeln!(
            body,
            "recover_gate_admissions_total{{decision=\"admitted\",route=\"/r/{i}\"}} 1"
        );
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || serve_forever(listener, body));
    let mut cmd = crate::support::bin();
    cmd.args(["detect", "--observe", "1s", "--output", "json"]);
    for role in ["gate", "service", "clients"] {
        cmd.args(["--metrics-url", &format!("{role}=http://{addr}/metrics")]);
    }
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(12),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let summary = v["summary"].as_str().unwrap();
    let count = format!("{} series", SERIES_CAP + 1);
    assert!(
        summary.contains(&count) && summary.contains(&addr.to_string()),
        "{v}"
    );
}

/// Answer every request on `listener` with `body` (HTTP/1.1, one request a connection).
fn serve_forever(listener: std::net::TcpListener, body: String) {
    use std::io::{Read, Write};
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        let _ = conn.write_all(reply.as_bytes());
        let _ = conn.write_all(body.as_bytes());
    }
}
