//! The text toolkit the scenarios write their reports with: a plain table and the number
//! formats every report shares. It knows no scenario.

use std::fmt::Write;

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

/// A report's first line: the scenario and the seed it ran, then what it ran.
pub fn heading(scenario: &str, seed: u64, what: &str) -> String {
    let mut o = format!("scenario {scenario} (seed {seed})");
    if !what.is_empty() {
        let _ = write!(o, ": {what}");
    }
    o.push('\n');
    o
}

/// A series table and, under it, the note that says how to read its rows: `(note)`.
pub fn noted_table(headers: &[&str], rows: &[Vec<String>], note: &str) -> String {
    let mut o = table(headers, rows);
    let _ = writeln!(o, "({note})");
    o
}

/// A series of seconds as a table that fits a screen: one row per [`window`] seconds, made
/// by `row` from that window's seconds, and the note under it, written knowing the window.
pub fn windowed_table<T>(
    series: &[T],
    headers: &[&str],
    row: impl FnMut(&[T]) -> Vec<String>,
    note: impl FnOnce(usize) -> String,
) -> String {
    let window = window(series.len());
    let rows: Vec<Vec<String>> = series.chunks(window).map(row).collect();
    noted_table(headers, &rows, &note(window))
}

/// A share in [0, 1] as a percentage: `49.7%`.
pub fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// `120 ms`, or `12.3 s` from ten seconds on.
pub fn fmt_ms(ms: f64) -> String {
    if ms >= 10_000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else {
        format!("{ms:.0} ms")
    }
}

/// Seconds, or `never`.
pub fn opt_s(v: Option<f64>) -> String {
    v.map_or("never".into(), |v| format!("{v} s"))
}

/// How many rows of a series fit a screen: one row per `window` items (about 30 rows).
pub fn window(len: usize) -> usize {
    (len / 30).max(1)
}
