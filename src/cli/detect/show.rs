//! How `recover detect` shows a verdict: in words (the verdict, the windows used, each
//! estimate with where it came from, the evidence) or as JSON with the windows beside it.

use super::{Failure, Output};
use recover::detect::windows::Windows;
use recover::detect::Verdict;
use recover::exit::Exit;

/// The verdict as JSON, with the windows used beside its fields.
#[derive(serde::Serialize)]
struct Shown<'a> {
    #[serde(flatten)]
    verdict: &'a Verdict,
    #[serde(skip_serializing_if = "Option::is_none")]
    windows: Option<&'a Windows>,
}

pub fn print_verdict(
    v: &Verdict,
    windows: Option<&Windows>,
    output: Output,
) -> Result<(), Failure> {
    match output {
        Output::Json => {
            let text = serde_json::to_string_pretty(&Shown {
                verdict: v,
                windows,
            })
            .map_err(|e| Failure::new(Exit::Failed, e))?;
            println!("{text}");
        }
        Output::Text => {
            println!("{}: {}", v.verdict.as_str(), v.summary);
            if let Some(w) = windows {
                println!("{}", w.describe());
            }
            for line in estimate_lines(v) {
                println!("{line}");
            }
            println!("evidence:");
            for e in &v.evidence {
                println!("  {}", e.describe());
            }
        }
    }
    Ok(())
}

/// One line per estimate: its value and whether it was measured, declared or assumed, and
/// from what.
fn estimate_lines(v: &Verdict) -> Vec<String> {
    let s = &v.sources;
    let line = |name: &str,
                unit: &str,
                value: Option<f64>,
                source: Option<recover::detect::Source>,
                from: Option<&str>| match value {
        Some(x) => format!(
            "{name} {x:.2}{unit} ({}{})",
            source.map_or("measured", |s| s.as_str()),
            from.map(|f| format!(": {f}")).unwrap_or_default()
        ),
        None => format!("{name} unknown"),
    };
    let range = v
        .k_range
        .filter(|[lo, hi]| hi > lo)
        .map(|[lo, hi]| format!("; candidates ranged {lo:.2} .. {hi:.2}"))
        .unwrap_or_default();
    vec![
        line(
            "arrival",
            " req/s",
            v.arrival_rate,
            s.arrival_rate,
            Some("offered rate now"),
        ),
        line(
            "capacity",
            " req/s",
            v.capacity,
            s.capacity,
            v.capacity_from.as_deref(),
        ),
        line(
            "capacity_cold",
            " req/s",
            v.capacity_cold,
            s.capacity_cold,
            v.capacity_cold_from.as_deref(),
        ),
        match (&v.k, &v.k_unknown) {
            (None, Some(why)) => format!("k unknown: {why}"),
            _ => line("k", "", v.k, s.k, v.k_from.as_deref()) + &range,
        },
        line(
            "demand",
            " req/s",
            v.demand,
            s.demand,
            v.demand_from.as_deref(),
        ),
    ]
}
