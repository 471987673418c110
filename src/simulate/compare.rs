//! `--compare`: the "if I change only one thing, which one?" table. Each variant is the
//! scenario with exactly one `--set` applied, run with the same seed, so the rows differ
//! only in that one thing.

use super::error::SimError;
use super::scenarios::{Report, Scenario};
use crate::util::duration;
use serde::Serialize;
use std::fmt::Write;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareRow {
    pub variant: String,
    /// The one change, as `key=value` (empty for the baseline).
    pub change: String,
    pub recovered: bool,
    pub time_to_recover_s: Option<f64>,
    pub peak_calls: u64,
    pub given_up: u64,
    /// Work the server spent on requests nobody waited for (0 in the tick model).
    pub wasted: u64,
    /// The same change made only at `plan_at`, once the system is stuck: does it get out,
    /// and how long after the change? (Continuous model only.)
    pub recovers_if_changed_when_stuck: Option<bool>,
    pub time_to_recover_after_change_s: Option<f64>,
}

/// The one-change variants for a scenario: (label, key, value).
fn variants(s: &Scenario) -> Vec<(String, String, String)> {
    let v = |l: &str, k: &str, val: String| (l.to_string(), k.to_string(), val);
    match s {
        Scenario::Storm { params, .. } => {
            let mut out: Vec<_> = super::Policy::ALL
                .into_iter()
                .filter(|p| *p != params.policy)
                .map(|p| v(&format!("policy {p}"), "policy", p.name().to_string()))
                .collect();
            out.push(v(
                "fewer tries",
                "max_tries",
                (params.max_tries / 2).max(1).to_string(),
            ));
            out.push(v(
                "shed instead of collapse",
                "overload_served",
                params.room.to_string(),
            ));
            out
        }
        Scenario::System { params: p, .. } => vec![
            v(
                "client timeout x4",
                "timeout",
                duration::format(p.timeout * 4),
            ),
            v(
                "retry delay x10",
                "retry_delay",
                duration::format(p.retry_delay * 10),
            ),
            v("jitter", "jitter", (!p.jitter).to_string()),
            v("exponential backoff", "backoff", (!p.backoff).to_string()),
            v("retry budget 10%", "retry_budget", "0.1".into()),
            v("load shedding", "shedding", (!p.shedding).to_string()),
            v("overload factor 1", "overload_factor", "1".into()),
        ],
        // A drill compares its own alternatives: `Drill::compare`.
        Scenario::Drill { .. } => vec![],
    }
}

fn row(variant: String, change: String, r: &Report) -> CompareRow {
    match r {
        Report::Storm(s) => CompareRow {
            variant,
            change,
            recovered: s.recovered,
            time_to_recover_s: s.time_to_recover_s,
            peak_calls: u64::from(s.peak_calls),
            given_up: u64::from(s.given_up),
            wasted: 0,
            recovers_if_changed_when_stuck: None,
            time_to_recover_after_change_s: None,
        },
        Report::System(s) => CompareRow {
            variant,
            change,
            recovered: s.recovered,
            time_to_recover_s: s.time_to_recover_s,
            peak_calls: s.peak_calls,
            given_up: s.given_up,
            wasted: s.totals.abandoned_work,
            recovers_if_changed_when_stuck: None,
            time_to_recover_after_change_s: None,
        },
        Report::Drill(d) => CompareRow {
            variant,
            change,
            recovered: d.time_to_recover_s().is_some(),
            time_to_recover_s: d.time_to_recover_s(),
            peak_calls: 0,
            given_up: 0,
            wasted: 0,
            recovers_if_changed_when_stuck: None,
            time_to_recover_after_change_s: None,
        },
    }
}

/// Run the baseline and every one-change variant with `seed`.
pub fn compare(base: &Scenario, seed: u64) -> Result<Vec<CompareRow>, SimError> {
    let mut rows = vec![row("baseline".into(), String::new(), &base.run(seed))];
    for (label, key, value) in variants(base) {
        let mut s = base.clone();
        s.set(&key, &value)?;
        let mut r = row(label, format!("{key}={value}"), &s.run(seed));
        if let Some(late) = base.run_changed_at_plan(&s, seed) {
            r.recovers_if_changed_when_stuck = Some(late.recovered);
            r.time_to_recover_after_change_s = late.time_to_recover_s;
        }
        rows.push(r);
    }
    Ok(rows)
}

/// The table, with times in the scenario's unit (seconds, or ticks for the tick model).
pub fn render(scenario: &Scenario, seed: u64, rows: &[CompareRow]) -> String {
    let mut o = String::new();
    let unit = scenario.time_unit();
    let late = rows
        .iter()
        .any(|r| r.recovers_if_changed_when_stuck.is_some());
    let _ = writeln!(
        o,
        "scenario {} (seed {seed}): one change at a time",
        scenario.name()
    );
    if late {
        let at = match scenario {
            Scenario::System { params, .. } => crate::util::duration::format(params.plan_at),
            Scenario::Storm { .. } | Scenario::Drill { .. } => String::new(),
        };
        let _ = writeln!(
            o,
            "\"from start\": the change is in place before the trigger; \"once stuck\": made at {at} (plan_at)"
        );
    }
    let _ = write!(
        o,
        "{:<24}  {:<21}  {:>10}  {:>10}  {:>6}  {:>8}  {:>7}",
        "variant", "change", "from start", "recovery", "peak", "given up", "wasted"
    );
    if late {
        let _ = write!(o, "  {:>10}  {:>14}", "once stuck", "recovery");
    }
    o.push('\n');
    let yes = |b: bool| if b { "recovers" } else { "stuck" };
    let ttr = |t: Option<f64>| t.map_or("-".into(), |t| format!("{t} {unit}"));
    for r in rows {
        let _ = write!(
            o,
            "{:<24}  {:<21}  {:>10}  {:>10}  {:>6}  {:>8}  {:>7}",
            r.variant,
            r.change,
            yes(r.recovered),
            ttr(r.time_to_recover_s),
            r.peak_calls,
            r.given_up,
            r.wasted
        );
        if late {
            let _ = match r.recovers_if_changed_when_stuck {
                Some(b) => write!(
                    o,
                    "  {:>10}  {:>14}",
                    yes(b),
                    ttr(r.time_to_recover_after_change_s)
                ),
                None => write!(o, "  {:>10}  {:>14}", "-", "-"),
            };
        }
        o.push('\n');
    }
    o
}
