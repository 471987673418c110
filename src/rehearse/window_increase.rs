//! How much a counter rose over a window of the rehearsal (the runbook's, for the work it
//! dropped on purpose), from the recorder's scrapes.
//!
//! Why it exists: a window's increase must cover the whole window, not only the scrapes
//! inside it. Summing the deltas between the scrapes taken inside the window loses what
//! happened between the window's start and its first scrape (the gate's block step rejects
//! from its first request on), after its last scrape, and across any scrape a page did not
//! answer (a busy gate, a restarting replica). So the increase is read per target from the
//! last scrape it answered at or before the window's start to the first it answered at or
//! after the window's end, and a window those scrapes cannot cover is unknown with its
//! reason, never a 0 that reads as a measurement.

use super::series::{RawScrape, Role};
use std::collections::BTreeSet;

/// Why a window's increase is not known.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Unmeasured {
    #[error("no {role} page was scraped")]
    NoTarget { role: &'static str },
    #[error("no scrape of {instance} answered at or before the window's start")]
    NoStart { instance: String },
    #[error(
        "{instance} answered no scrape at or after the window's end, nor the recording's last \
         (its last answer {:.2} s before the end)", to_s - last_s
    )]
    NoEnd {
        instance: String,
        last_s: f64,
        to_s: f64,
    },
}

/// The increase of the counter `name{labels}` summed over every `role` target, from the
/// window's start `from_s` to its end `to_s` (rehearsal clock), read from `scrapes` (in any
/// order; the recorder's grid and its probes may be chained).
///
/// For each target: from the last scrape whose pages were all read by `from_s` (its values
/// are of an instant at or before the start) to the first whose tick is at or after `to_s`
/// (of an instant at or after the end), or, where the recording stops before `to_s`, the
/// recording's last scrape, which the target must have answered. In between, every scrape
/// the target answered counts, reset-aware (a counter that went down was restarted: its
/// increase is its new value). A page that answered without the series reads 0: a
/// counter appears on its first increment (a Prometheus client's labelled child), so an
/// increase from an absent series counts from 0. A page with no points at all did not
/// answer (an unparsable page reads so), or it would count a counter's whole value.
///
/// A counter reset to a value at or above its last reading reads as no reset; only a
/// process's start time would tell it apart, and the pages do not carry one.
pub fn window_increase(
    scrapes: &[&RawScrape],
    role: Role,
    name: &str,
    labels: &[(&str, &str)],
    from_s: f64,
    to_s: f64,
) -> Result<f64, Unmeasured> {
    let mut ordered: Vec<&RawScrape> = scrapes.to_vec();
    ordered.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    let instances: BTreeSet<&str> = ordered
        .iter()
        .flat_map(|r| r.targets.iter())
        .filter(|t| t.role == role)
        .map(|t| t.instance.as_str())
        .collect();
    if instances.is_empty() {
        return Err(Unmeasured::NoTarget {
            role: role_name(role),
        });
    }
    let last_tick = ordered.last().map_or(f64::NEG_INFINITY, |r| r.t_s);
    let mut total = 0.0;
    for instance in instances {
        // (tick, read, value) at every scrape the target answered, oldest first.
        let readings: Vec<(f64, f64, f64)> = ordered
            .iter()
            .filter_map(|r| {
                counter_at(r, role, instance, name, labels).map(|v| (r.t_s, r.read_s, v))
            })
            .collect();
        let start = readings
            .iter()
            .rposition(|&(_, read, _)| read <= from_s)
            .ok_or_else(|| Unmeasured::NoStart {
                instance: instance.into(),
            })?;
        let after = &readings[start + 1..];
        let end = match after.iter().position(|&(tick, _, _)| tick >= to_s) {
            Some(i) => start + 1 + i,
            None => match after.last() {
                Some(&(tick, _, _)) if tick >= last_tick => readings.len() - 1,
                _ => {
                    return Err(Unmeasured::NoEnd {
                        instance: instance.into(),
                        last_s: readings[readings.len() - 1].0,
                        to_s,
                    })
                }
            },
        };
        total += readings[start..=end]
            .windows(2)
            .map(|w| {
                let (b, n) = (w[0].2, w[1].2);
                if n >= b {
                    n - b
                } else {
                    n
                }
            })
            .sum::<f64>();
    }
    Ok(total)
}

/// The counter's value on `instance`'s page at `r`: `None` when the page did not answer
/// (or carried no points at all), 0 when it answered without the series.
fn counter_at(
    r: &RawScrape,
    role: Role,
    instance: &str,
    name: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    let page = r
        .targets
        .iter()
        .find(|t| t.role == role && t.instance == instance)?
        .points
        .as_ref()
        .filter(|p| !p.is_empty())?;
    Some(
        page.iter()
            .filter(|p| p.name == name && p.matches(labels))
            .map(|p| p.value)
            .sum(),
    )
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Gate => "gate",
        Role::Service => "service",
        Role::Clients => "clients",
    }
}

#[cfg(test)]
#[path = "window_increase_tests.rs"]
mod tests;
