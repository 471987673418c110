//! Property tests (proptest) over every parser that reads input from outside: the gate's
//! request and response heads and its chunked framing, the `/metrics` exposition parser,
//! the incremental path a head arriving in pieces takes (the same answer as one parse of
//! the whole, at the same moment), the scrape expression language, and runbook loading (its YAML and its conditions). Random bytes and mutations of
//! valid input must never panic, and what parses must hold its invariants (a rewritten
//! head parses again to the same framing, a chunked body split anywhere ends at the same
//! byte, a rendered sample reads back the same). Case counts are bounded so the whole file
//! runs in well under a minute in a debug build; any failure found is kept below as a
//! named regression test.

use proptest::prelude::*;
use proptest::test_runner::Config;
use recover::gate::http1::head::empty_headers;
use recover::gate::http1::{
    leading_empty_lines, parse_request, parse_request_scanned, parse_response, BodyCursor, Framing,
    HeadScan,
};

/// Cases per property: enough to cover the shapes, few enough for CI.
fn cases(n: u32) -> Config {
    Config {
        cases: n,
        // Failures are kept as named tests in this file, not in a side file.
        failure_persistence: None,
        ..Config::default()
    }
}

// ---------------------------------------------------------------------------------------
// Mutations of valid input: the inputs most likely to reach deep into a parser.
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Repeat(usize, usize, u8),
}

fn edit() -> impl Strategy<Value = Edit> {
    let bytes = prop::collection::vec(
        prop_oneof![
            any::<u8>(),
            Just(b'\r'),
            Just(b'\n'),
            Just(b':'),
            Just(b' '),
            Just(b','),
            Just(b'0'),
            Just(b'f'),
            Just(b';'),
            Just(b'"'),
            Just(b'{'),
            Just(b'('),
        ],
        1..8,
    );
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Flip(i, b)),
        (any::<usize>(), bytes).prop_map(|(i, b)| Edit::Insert(i, b)),
        (any::<usize>(), 1usize..16).prop_map(|(i, n)| Edit::Delete(i, n)),
        (any::<usize>(), 1usize..64, any::<u8>()).prop_map(|(i, n, b)| Edit::Repeat(i, n, b)),
    ]
}

fn apply(mut v: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let at = |i: usize, len: usize| if len == 0 { 0 } else { i % (len + 1) };
        match e {
            Edit::Flip(i, b) if !v.is_empty() => {
                let i = i % v.len();
                v[i] = *b;
            }
            Edit::Flip(..) => {}
            Edit::Insert(i, bytes) => {
                let i = at(*i, v.len());
                v.splice(i..i, bytes.iter().copied());
            }
            Edit::Delete(i, n) => {
                let i = at(*i, v.len());
                let end = (i + n).min(v.len());
                v.drain(i..end);
            }
            Edit::Repeat(i, n, b) => {
                let i = at(*i, v.len());
                v.splice(i..i, std::iter::repeat_n(*b, *n));
            }
        }
    }
    v
}

fn mutated(seeds: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(seeds),
        prop::collection::vec(edit(), 0..6),
    )
        .prop_map(|(seed, edits)| apply(seed.as_bytes().to_vec(), &edits))
}

fn text_from(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes).into_owned()
}

// ---------------------------------------------------------------------------------------
// The gate: request heads.
// ---------------------------------------------------------------------------------------

const REQUESTS: &[&str] = &[
    "GET / HTTP/1.1\r\nhost: a\r\n\r\n",
    "POST /p?q=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nConnection: keep-alive, x-a\r\nx-a: 1\r\n\r\nhello",
    "PUT http://a/b HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\nexpect: 100-continue\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "GET /old HTTP/1.0\r\nx-deadline-ms: 300\r\n\r\n",
    "HEAD * HTTP/1.1\r\nhost: a\r\nte: trailers\r\nkeep-alive: 5\r\nx-attempt: 2\r\n\r\n",
    "DELETE /x HTTP/1.1\r\nhost: a\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
];

/// Parse a request head and check what a parsed head promises: it lies within the
/// buffer, no shorter prefix parses, and the head the gate writes upstream parses again
/// to the same method, framing and body expectation.
fn check_request(buf: &[u8]) -> Result<(), TestCaseError> {
    let mut headers = empty_headers();
    let Ok(Some(head)) = parse_request(buf, &mut headers) else {
        return Ok(());
    };
    prop_assert!(head.len <= buf.len());
    for cut in [0, head.len / 2, head.len.saturating_sub(1)] {
        if cut < head.len {
            let mut h = empty_headers();
            prop_assert!(
                !matches!(parse_request(&buf[..cut], &mut h), Ok(Some(_))),
                "a prefix of {cut} bytes parsed as a whole head"
            );
        }
    }
    let mut out = Vec::new();
    head.write_upstream(&mut out, "replica:9001", 1_780_000_000_000);
    let mut again = empty_headers();
    let re = parse_request(&out, &mut again);
    let Ok(Some(re)) = re else {
        return Err(TestCaseError::fail(format!(
            "the upstream head does not parse: {:?}\n{}",
            re.err(),
            String::from_utf8_lossy(&out)
        )));
    };
    prop_assert_eq!(re.len, out.len());
    prop_assert_eq!(re.framing, head.framing);
    prop_assert_eq!(re.is_head(), head.is_head());
    Ok(())
}

proptest! {
    #![proptest_config(cases(3000))]

    #[test]
    fn request_heads_from_random_bytes(buf in prop::collection::vec(any::<u8>(), 0..600)) {
        check_request(&buf)?;
    }

    #[test]
    fn request_heads_from_mutated_requests(buf in mutated(REQUESTS)) {
        check_request(&buf)?;
    }
}

/// What one parse of a buffer says, comparable across calls.
#[derive(Debug, PartialEq)]
enum Parsed {
    Head(usize, Framing),
    More,
    Refused,
}

fn plain(buf: &[u8]) -> Parsed {
    let mut h = empty_headers();
    match parse_request(buf, &mut h) {
        Ok(Some(head)) => Parsed::Head(head.len, head.framing),
        Ok(None) => Parsed::More,
        Err(_) => Parsed::Refused,
    }
}

/// Feed `bytes` in the pieces `cuts` makes, as the connection loop does (empty lines
/// before a request line dropped, the scan parsing only when a line ended): whenever the
/// scan parses it says what one parse of the buffer says; when it does not, one parse
/// would not have found a head either; it finds a head at the very piece one parse first
/// does; and a buffer that ends a line is judged by the end.
fn check_incremental(bytes: &[u8], cuts: &[usize]) -> Result<(), TestCaseError> {
    let mut ends: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    ends.push(bytes.len());
    ends.sort_unstable();
    ends.dedup();
    let mut scan = HeadScan::default();
    let mut buf: Vec<u8> = Vec::new();
    let mut fed = 0;
    for end in ends {
        buf.extend_from_slice(&bytes[fed..end]);
        fed = end;
        let blank = leading_empty_lines(&buf);
        if blank > 0 {
            buf.drain(..blank);
            scan.reset();
        }
        let whole = plain(&buf);
        let mut h = empty_headers();
        let scanned = match parse_request_scanned(&buf, &mut h, &mut scan) {
            Ok(Some(head)) => Parsed::Head(head.len, head.framing),
            Ok(None) => Parsed::More,
            Err(_) => Parsed::Refused,
        };
        match (&scanned, &whole) {
            (Parsed::More, Parsed::Head(..)) => {
                return Err(TestCaseError::fail(format!(
                    "one parse finds a head the scan missed after {end} bytes"
                )))
            }
            (Parsed::More, _) => {}
            _ => prop_assert_eq!(&scanned, &whole, "after {} bytes", end),
        }
        if scanned != Parsed::More {
            return Ok(());
        }
    }
    prop_assert!(
        !buf.ends_with(b"\n") || plain(&buf) == Parsed::More,
        "a buffer ending a line was left unjudged"
    );
    Ok(())
}

proptest! {
    #![proptest_config(cases(2000))]

    #[test]
    fn heads_arriving_in_pieces_read_as_one_parse_reads_them(
        buf in prop_oneof![mutated(REQUESTS), prop::collection::vec(any::<u8>(), 0..300)],
        cuts in prop::collection::vec(any::<usize>(), 0..40),
    ) {
        check_incremental(&buf, &cuts)?;
    }

    #[test]
    fn heads_dripped_a_byte_at_a_time_read_as_one_parse_reads_them(buf in mutated(REQUESTS)) {
        let cuts: Vec<usize> = (0..buf.len()).collect();
        check_incremental(&buf, &cuts)?;
    }
}

// ---------------------------------------------------------------------------------------
// The gate: response heads.
// ---------------------------------------------------------------------------------------

const RESPONSES: &[&str] = &[
    "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
    "HTTP/1.1 204 No Content\r\nconnection: keep-alive\r\nkeep-alive: timeout=5\r\n\r\n",
    "HTTP/1.1 500 Oops\r\ntransfer-encoding: chunked\r\ntrailer: x-t\r\n\r\n2\r\nok\r\n0\r\nx-t: 1\r\n\r\n",
    "HTTP/1.0 200 OK\r\nx-a: 1\r\n\r\nuntil close",
    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 304 Not Modified\r\netag: \"x\"\r\n\r\n",
    "HTTP/1.1 200 OK\r\nconnection: x-b, close\r\nx-b: 2\r\ncontent-length: 0\r\n\r\n",
];

/// Parse a response head; the head the gate writes to the client parses again to the
/// same status and framing (a client must find the body's end where the gate does).
fn check_response(buf: &[u8], head_request: bool) -> Result<(), TestCaseError> {
    let mut headers = empty_headers();
    let Ok(Some(head)) = parse_response(buf, &mut headers, head_request) else {
        return Ok(());
    };
    prop_assert!(head.len <= buf.len());
    let close = head.framing == Framing::UntilClose;
    let mut out = Vec::new();
    head.write_client(&mut out, close);
    let mut again = empty_headers();
    let re = parse_response(&out, &mut again, head_request);
    let Ok(Some(re)) = re else {
        return Err(TestCaseError::fail(format!(
            "the client head does not parse: {:?}\n{}",
            re.err(),
            String::from_utf8_lossy(&out)
        )));
    };
    prop_assert_eq!(re.status, head.status);
    prop_assert_eq!(re.framing, head.framing);
    Ok(())
}

proptest! {
    #![proptest_config(cases(3000))]

    #[test]
    fn response_heads_from_random_bytes(
        buf in prop::collection::vec(any::<u8>(), 0..600),
        head_request in any::<bool>(),
    ) {
        check_response(&buf, head_request)?;
    }

    #[test]
    fn response_heads_from_mutated_responses(buf in mutated(RESPONSES), head_request in any::<bool>()) {
        check_response(&buf, head_request)?;
    }
}

// ---------------------------------------------------------------------------------------
// The gate: chunked framing.
// ---------------------------------------------------------------------------------------

/// Feed `bytes` to a fresh cursor in pieces cut at `cuts`, as reads would deliver them;
/// the bytes taken, or `None` at a framing error.
fn consume(framing: Framing, bytes: &[u8], cuts: &[usize]) -> Option<usize> {
    let mut cursor = BodyCursor::new(framing);
    let mut at = 0;
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    bounds.sort_unstable();
    bounds.push(bytes.len());
    for end in bounds {
        if end <= at {
            continue;
        }
        let piece = &bytes[at..end];
        let n = cursor.advance(piece).ok()?;
        at += n;
        if cursor.is_done() || n < piece.len() {
            break;
        }
    }
    Some(at)
}

/// A chunked body for `payload`, cut in chunks of `sizes`, with extensions and trailers.
fn chunked(payload: &[u8], sizes: &[usize], ext: bool, trailer: bool, upper: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = payload;
    let mut sizes = sizes.iter().cycle();
    while !rest.is_empty() {
        let n = (*sizes.next().unwrap_or(&1)).clamp(1, rest.len());
        let size = if upper {
            format!("{n:X}")
        } else {
            format!("{n:x}")
        };
        out.extend_from_slice(size.as_bytes());
        if ext {
            out.extend_from_slice(b";name=value");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&rest[..n]);
        out.extend_from_slice(b"\r\n");
        rest = &rest[n..];
    }
    out.extend_from_slice(b"0\r\n");
    if trailer {
        out.extend_from_slice(b"x-trailer: 1\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

proptest! {
    #![proptest_config(cases(2000))]

    #[test]
    fn a_chunked_body_ends_at_the_same_byte_however_it_is_split(
        payload in prop::collection::vec(any::<u8>(), 0..3000),
        sizes in prop::collection::vec(1usize..700, 1..8),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
        ext in any::<bool>(),
        trailer in any::<bool>(),
        upper in any::<bool>(),
    ) {
        let body = chunked(&payload, &sizes, ext, trailer, upper);
        let mut wire = body.clone();
        wire.extend_from_slice(b"GET /next HTTP/1.1\r\n\r\n");
        prop_assert_eq!(consume(Framing::Chunked, &wire, &[]), Some(body.len()));
        prop_assert_eq!(consume(Framing::Chunked, &wire, &cuts), Some(body.len()));
    }

    #[test]
    fn random_framing_bytes_split_anywhere_read_the_same(
        bytes in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..400),
            (prop::collection::vec(any::<u8>(), 0..200), prop::collection::vec(1usize..50, 1..4), prop::collection::vec(edit(), 0..4))
                .prop_map(|(p, s, e)| apply(chunked(&p, &s, false, false, false), &e)),
        ],
        cuts in prop::collection::vec(any::<usize>(), 0..12),
        length in 0u64..500,
    ) {
        for framing in [Framing::Chunked, Framing::Length(length), Framing::UntilClose, Framing::Empty] {
            let whole = consume(framing, &bytes, &[]);
            let split = consume(framing, &bytes, &cuts);
            if let (Some(w), Some(s)) = (whole, split) {
                prop_assert_eq!(w, s, "{:?}", framing);
                prop_assert!(w <= bytes.len());
            }
            // A framing error seen whole must be seen split too (and the other way round)
            // unless the body ended before the bad byte in both.
            prop_assert_eq!(whole.is_none(), split.is_none(), "{:?}", framing);
        }
    }
}

// ---------------------------------------------------------------------------------------
// The exposition parser.
// ---------------------------------------------------------------------------------------

const PAGES: &[&str] = &[
    "# HELP a_total Things.\n# TYPE a_total counter\na_total{x=\"1\",y=\"a\\\"b\\\\c\\nd\"} 3.5 1700000000\n",
    "# TYPE h histogram\nh_bucket{le=\"0.1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 0.3\nh_count 2\n# EOF\n",
    "g NaN\ng2 +Inf\ng3 -Inf\ng4 inf\nm{a=\"b\"} 1 # {trace_id=\"x\"} 0.5 1.0\n",
    "# UNIT m seconds\nm_seconds{  a = \"x\" , } 12e-3\n",
];

fn metric_name() -> impl Strategy<Value = String> {
    "[a-zA-Z_:][a-zA-Z0-9_:]{0,20}"
}

fn label() -> impl Strategy<Value = (String, String)> {
    ("[a-zA-Z_][a-zA-Z0-9_]{0,12}", any::<String>())
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

proptest! {
    #![proptest_config(cases(3000))]

    #[test]
    fn exposition_pages_from_random_text(text in any::<String>()) {
        let _ = recover::metrics::scrape::text::parse(&text);
    }

    #[test]
    fn exposition_pages_from_mutated_pages(page in mutated(PAGES)) {
        let _ = recover::metrics::scrape::text::parse(&text_from(page));
    }

    #[test]
    fn a_rendered_sample_reads_back_the_same(
        name in metric_name(),
        labels in prop::collection::btree_map("[a-zA-Z_][a-zA-Z0-9_]{0,12}", any::<String>(), 0..4),
        value in prop_oneof![any::<f64>(), Just(f64::INFINITY), Just(f64::NEG_INFINITY), Just(0.0)],
        extra in prop::option::of(label()),
    ) {
        let mut labels = labels;
        if let Some((k, v)) = extra {
            labels.insert(k, v);
        }
        let rendered: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
        let number = if value.is_nan() { "NaN".to_string() } else if value == f64::INFINITY { "+Inf".into() } else if value == f64::NEG_INFINITY { "-Inf".into() } else { format!("{value:e}") };
        let line = format!("{name}{{{}}} {number}\n", rendered.join(","));
        let page = recover::metrics::scrape::text::parse(&line)
            .map_err(|e| TestCaseError::fail(format!("{e}: {line:?}")))?;
        prop_assert_eq!(page.samples.len(), 1);
        let s = &page.samples[0];
        prop_assert_eq!(&s.name, &name);
        let want: Vec<(String, String)> = labels.into_iter().collect();
        prop_assert_eq!(&s.labels, &want);
        prop_assert!(s.value == value || (s.value.is_nan() && value.is_nan()), "{} != {}", s.value, value);
    }
}

// ---------------------------------------------------------------------------------------
// The scrape expression language.
// ---------------------------------------------------------------------------------------

const EXPRESSIONS: &[&str] = &[
    "sum(rate(recover_gate_requests_total{outcome=\"admitted\"}@gate[10s]))",
    "histogram_quantile(0.99, rate(m_bucket{a=~\"x.*|y\", b!~\"z+\"}[1m])) * 1000",
    "count(up@service) - sum(up@service) + (sum(1 - alive(ready@service)) or 0)",
    "-(-a / (b + 2.5e3)) or increase(c{d!=\"e\",}[500ms])",
    "avg(x) + max(y) - min(z) * count(w{l=\"\\\"q\\\\\"})",
];

/// A valid expression of bounded depth, from the grammar.
pub(crate) fn expression() -> impl Strategy<Value = String> {
    let selector = (
        "[a-z_][a-z0-9_]{0,10}",
        prop::option::of((
            "[a-z]{1,5}",
            prop::sample::select(vec!["=", "!=", "=~", "!~"]),
            // The pattern subset: a repeat follows a character or '.'.
            "([a-z.][*+?]?|\\|){0,4}",
        )),
        prop::option::of(prop::sample::select(vec!["gate", "service", "clients"])),
    )
        .prop_map(|(m, matcher, role)| {
            let mut s = m;
            if let Some((l, op, v)) = matcher {
                s.push_str(&format!("{{{l}{op}\"{v}\"}}"));
            }
            if let Some(r) = role {
                s.push_str(&format!("@{r}"));
            }
            s
        });
    let leaf = prop_oneof![
        (0.0f64..1e6).prop_map(|n| format!("{n}")),
        selector.clone(),
        (
            selector.clone(),
            prop::sample::select(vec!["rate", "increase"]),
            prop::sample::select(vec!["10s", "500ms", "1m"])
        )
            .prop_map(|(s, f, w)| format!("{f}({s}[{w}])")),
        selector.prop_map(|s| format!("alive({s})")),
    ];
    leaf.prop_recursive(5, 40, 3, |inner| {
        prop_oneof![
            (
                inner.clone(),
                prop::sample::select(vec!["+", "-", "*", "/", "or"]),
                inner.clone()
            )
                .prop_map(|(a, op, b)| format!("{a} {op} {b}")),
            inner.clone().prop_map(|a| format!("({a})")),
            inner.clone().prop_map(|a| format!("-{a}")),
            (
                prop::sample::select(vec!["sum", "max", "min", "avg", "count"]),
                inner.clone()
            )
                .prop_map(|(f, a)| format!("{f}({a})")),
            (0.0f64..1.0, inner).prop_map(|(q, a)| format!("histogram_quantile({q}, {a})")),
        ]
    })
}

proptest! {
    #![proptest_config(cases(3000))]

    #[test]
    fn expressions_from_random_text(text in any::<String>()) {
        let _ = recover::metrics::scrape::expr::parse(&text);
    }

    #[test]
    fn expressions_from_mutated_expressions(e in mutated(EXPRESSIONS)) {
        let _ = recover::metrics::scrape::expr::parse(&text_from(e));
    }

    #[test]
    fn expressions_from_the_grammar_parse(e in expression()) {
        recover::metrics::scrape::expr::parse(&e)
            .map_err(|err| TestCaseError::fail(format!("{err}: {e}")))?;
    }

}

proptest! {
    #![proptest_config(cases(200))]

    #[test]
    fn deeply_nested_expressions_are_refused_or_parsed_never_a_crash(
        depth in 1usize..20_000,
        open in prop::sample::select(vec!["(", "-", "sum(", "-("]),
    ) {
        let close = if open.ends_with('(') { ")" } else { "" };
        let e = format!("{}1{}", open.repeat(depth), close.repeat(depth));
        let _ = recover::metrics::scrape::expr::parse(&e);
    }
}

// ---------------------------------------------------------------------------------------
// Runbook loading.
// ---------------------------------------------------------------------------------------

const RUNBOOKS: &[&str] = &[
    include_str!("../../runbooks/stuck-overload.yaml"),
    include_str!("../../runbooks/retry-storm.yaml"),
];

proptest! {
    #![proptest_config(cases(300))]

    #[test]
    fn runbooks_from_random_text(text in any::<String>()) {
        let _ = recover::runbook::parse_str("fuzz.yaml", &text);
    }

    #[test]
    fn runbooks_from_mutated_runbooks(rb in mutated(RUNBOOKS)) {
        if let Err(e) = recover::runbook::parse_str("fuzz.yaml", &text_from(rb)) {
            for d in e.diagnostics() {
                prop_assert!(d.line >= 1 && d.column >= 1, "{}", d);
            }
        }
    }

    #[test]
    fn runbooks_with_lines_dropped_or_doubled(
        which in 0usize..2,
        ops in prop::collection::vec((any::<usize>(), any::<bool>()), 1..6),
    ) {
        let mut lines: Vec<&str> = RUNBOOKS[which].lines().collect();
        for (i, double) in ops {
            let i = i % lines.len().max(1);
            if lines.is_empty() {
                break;
            }
            if double {
                lines.insert(i, lines[i]);
            } else {
                lines.remove(i);
            }
        }
        let _ = recover::runbook::parse_str("fuzz.yaml", &lines.join("\n"));
    }

    #[test]
    fn deeply_nested_yaml_is_refused_never_a_crash(depth in 1usize..2000) {
        let text = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        prop_assert!(recover::runbook::parse_str("fuzz.yaml", &text).is_err());
    }
}

// ---------------------------------------------------------------------------------------
// Runbook conditions (`abort_when`, check `success`), part of loading a runbook.
// ---------------------------------------------------------------------------------------

const CONDITIONS: &[&str] = &[
    "goodput >= 0.8 * gate_admitted_rate and latency_p99 < 0.5 * params.client_timeout_s",
    "not (goodput > 95) or queue_depth > 100",
    "-queue_depth + 10 / 2 != 3 and (a == b or c <= d)",
];

proptest! {
    #![proptest_config(cases(3000))]

    #[test]
    fn conditions_from_random_text(text in any::<String>()) {
        let _ = recover::runbook::expr::Expr::parse(&text);
    }

    #[test]
    fn conditions_from_mutated_conditions(c in mutated(CONDITIONS)) {
        let _ = recover::runbook::expr::Expr::parse(&text_from(c));
    }

}

// Deep nesting costs a long input per case: fewer cases, depths spread over the range.
proptest! {
    #![proptest_config(cases(200))]

    #[test]
    fn deeply_nested_conditions_are_refused_or_parsed_never_a_crash(
        depth in 1usize..20_000,
        open in prop::sample::select(vec!["(", "-", "not ", "not ("]),
    ) {
        let close = if open.ends_with('(') { ")" } else { "" };
        let c = format!("{}x > 1{}", open.repeat(depth), close.repeat(depth));
        let _ = recover::runbook::expr::Expr::parse(&c);
    }
}

// ---------------------------------------------------------------------------------------
// Regressions: what the properties above found, kept by name.
// ---------------------------------------------------------------------------------------

/// Found by `deeply_nested_expressions_are_refused_or_parsed_never_a_crash`: the scrape
/// expression parser recursed once per `(` or `-` and overflowed the stack (SIGABRT).
#[test]
fn regression_a_scrape_expression_nested_ten_thousand_deep_is_refused() {
    for (open, close) in [("(", ")"), ("-", ""), ("sum(", ")")] {
        let e = format!("{}1{}", open.repeat(10_000), close.repeat(10_000));
        let err = recover::metrics::scrape::expr::parse(&e).unwrap_err();
        assert!(err.message.contains("nested more than 100"), "{err}");
    }
    let fine = format!("{}1{}", "(".repeat(90), ")".repeat(90));
    assert!(recover::metrics::scrape::expr::parse(&fine).is_ok());
}

/// Found by `deeply_nested_conditions_are_refused_or_parsed_never_a_crash`: the same in
/// the runbook condition language, through `(`, `-` and `not`.
#[test]
fn regression_a_condition_nested_ten_thousand_deep_is_refused() {
    for (open, close) in [("(", ")"), ("-", ""), ("not ", "")] {
        let c = format!("{}x > 1{}", open.repeat(10_000), close.repeat(10_000));
        let err = recover::runbook::expr::Expr::parse(&c).unwrap_err();
        assert!(err.contains("nested more than 100"), "{err}");
    }
    let fine = format!("{}x > 1{}", "(".repeat(40), ")".repeat(40));
    assert!(recover::runbook::expr::Expr::parse(&fine).is_ok());
}
