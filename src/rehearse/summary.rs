//! The human summary printed on stdout after a rehearsal: phases and their durations, k
//! and the shed, work dropped on purpose, time to recover against the lower bound.
//!
//! Why it exists: the person who ran `recover rehearse` reads this first; it must answer
//! "did it work, how fast, and at what cost" in a dozen lines.

use super::report::{LowerBound, ReleaseStep, Report, SlowReplicaFacts};
use std::fmt::Write;

/// The first word: a trigger that never left the system stuck is not a failed recovery.
fn headline(recovered: bool, not_stuck: bool) -> &'static str {
    match (recovered, not_stuck) {
        (_, true) => "NOT STUCK: nothing to recover",
        (true, false) => "RECOVERED",
        (false, false) => "NOT RECOVERED",
    }
}

/// Render the summary (ends with a newline).
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let verdict = headline(r.recovered, r.not_stuck.is_some());
    let _ = writeln!(
        out,
        "recover rehearse: {verdict} (runbook {}, scenario {}, {:.0} s wall time)",
        r.runbook, r.scenario.name, r.wall_time_s
    );
    if let Some(f) = &r.failure {
        let _ = writeln!(out, "  why: {f}");
    }
    let sc = &r.scenario;
    let _ = writeln!(
        out,
        "  system: {} workers ({:.1} req/s demand) -> gate -> {} config-service replica(s), {:.0} req/s warm capacity; client timeout {}",
        sc.workers, sc.demand_per_s, sc.replicas, sc.capacity_per_s, secs(sc.client_timeout_s)
    );
    let zero = match &r.slow_replica {
        Some(_) => "the replica was made slow",
        None => "the trigger fired",
    };
    let _ = writeln!(out, "  phases (t = 0 when {zero}):");
    for p in &r.phases {
        let _ = writeln!(
            out,
            "    {:<9} {:>7} .. {:>7}  {:>7}  {}",
            p.name,
            secs(p.start_s),
            secs(p.end_s),
            secs(p.end_s - p.start_s),
            p.note
        );
    }
    if let Some(slow) = &r.slow_replica {
        slow_replica(&mut out, r, slow);
        return out;
    }
    if let (Some(a), Some(after)) = (r.attached_s, r.scenario.attach_after_s) {
        let _ = writeln!(
            out,
            "  attached at {} ({} after the trigger ended), with no earlier samples; workers' attempt header: {}",
            secs(a),
            secs(after),
            r.scenario.attempt_header
        );
    }
    match r.detected_stuck_s {
        Some(d) => {
            let _ = writeln!(
                out,
                "  detection: stuck {} after the trigger ended",
                secs(d)
            );
            if let Some(f) = &r.detection {
                let _ = writeln!(
                    out,
                    "    {}; said {} after its persist/grace window closed (scrape interval {})",
                    f.summary,
                    opt(f.after_window_s, secs),
                    secs(f.scrape_interval_s)
                );
            }
        }
        None => {
            let _ = writeln!(out, "  detection: never said stuck");
        }
    }
    let _ = writeln!(
        out,
        "  k {}, shed {} (admit {} at first)",
        opt(r.k, |k| format!("{k:.1}")),
        opt(r.shed_fraction, |s| format!("{:.0}%", s * 100.0)),
        opt(r.admit_rate_per_s, |a| format!("{a:.1} req/s")),
    );
    if let Some(i) = &r.plan_inputs {
        let _ = writeln!(out, "  plan inputs:");
        for line in i.describe() {
            let _ = writeln!(out, "    {line}");
        }
    }
    dropped(&mut out, r);
    steps(&mut out, r);
    let ratio = match (r.time_to_recover_s, r.lower_bound_s) {
        (Some(t), Some(lb)) if lb > 0.0 => format!(" ({:.1}x)", t / lb),
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "  time to recover {} vs lower bound {}{ratio}; relapses {} (ramp step-backs {}; p99 over the timeout {} after recovery began)",
        opt(r.time_to_recover_s, secs),
        opt(r.lower_bound_s, secs),
        r.relapses,
        r.ramp_step_backs,
        secs(r.p99_over_timeout_s)
    );
    if let Some(lb) = &r.lower_bound {
        let paths: Vec<String> = lb
            .paths
            .iter()
            .map(|p| format!("{} {}", p.name, opt(p.time_s, secs)))
            .collect();
        let _ = writeln!(
            out,
            "  lower bound on the {} scrape grid, fluid {} (lowest path: {}): {}",
            secs(lb.record_interval_s),
            secs(lb.fluid_s),
            lb.lowest,
            paths.join(", ")
        );
        let _ = writeln!(out, "    retry loop in the bound: {}", retry_loop(lb));
    }
    if let Some(u) = &r.under_lower_bound {
        let _ = writeln!(out, "  INCONSISTENT: {u}");
    }
    if let Some(why) = &r.k_unknown {
        let _ = writeln!(out, "  k {why}");
    }
    if let Some(why) = &r.predicted_unknown {
        let _ = writeln!(out, "  simulator prediction {why}");
    }
    if let Some(p) = r.predicted_time_to_recover_s {
        let _ = writeln!(out, "  simulator predicted {}", secs(p));
    }
    if !r.baselines.is_empty() {
        let _ = writeln!(out, "  baselines (same trigger):");
        for (name, b) in &r.baselines {
            let _ = writeln!(
                out,
                "    {:<16} {:<14} goodput/demand at the end {}  ({})",
                name,
                if b.recovered {
                    "recovered"
                } else {
                    "stayed stuck"
                },
                opt(b.goodput_ratio_end, |g| format!("{:.0}%", g * 100.0)),
                b.intervention
            );
        }
    }
    out
}

/// The slow-replica rehearsal's lines: what the detector named, the runbook, the p99s.
fn slow_replica(out: &mut String, r: &Report, s: &SlowReplicaFacts) {
    let _ = match (&s.detected, s.detected_after_s) {
        (Some(d), Some(t)) => writeln!(
            out,
            "  detected: slow_replica {d}, {} after {} was made {}x slower",
            secs(t),
            s.slowed,
            s.factor
        ),
        _ => writeln!(out, "  detected: no slow_replica verdict"),
    };
    if let Some(t) = s.runbook_s {
        let _ = writeln!(out, "  runbook: {}", secs(t));
    }
    steps(out, r);
    let _ = writeln!(
        out,
        "  p99: healthy {}, slowed with the gate's balancing {}, after the runbook {}; slowed behind round robin (baseline, no runbook) {}",
        ms(s.healthy_p99_s),
        ms(s.slowed_p99_s),
        ms(s.after_p99_s),
        ms(s.baseline_p99_s)
    );
    let _ = writeln!(
        out,
        "  recovered: {} (runbook done and p99 after within 2x the healthy p99)",
        if r.recovered { "yes" } else { "no" }
    );
}

/// Whether the bound read where the loop's clients stood, and its release steps (seconds
/// after the scrape it counts from: clients answerable before, clients released).
fn retry_loop(lb: &LowerBound) -> String {
    let phases = match (lb.client_phases_read, &lb.client_phases_unknown) {
        (true, _) => "clients' phases read".to_string(),
        (false, Some(why)) => format!("clients' phases not read ({why})"),
        (false, None) => "clients' phases not recorded".to_string(),
    };
    if lb.releases.is_empty() {
        return format!("{phases}; no release step binds");
    }
    let step =
        |r: &ReleaseStep| format!("{:.2} s ({:.0}, +{:.0})", r.at_s, r.answerable, r.released);
    // One line: the first steps and the last, the rest in report.json.
    let n = lb.releases.len();
    let mut shown: Vec<String> = lb.releases.iter().take(2).map(step).collect();
    if n > 3 {
        shown.push(format!("... {} more", n - 3));
    }
    if n > 2 {
        shown.push(step(&lb.releases[n - 1]));
    }
    format!(
        "{phases}; {n} release step(s) after the scrape at (answerable before, released) {}",
        shown.join(", ")
    )
}

/// Work dropped on purpose; a count that was not measured says so with why, and the
/// total then holds only the known parts.
fn dropped(out: &mut String, r: &Report) {
    let d = &r.dropped;
    let part = |field: &str, n: u64, what: &str| match d.unknown.get(field) {
        Some(why) => format!("{what} unknown ({why})"),
        None => format!("{n} {what}"),
    };
    let total = match d.unknown.is_empty() {
        true => format!("{}", r.dropped_requests),
        false => format!("at least {}", r.dropped_requests),
    };
    let _ = writeln!(
        out,
        "  dropped on purpose: {total} requests ({}, {})",
        part("drained", d.drained, "drained from queues"),
        part(
            "rejected_at_gate",
            d.rejected_at_gate,
            "rejected at the gate"
        )
    );
}

fn steps(out: &mut String, r: &Report) {
    if r.steps.is_empty() {
        return;
    }
    let _ = writeln!(out, "  steps:");
    for s in &r.steps {
        let _ = writeln!(
            out,
            "    {:<24} {:>7} .. {:>7}  {}",
            s.name,
            secs(s.start_s),
            secs(s.end_s),
            s.outcome
        );
    }
}

fn ms(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |s| format!("{:.0} ms", s * 1000.0))
}

fn secs(s: f64) -> String {
    format!("{s:.1} s")
}

fn opt<T: Copy>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "n/a".to_string())
}

#[cfg(test)]
mod headline_tests {
    #[test]
    fn a_system_never_stuck_is_not_called_unrecovered() {
        assert_eq!(
            super::headline(false, true),
            "NOT STUCK: nothing to recover"
        );
        assert_eq!(super::headline(false, false), "NOT RECOVERED");
        assert_eq!(super::headline(true, false), "RECOVERED");
    }
}

#[cfg(test)]
#[path = "summary_tests.rs"]
mod tests;
