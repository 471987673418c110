//! Asking the operator at a terminal for plan inputs nothing else supplied (a service
//! stuck before anyone looked, with nothing declared and no metrics history): show the
//! evidence there is, then ask for each missing number. Without a terminal nobody is
//! asked and the run refuses, naming the runbook field and the flag.

use recover::engine::prior::{Ask, Question};
use recover::plan::inputs::Input;
use recover::plan::Overrides;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

/// An asker reading stdin, when stdin is a terminal.
pub fn on_terminal() -> Option<Ask> {
    if !std::io::stdin().is_terminal() {
        return None;
    }
    Some(Arc::new(|q: &Question| {
        let mut err = std::io::stderr();
        let _ = writeln!(err, "\nmissing plan inputs: {}", q.missing);
        if !q.evidence.is_empty() {
            let _ = writeln!(err, "what the metrics say:");
            for line in &q.evidence {
                let _ = writeln!(err, "  {line}");
            }
        }
        let mut out = Overrides::default();
        for input in &q.missing.missing {
            let (what, slot) = match input {
                Input::ArrivalRate => ("arrival rate, req/s", &mut out.arrival_rate),
                Input::CapacityCold => (
                    "capacity right after a restart (cold), req/s",
                    &mut out.capacity_cold,
                ),
                Input::K => (
                    "work amplification k (cost per request when overloaded / healthy, >= 1)",
                    &mut out.k,
                ),
            };
            *slot = prompt(what);
        }
        out
    }))
}

/// Ask once; an empty or invalid answer gives nothing (the run then refuses).
fn prompt(what: &str) -> Option<f64> {
    eprint!("{what}? (empty to refuse) ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).ok()?;
    match line.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Some(v),
        _ if line.trim().is_empty() => None,
        _ => {
            eprintln!("not a number above zero: {:?}", line.trim());
            None
        }
    }
}
