//! Property tests (proptest) of the scrape evaluator: random expressions over random
//! histories never panic and never answer NaN; rates over random histories (series
//! appearing, vanishing, resetting, reporting NaN, targets down) agree with a plain
//! reference that re-reads every page the way the evaluator once did; histogram_quantile
//! over random buckets agrees with the reference's bucket arithmetic; label patterns match
//! as the backtracking matcher they replaced did. Case counts keep the file to seconds in a
//! debug build.

use crate::fuzz_parsers::expression;
use proptest::prelude::*;
use proptest::test_runner::Config;
use recover::metrics::scrape::{compile, expr, ScrapeEndpoint, Scraper};
use recover::metrics::signal::SignalSpec;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

fn cases(n: u32) -> Config {
    Config {
        cases: n,
        failure_persistence: None,
        ..Config::default()
    }
}

fn ep() -> ScrapeEndpoint {
    ScrapeEndpoint {
        role: "service".into(),
        instance: "r0".into(),
        locator: "http://127.0.0.1:9/metrics".into(),
    }
}

/// The series every generated page draws from: counters and histogram buckets.
const POOL: &[&str] = &[
    "a_total{x=\"0\"}",
    "a_total{x=\"1\"}",
    "a_total{x=\"2\"}",
    "b_bucket{le=\"0.1\"}",
    "b_bucket{le=\"1\"}",
    "b_bucket{le=\"+Inf\"}",
];

/// One scrape: milliseconds after the one before, and the page (`None`: the fetch failed)
/// holding a value, or nothing, for each series of [`POOL`].
#[derive(Debug, Clone)]
struct Step {
    after_ms: u64,
    page: Option<Vec<Option<f64>>>,
}

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        8 => (0u32..1000).prop_map(f64::from),
        1 => Just(f64::NAN),
    ]
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let page = prop::collection::vec(prop::option::weighted(0.8, value()), POOL.len());
    let step = (100u64..2500, prop::option::weighted(0.9, page))
        .prop_map(|(after_ms, page)| Step { after_ms, page });
    prop::collection::vec(step, 1..10)
}

fn render(values: &[Option<f64>]) -> String {
    let mut out = String::new();
    for (series, v) in POOL.iter().zip(values) {
        if let Some(v) = v {
            let v = if v.is_nan() {
                "NaN".into()
            } else {
                format!("{v}")
            };
            out.push_str(&format!("{series} {v}\n"));
        }
    }
    out
}

fn at(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_000 + ms)
}

/// The scrapes as (when, page), after recording them into `s`.
fn play(s: &mut Scraper, steps: &[Step]) -> Vec<(SystemTime, Option<Vec<Option<f64>>>)> {
    let mut t = 0;
    let mut out = Vec::new();
    for step in steps {
        t += step.after_ms;
        let text = step.page.as_deref().map(render);
        s.record(
            &ep(),
            at(t),
            text.as_deref().ok_or_else(|| "refused".to_string()),
        );
        out.push((at(t), step.page.clone()));
    }
    out
}

/// Why the reference has no rate.
#[derive(Debug, PartialEq)]
enum NoRate {
    Down,
    Absent,
    Nan,
    TooFew,
}

/// The rate (or increase) of POOL[series] at `now`, reading every page of the window in
/// full as the evaluator once did.
fn reference_rate(
    scrapes: &[(SystemTime, Option<Vec<Option<f64>>>)],
    series: usize,
    window: Duration,
    per_second: bool,
    now: SystemTime,
) -> Result<f64, NoRate> {
    let latest = scrapes.last().unwrap().1.as_ref().ok_or(NoRate::Down)?;
    let now_value = latest[series].ok_or(NoRate::Absent)?;
    if now_value.is_nan() {
        return Err(NoRate::Nan);
    }
    let from = now - window;
    let pages: Vec<_> = scrapes
        .iter()
        .filter(|(t, p)| *t >= from && *t <= now && p.is_some())
        .collect();
    let mut points: Vec<(SystemTime, f64)> = Vec::new();
    for (i, (t, page)) in pages.iter().enumerate() {
        if let Some(v) = page.as_ref().unwrap()[series].filter(|v| !v.is_nan()) {
            if points.is_empty() && i > 0 {
                points.push((pages[i - 1].0, 0.0));
            }
            points.push((*t, v));
        }
    }
    if points.len() < 2 {
        return Err(NoRate::TooFew);
    }
    let span = points
        .last()
        .unwrap()
        .0
        .duration_since(points[0].0)
        .unwrap()
        .as_secs_f64();
    if span <= 0.0 {
        return Err(NoRate::TooFew);
    }
    let total: f64 = points
        .windows(2)
        .map(|w| {
            if w[1].1 >= w[0].1 {
                w[1].1 - w[0].1
            } else {
                w[1].1
            }
        })
        .sum();
    Ok(if per_second { total / span } else { total })
}

fn no_rate(reason: &str) -> NoRate {
    if reason.contains("is down") {
        NoRate::Down
    } else if reason.contains("no such series") {
        NoRate::Absent
    } else if reason.contains("reports NaN") {
        NoRate::Nan
    } else if reason.contains("a rate needs two scrapes") {
        NoRate::TooFew
    } else {
        panic!("unexpected reason: {reason}")
    }
}

fn compiled(e: &str) -> BTreeMap<String, recover::metrics::scrape::Compiled> {
    let spec = SignalSpec {
        scrape: Some(e.to_string()),
        promql: None,
        help: None,
        per_replica: false,
    };
    compile(&BTreeMap::from([("s".to_string(), spec)])).unwrap()
}

/// The old quantile arithmetic: buckets summed by bound in order of appearance, sorted.
fn reference_quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let mut merged: Vec<(f64, f64)> = Vec::new();
    for &(bound, v) in buckets {
        match merged.iter_mut().find(|(b, _)| *b == bound) {
            Some(b) => b.1 += v,
            None => merged.push((bound, v)),
        }
    }
    merged.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut running = 0.0f64;
    for b in merged.iter_mut() {
        running = running.max(b.1);
        b.1 = running;
    }
    let &(last, total) = merged.last()?;
    if last != f64::INFINITY || total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let i = merged
        .iter()
        .position(|b| b.1 >= rank)
        .unwrap_or(merged.len() - 1);
    if merged[i].0 == f64::INFINITY {
        return i.checked_sub(1).map(|j| merged[j].0);
    }
    let (lower, below) = match i.checked_sub(1) {
        Some(j) => merged[j],
        None => (0.0f64.min(merged[0].0), 0.0),
    };
    let (upper, count) = merged[i];
    if count <= below {
        return Some(upper);
    }
    Some(lower + (upper - lower) * (rank - below) / (count - below))
}

proptest! {
    #![proptest_config(cases(400))]

    #[test]
    fn rates_agree_with_reading_every_page(
        steps in steps(),
        series in 0usize..3,
        window in prop::sample::select(vec![1u64, 3, 10]),
        per_second in any::<bool>(),
    ) {
        let f = if per_second { "rate" } else { "increase" };
        let e = format!("{f}(a_total{{x=\"{series}\"}}[{window}s])");
        let mut s = Scraper::for_signals(&compiled(&e));
        let scrapes = play(&mut s, &steps);
        let now = scrapes.last().unwrap().0;
        let (got, work) = s.eval_counted(&expr::parse(&e).unwrap(), now);
        let want = reference_rate(&scrapes, series, Duration::from_secs(window), per_second, now);
        match (got, want) {
            (Ok(g), Ok(w)) => prop_assert!((g - w).abs() <= 1e-9 * w.abs().max(1.0), "{g} != {w}"),
            (Err(reason), Err(w)) => prop_assert_eq!(no_rate(&reason), w, "{}", reason),
            (g, w) => prop_assert!(false, "evaluator {:?}, reference {:?}", g, w),
        }
        // Only a_total is kept; each of its samples is read at most once.
        prop_assert!(work.samples <= 3 * steps.len() as u64, "{:?}", work);
    }

    #[test]
    fn quantiles_agree_with_the_reference_arithmetic(
        buckets in prop::collection::vec(
            (prop::sample::select(vec!["0.1", "0.5", "1", "2.5", "+Inf", "1e-3"]), 0u32..50),
            1..12,
        ),
        q in 0.0f64..1.0,
    ) {
        let mut page = String::new();
        let mut parsed = Vec::new();
        for (i, (le, v)) in buckets.iter().enumerate() {
            page.push_str(&format!("h_bucket{{le=\"{le}\",i=\"{i}\"}} {v}\n"));
            let bound = if *le == "+Inf" { f64::INFINITY } else { le.parse().unwrap() };
            parsed.push((bound, f64::from(*v)));
        }
        let e = format!("histogram_quantile({q}, h_bucket)");
        let mut s = Scraper::for_signals(&compiled(&e));
        s.record(&ep(), at(0), Ok(&page));
        let (got, _) = s.eval_counted(&expr::parse(&e).unwrap(), at(0));
        match (got, reference_quantile(q, &parsed)) {
            (Ok(g), Some(w)) => prop_assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "{g} != {w}"),
            (Err(_), None) => {}
            (g, w) => prop_assert!(false, "evaluator {:?}, reference {:?}", g, w),
        }
    }

    #[test]
    fn any_expression_over_any_history_answers_or_says_why(
        e in expression(),
        steps in steps(),
        cut in prop::option::of(0u64..10_000),
    ) {
        let Ok(parsed) = expr::parse(&e) else { return Ok(()) };
        let c = compiled(&e);
        for mut s in [Scraper::default(), Scraper::for_signals(&c)] {
            let scrapes = play(&mut s, &steps);
            let now = scrapes.last().unwrap().0;
            let (got, _) = s.eval_counted(&parsed, now);
            if let Ok(v) = got {
                prop_assert!(!v.is_nan(), "{e}: NaN");
            }
            let snap = s.snapshot_since(&c, now, cut.map(at));
            prop_assert_eq!(snap.readings.len(), 1);
        }
    }
}

/// The pattern subset by backtracking, as the evaluator once matched: the reference for
/// the linear-time matcher.
fn reference_match(pattern: &str, text: &str) -> bool {
    fn items(alt: &str) -> Vec<(Option<char>, char)> {
        let mut out = Vec::new();
        let mut chars = alt.chars().peekable();
        while let Some(c) = chars.next() {
            let atom = match c {
                '.' => None,
                '\\' => chars.next(),
                c => Some(c),
            };
            let rep = match chars.peek() {
                Some(&q @ ('*' | '+' | '?')) => {
                    chars.next();
                    q
                }
                _ => '1',
            };
            out.push((atom, rep));
        }
        out
    }
    fn here(p: &[(Option<char>, char)], t: &[char]) -> bool {
        let Some((&(atom, rep), rest)) = p.split_first() else {
            return t.is_empty();
        };
        let ok = |c: char| atom.is_none_or(|a| a == c);
        let first = !t.is_empty() && ok(t[0]);
        match rep {
            '1' => first && here(rest, &t[1..]),
            '?' => (first && here(rest, &t[1..])) || here(rest, t),
            _ => {
                let min = usize::from(rep == '+');
                let run = t.iter().take_while(|c| ok(**c)).count();
                (min..=run).rev().any(|n| here(rest, &t[n..]))
            }
        }
    }
    let text: Vec<char> = text.chars().collect();
    pattern.split('|').any(|alt| here(&items(alt), &text))
}

proptest! {
    #![proptest_config(cases(2000))]

    #[test]
    fn label_patterns_match_as_backtracking_did(
        pattern in "([ab.][*+?]?|\\|){0,6}",
        text in "[abc]{0,10}",
    ) {
        let Ok(p) = recover::metrics::scrape::pattern::Pattern::parse(&pattern) else {
            return Ok(());
        };
        prop_assert_eq!(p.matches(&text), reference_match(&pattern, &text), "{} on {:?}", pattern, text);
    }
}
