//! Evaluate a scrape expression against the scrape history at one instant.
//!
//! Pure (the instant is an argument), so rates, resets and quantiles are tested on
//! recorded pages without a clock or a network. Every way of not knowing is an `Err`
//! carrying the reason, which becomes `Reading::Missing`: a missing value is never a zero.

use super::expr::{Agg, BinOp, Expr, MatchOp, Selector};
use super::history::{Scrape, TargetView, View};
use super::series::SeriesKey;
use std::cell::Cell;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

type Labels = Arc<[(String, String)]>;

/// One series' value, from one target.
#[derive(Debug, Clone)]
struct Point {
    labels: Labels,
    value: f64,
}

/// Why there is no value. `absent` is set only when the targets answered and simply have
/// no such series: that is the one case `a or b` falls back on (a target that is down or
/// too little history must not turn into a default).
#[derive(Debug, Clone)]
struct Miss {
    reason: String,
    absent: bool,
}

impl From<String> for Miss {
    fn from(reason: String) -> Self {
        Miss {
            reason,
            absent: false,
        }
    }
}

impl From<&str> for Miss {
    fn from(reason: &str) -> Self {
        Miss::from(reason.to_string())
    }
}

fn absent(reason: String) -> Miss {
    Miss {
        reason,
        absent: true,
    }
}

/// The work an evaluation did, counted so its cost can be checked against its input
/// (the series of the selected names and the samples in the windows) without a clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// Series looked at (each series of a selected metric name, once per selector).
    pub series: u64,
    /// Stored samples read.
    pub samples: u64,
}

/// What one evaluation reads from and counts into.
struct Cx<'a> {
    view: View<'a>,
    now: SystemTime,
    work: Cell<Work>,
}

impl Cx<'_> {
    fn count(&self, series: u64, samples: u64) {
        let w = self.work.get();
        self.work.set(Work {
            series: w.series + series,
            samples: w.samples + samples,
        });
    }
}

enum Val {
    Scalar(f64),
    Vector(Vec<Point>),
}

impl Val {
    fn scalar(self) -> f64 {
        match self {
            Val::Scalar(v) => v,
            Val::Vector(ps) => ps.iter().map(|p| p.value).sum(),
        }
    }
}

/// Evaluate `expr` at `now`: a number, or why there is none.
pub fn eval(expr: &Expr, view: View<'_>, now: SystemTime) -> Result<f64, String> {
    eval_counted(expr, view, now).0
}

/// [`eval`], and the work it took.
pub fn eval_counted(expr: &Expr, view: View<'_>, now: SystemTime) -> (Result<f64, String>, Work) {
    let cx = Cx {
        view,
        now,
        work: Cell::new(Work::default()),
    };
    let r = eval_val(expr, &cx).map_err(|m| m.reason).and_then(|v| {
        let v = v.scalar();
        if v.is_nan() {
            return Err("the result is NaN".to_string());
        }
        Ok(v)
    });
    (r, cx.work.get())
}

fn eval_val(expr: &Expr, cx: &Cx<'_>) -> Result<Val, Miss> {
    Ok(match expr {
        Expr::Number(n) => Val::Scalar(*n),
        Expr::Select(sel) => Val::Vector(select(sel, cx, false)?),
        Expr::Alive(sel) => Val::Vector(select(sel, cx, true)?),
        Expr::Rate {
            sel,
            window,
            per_second,
        } => Val::Vector(rate(sel, *window, *per_second, cx)?),
        Expr::Agg(agg, inner) => Val::Scalar(aggregate(*agg, eval_val(inner, cx)?)),
        Expr::Quantile(q, inner) => match eval_val(inner, cx)? {
            Val::Vector(ps) => Val::Scalar(quantile(*q, &ps)?),
            Val::Scalar(_) => return Err("histogram_quantile needs _bucket series".into()),
        },
        Expr::Neg(e) => Val::Scalar(-eval_val(e, cx)?.scalar()),
        Expr::Bin(op, ea, eb) => {
            let (a, b) = (eval_val(ea, cx)?, eval_val(eb, cx)?);
            match (ea.as_ref(), a, eb.as_ref(), b) {
                // A number literal with series applies per series (PromQL's scalar/vector).
                (Expr::Number(n), _, _, Val::Vector(ps)) => {
                    Val::Vector(per_series(ps, |v| arith(*op, *n, v))?)
                }
                (_, Val::Vector(ps), Expr::Number(n), _) => {
                    Val::Vector(per_series(ps, |v| arith(*op, v, *n))?)
                }
                (_, a, _, b) => Val::Scalar(arith(*op, a.scalar(), b.scalar())?),
            }
        }
        // Reduced to one number, so `(x or 0) / y` never turns into a per-series division.
        Expr::Or(a, b) => Val::Scalar(
            match eval_val(a, cx) {
                Err(m) if m.absent => eval_val(b, cx)?,
                other => other?,
            }
            .scalar(),
        ),
    })
}

fn arith(op: BinOp, a: f64, b: f64) -> Result<f64, Miss> {
    Ok(match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div if b == 0.0 => {
            return Err(format!("division by zero ({a} / 0): nothing to compare against").into())
        }
        BinOp::Div => a / b,
    })
}

fn per_series(ps: Vec<Point>, f: impl Fn(f64) -> Result<f64, Miss>) -> Result<Vec<Point>, Miss> {
    ps.into_iter()
        .map(|p| {
            Ok(Point {
                value: f(p.value)?,
                labels: p.labels,
            })
        })
        .collect()
}

fn aggregate(agg: Agg, v: Val) -> f64 {
    let values: Vec<f64> = match v {
        Val::Scalar(x) => vec![x],
        Val::Vector(ps) => ps.into_iter().map(|p| p.value).collect(),
    };
    let n = values.len() as f64;
    match agg {
        Agg::Sum => values.iter().sum(),
        Agg::Count => n,
        Agg::Avg => values.iter().sum::<f64>() / n,
        Agg::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        Agg::Min => values.iter().copied().fold(f64::INFINITY, f64::min),
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.metric)?;
        if !self.matchers.is_empty() {
            let parts: Vec<String> = self
                .matchers
                .iter()
                .map(|m| {
                    let op = match m.op {
                        MatchOp::Eq => "=",
                        MatchOp::Ne => "!=",
                        MatchOp::Re => "=~",
                        MatchOp::NotRe => "!~",
                    };
                    format!("{}{op}{:?}", m.label, m.value)
                })
                .collect();
            write!(f, "{{{}}}", parts.join(","))?;
        }
        if let Some(r) = &self.role {
            write!(f, "@{r}")?;
        }
        Ok(())
    }
}

fn matches(sel: &Selector, s: &SeriesKey) -> bool {
    s.name == sel.metric
        && sel
            .matchers
            .iter()
            .all(|m| m.accepts(s.label(&m.label).unwrap_or("")))
}

fn targets<'a>(sel: &Selector, cx: &Cx<'a>) -> Result<Vec<TargetView<'a>>, String> {
    let ts: Vec<_> = cx.view.targets(sel.role.as_deref()).collect();
    if ts.is_empty() {
        return Err(match &sel.role {
            Some(r) => format!("{sel}: no target has role {r:?}"),
            None => format!("{sel}: no targets to scrape"),
        });
    }
    Ok(ts)
}

/// The latest scrape of a target when it read a page, or why the target gives nothing.
fn latest_page<'a>(sel: &Selector, t: &TargetView<'a>) -> Result<&'a Scrape, String> {
    match t.latest() {
        None => Err(format!("{sel}: {} not scraped yet", t.describe())),
        Some(s) => match &s.page {
            Ok(()) => Ok(s),
            Err(e) => Err(format!("{sel}: {} is down: {e}", t.describe())),
        },
    }
}

fn select(sel: &Selector, cx: &Cx<'_>, alive_only: bool) -> Result<Vec<Point>, Miss> {
    let mut out = Vec::new();
    for t in targets(sel, cx)? {
        if alive_only && t.latest().is_none_or(|s| s.page.is_err()) {
            continue;
        }
        if sel.metric == "up" {
            // Synthesised like Prometheus's own `up`, so "how many replicas are down" is
            // answerable precisely when the others give nothing.
            let up = t.latest().is_some_and(|s| s.page.is_ok());
            let endpoint = &t.target.endpoint;
            let key = SeriesKey {
                name: "up".into(),
                labels: vec![
                    ("instance".into(), endpoint.instance.clone()),
                    ("role".into(), endpoint.role.clone()),
                ]
                .into(),
            };
            if matches(sel, &key) {
                out.push(Point {
                    labels: key.labels,
                    value: if up { 1.0 } else { 0.0 },
                });
            }
            continue;
        }
        let latest = latest_page(sel, &t)?;
        for series in t.target.series.named(&sel.metric) {
            cx.count(1, 1);
            if !matches(sel, &series.key) {
                continue;
            }
            let Some(value) = series.value_at(latest.seq) else {
                continue;
            };
            if value.is_nan() {
                return Err(format!("{sel}: {} reports NaN", t.describe()).into());
            }
            out.push(Point {
                labels: series.key.labels.clone(),
                value,
            });
        }
    }
    if out.is_empty() {
        return Err(absent(format!("{sel}: no such series")));
    }
    Ok(out)
}

/// Per-series increase (or rate) over the scrapes of the last `window`: each series' own
/// points in the window are read, nothing else.
fn rate(
    sel: &Selector,
    window: Duration,
    per_second: bool,
    cx: &Cx<'_>,
) -> Result<Vec<Point>, Miss> {
    let now = cx.now;
    let from = now.checked_sub(window).unwrap_or(SystemTime::UNIX_EPOCH);
    let mut out = Vec::new();
    let mut scrapes_seen = usize::MAX;
    let mut any_series = false;
    for t in targets(sel, cx)? {
        let latest = latest_page(sel, &t)?;
        // The scrapes in the window that read a page: (number, when).
        let pages: Vec<(u64, SystemTime)> = t
            .scrapes()
            .filter(|s| s.at >= from && s.at <= now && s.page.is_ok())
            .map(|s| (s.seq, s.at))
            .collect();
        scrapes_seen = scrapes_seen.min(pages.len());
        let span = pages.first().zip(pages.last()).map(|(a, b)| (a.0, b.0));
        for series in t.target.series.named(&sel.metric) {
            cx.count(1, 0);
            if !matches(sel, &series.key) {
                continue;
            }
            match series.value_at(latest.seq) {
                None => continue,
                Some(v) if v.is_nan() => {
                    return Err(format!("{sel}: {} reports NaN", t.describe()).into())
                }
                Some(_) => any_series = true,
            }
            let Some((first, last)) = span else { continue };
            let mut points: Vec<(SystemTime, f64)> = Vec::new();
            for (seq, value) in series.points_between(first, last) {
                cx.count(0, 1);
                let Ok(i) = pages.binary_search_by_key(&seq, |p| p.0) else {
                    continue;
                };
                if value.is_nan() {
                    continue;
                }
                // prometheus-client creates a labelled counter on its first increment:
                // absent on the page before means it was zero then.
                if points.is_empty() && i > 0 {
                    points.push((pages[i - 1].1, 0.0));
                }
                points.push((pages[i].1, value));
            }
            if let Some(v) = increase(&points, per_second) {
                out.push(Point {
                    labels: series.key.labels.clone(),
                    value: v,
                });
            }
        }
    }
    if !any_series {
        return Err(absent(format!("{sel}: no such series")));
    }
    if out.is_empty() {
        let have = if scrapes_seen == usize::MAX {
            0
        } else {
            scrapes_seen
        };
        return Err(Miss::from(format!(
            "{sel}: a rate needs two scrapes with the series within the last {}, have {have}",
            crate::util::duration::format(window)
        )));
    }
    Ok(out)
}

/// Increase of a counter over points (oldest first); a drop is a reset, after which the
/// counter counted up from zero. `None` with fewer than two points or no time between them.
fn increase(points: &[(SystemTime, f64)], per_second: bool) -> Option<f64> {
    let (first, last) = (points.first()?, points.last()?);
    let span = last.0.duration_since(first.0).ok()?.as_secs_f64();
    if points.len() < 2 || span <= 0.0 {
        return None;
    }
    let total: f64 = points
        .windows(2)
        .map(|w| {
            let (prev, cur) = (w[0].1, w[1].1);
            if cur >= prev {
                cur - prev
            } else {
                cur
            }
        })
        .sum();
    Some(if per_second { total / span } else { total })
}

/// Prometheus's histogram_quantile: buckets summed by `le`, linear inside a bucket.
/// Sorted once, then equal bounds merged: n log n in the series, however many bounds.
fn quantile(q: f64, points: &[Point]) -> Result<f64, String> {
    let mut all: Vec<(f64, f64)> = Vec::with_capacity(points.len());
    for p in points {
        let le = p
            .labels
            .iter()
            .find(|(k, _)| k == "le")
            .ok_or("histogram_quantile needs _bucket series (with an le label)")?;
        let bound = match le.1.as_str() {
            "+Inf" | "Inf" => f64::INFINITY,
            s => s
                .parse()
                .map_err(|_| format!("bad bucket bound le={s:?}"))?,
        };
        all.push((bound, p.value));
    }
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut buckets: Vec<(f64, f64)> = Vec::with_capacity(all.len());
    for (bound, value) in all {
        match buckets.last_mut() {
            Some(b) if b.0 == bound => b.1 += value,
            _ => buckets.push((bound, value)),
        }
    }
    // Rates of cumulative buckets can dip by noise; cumulative counts never decrease.
    let mut running = 0.0f64;
    for b in buckets.iter_mut() {
        running = running.max(b.1);
        b.1 = running;
    }
    let Some(&(last_bound, total)) = buckets.last() else {
        return Err("histogram_quantile: no buckets".into());
    };
    if last_bound != f64::INFINITY {
        return Err("histogram_quantile: no le=\"+Inf\" bucket".into());
    }
    if total <= 0.0 {
        return Err("histogram_quantile: no observations in the window".into());
    }
    let rank = q * total;
    let i = buckets
        .iter()
        .position(|b| b.1 >= rank)
        .unwrap_or(buckets.len() - 1);
    if buckets[i].0 == f64::INFINITY {
        // Above the highest finite bound: Prometheus answers with that bound.
        return match i.checked_sub(1) {
            Some(j) => Ok(buckets[j].0),
            None => Err("histogram_quantile: only a +Inf bucket".into()),
        };
    }
    let (lower, below) = match i.checked_sub(1) {
        Some(j) => buckets[j],
        None => (0.0f64.min(buckets[0].0), 0.0),
    };
    let (upper, count) = buckets[i];
    if count <= below {
        return Ok(upper);
    }
    Ok(lower + (upper - lower) * (rank - below) / (count - below))
}
