//! Human-readable output: the per-tick table of the storm, a condensed table of the
//! continuous run (one row per window so 300 s fit on a screen), and the summary lines.

use super::report::SystemReport;
use super::scenarios::retry_storm::StormReport;
use super::scenarios::Report;
use std::fmt::Write;

pub fn render(r: &Report) -> String {
    match r {
        Report::Storm(s) => storm(s),
        Report::System(s) => system(s),
        Report::Drill(d) => d.text(),
    }
}

/// A plain-text table: the first column left-aligned, the others right-aligned, each as
/// wide as its widest cell, two spaces apart.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let cols = headers.len();
    let mut width: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, cell) in width.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut o = String::new();
    let line = |o: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let mut parts = Vec::with_capacity(cols);
        for (i, (cell, w)) in cells.zip(&width).enumerate() {
            parts.push(if i == 0 {
                format!("{cell:<w$}")
            } else {
                format!("{cell:>w$}")
            });
        }
        let _ = writeln!(o, "{}", parts.join("  ").trim_end());
    };
    line(&mut o, &mut headers.iter().copied());
    for r in rows {
        line(&mut o, &mut r.iter().map(String::as_str));
    }
    o
}

fn opt_s(v: Option<f64>) -> String {
    v.map_or("never".into(), |v| format!("{v} s"))
}

pub fn storm(r: &StormReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "scenario {} (policy {}, seed {})",
        r.scenario, r.policy, r.seed
    );
    let _ = writeln!(
        o,
        "{:>4}  {:>8}  {:>7}  {:>6}  {:>11}  {:>8}",
        "tick", "arriving", "retries", "served", "turned away", "given up"
    );
    for t in &r.series {
        let _ = writeln!(
            o,
            "{:>4}  {:>8}  {:>7}  {:>6}  {:>11}  {:>8}",
            t.tick, t.arriving, t.retries, t.served, t.turned_away, t.given_up
        );
    }
    let _ = writeln!(o, "peak calls in a tick: {}", r.peak_calls);
    let _ = writeln!(
        o,
        "calls given up: {} of {} (served {}, pending {})",
        r.given_up, r.calls, r.served, r.pending
    );
    let _ = match r.settled_ticks {
        Some(n) => writeln!(o, "settled: {n} ticks after the server returned"),
        None => writeln!(
            o,
            "settled: never (some calls still turned away at the end)"
        ),
    };
    o
}

pub fn system(r: &SystemReport) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "scenario {} (seed {})", r.scenario, r.seed);
    let window = (r.series.len() / 30).max(1);
    let _ = writeln!(
        o,
        "{:>6}  {:>9}  {:>8}  {:>8}  {:>8}  {:>9}  {:>8}  {:>7}  {:>8}  {:>8}  {:>6}",
        "t(s)",
        "arrive/s",
        "retry/s",
        "useful/s",
        "wasted/s",
        "timeout/s",
        "reject/s",
        "queue",
        "in retry",
        "capacity",
        "gate"
    );
    for chunk in r.series.chunks(window) {
        let n = chunk.len() as f64;
        let avg =
            |f: fn(&super::report::Second) -> u64| chunk.iter().map(f).sum::<u64>() as f64 / n;
        let Some(last) = chunk.last() else { continue };
        let gate = last
            .gate_rate
            .map_or("open".to_string(), |g| format!("{g:.0}"));
        let _ = writeln!(
            o,
            "{:>6}  {:>9.0}  {:>8.0}  {:>8.0}  {:>8.0}  {:>9.0}  {:>8.0}  {:>7}  {:>8}  {:>8.0}  {:>6}",
            chunk[0].t,
            avg(|s| s.arriving),
            avg(|s| s.retries),
            avg(|s| s.useful),
            avg(|s| s.abandoned),
            avg(|s| s.timeouts),
            avg(|s| s.rejected),
            last.queue,
            last.in_retry,
            last.capacity,
            gate
        );
    }
    let _ = writeln!(
        o,
        "(rows average {window} s; queue, in retry, capacity and gate at the row's end)"
    );
    let _ = writeln!(o, "peak calls in a second: {}", r.peak_calls);
    let t = &r.totals;
    let _ = writeln!(
        o,
        "polls: {} started, {} served, {} given up, {} pending; {} attempts, {} served after the client left",
        t.calls, t.served, t.given_up, t.pending, t.attempts, t.abandoned_work
    );
    let _ = writeln!(
        o,
        "settled (first clean second) after {}: {}",
        r.reference.replace('_', " "),
        opt_s(r.settled_s)
    );
    if r.recovered {
        let _ = writeln!(
            o,
            "recovered: yes, {} after {}",
            opt_s(r.time_to_recover_s),
            r.reference.replace('_', " ")
        );
    } else {
        let _ = writeln!(o, "recovered: no (still failing at the end of the run)");
    }
    if r.reference == "plan_start" {
        let _ = writeln!(o, "relapses during the ramp: {}", r.relapses);
    }
    o
}
