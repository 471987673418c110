//! `postmortem.md`: the draft a person finishes, in the usual shape (summary, impact,
//! timeline, what was shed and why, what a human still has to do, open questions). Every
//! figure comes from the journal or the observed series and says which; one the run
//! cannot know is written "unknown" with the reason, never 0. Pure.

use super::convert::epoch_of;
use super::Evidence;
use crate::engine::journal::Event;
use crate::engine::recorded::describe;
use crate::engine::{Outcome, Phase};
use crate::rehearse::report::Report;
use crate::rehearse::series::Sample;
use std::fmt::Write;

fn secs(v: Option<f64>, why: &str) -> String {
    match v {
        Some(s) => format!("{s:.1} s"),
        None => format!("unknown ({why})"),
    }
}

/// The draft.
pub fn render(ev: &Evidence, report: &Report, samples: &[Sample]) -> String {
    let r = &ev.report;
    let run = report.run.as_ref();
    let unknown = |field: &str| {
        run.and_then(|f| f.unknown.get(field))
            .cloned()
            .unwrap_or_default()
    };
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# Postmortem draft: {} on {} (run {})\n",
        r.runbook, r.target, r.run_id
    );
    let _ = writeln!(
        o,
        "_Drafted by `recover report {}` from the run's journal{}. Times are UTC; `t` is seconds from the run's start ({}). Finish it before sharing: the open questions at the end are yours._\n",
        r.run_id,
        if ev.observed.is_ok() { " and the series it observed" } else { "" },
        r.started_at
    );

    // Summary.
    let _ = writeln!(o, "## Summary\n");
    let verdict = r
        .verdict
        .as_ref()
        .map(|v| {
            format!(
                "the detector said **{}** ({})",
                v.verdict.as_str(),
                v.summary
            )
        })
        .unwrap_or_else(|| "the run recorded no verdict".into());
    let plan = r
        .plan
        .as_ref()
        .map(|p| {
            format!(
                "the plan shed {:.0}% of arrivals, admitting {:.1} req/s at first",
                p.shed_fraction * 100.0,
                p.admit_rate
            )
        })
        .unwrap_or_else(|| "no plan was recorded".into());
    let _ = writeln!(
        o,
        "Runbook `{}` ran against `{}` from {} to {} and **{}**{}. Before acting, {verdict}; {plan}.\n",
        r.runbook,
        r.target,
        r.started_at,
        r.finished_at,
        r.outcome.words(),
        r.message.as_ref().map(|m| format!(" ({m})")).unwrap_or_default()
    );

    // Impact.
    let _ = writeln!(o, "## Impact\n");
    let _ = writeln!(o, "| figure | value | from |\n|---|---|---|");
    let stuck = run
        .and_then(|f| f.onset_s)
        .map(|on| report.steps.first().map(|s| s.start_s - on).unwrap_or(-on));
    let _ = writeln!(
        o,
        "| time stuck before the run acted | {} | onset to the first step |",
        secs(
            stuck,
            &run.map(|f| f.onset_from.clone()).unwrap_or_default()
        )
    );
    let _ = writeln!(
        o,
        "| time to recover | {} | first step's start to the last main step's end (journal) |",
        secs(report.time_to_recover_s, &unknown("time_to_recover_s"))
    );
    let drained = r.dropped_requests();
    let drained_text = match drained {
        Some(d) => format!("{d:.0}"),
        None => format!("unknown ({})", unknown("dropped.drained")),
    };
    let _ = writeln!(
        o,
        "| requests drained from queues (shed on purpose) | {drained_text} | the steps' `drained` figures (journal) |"
    );
    let rejected_known = !run.is_some_and(|f| f.unknown.contains_key("dropped.rejected_at_gate"));
    let rejected_text = if rejected_known {
        format!("{}", report.dropped.rejected_at_gate)
    } else {
        format!("unknown ({})", unknown("dropped.rejected_at_gate"))
    };
    let _ = writeln!(
        o,
        "| requests refused at the gate during the run (shed on purpose) | {rejected_text} | observed `gate_rejected_rate`, integrated from the first step to the end |"
    );
    let total = if drained.is_some() && rejected_known {
        format!("{}", report.dropped_requests)
    } else {
        "unknown (one of its parts is unknown)".into()
    };
    let _ = writeln!(
        o,
        "| requests shed on purpose in all | {total} | the two above |"
    );
    let peak = |f: fn(&Sample) -> Option<f64>| {
        samples
            .iter()
            .filter_map(f)
            .filter(|v| v.is_finite())
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    };
    for (what, v, unit) in [
        ("peak queue at the service", peak(|s| s.queue_depth), ""),
        (
            "peak clients in a retry loop",
            peak(|s| s.workers_retrying),
            "",
        ),
        ("peak p99 latency", peak(|s| s.p99_latency_s), " s"),
    ] {
        let text = v
            .map(|v| format!("{v:.1}{unit}"))
            .unwrap_or_else(|| "unknown (no such signal in the observed series)".into());
        let _ = writeln!(o, "| {what} | {text} | observed series |");
    }
    let _ = writeln!(o);

    // Timeline.
    let _ = writeln!(o, "## Timeline\n");
    let _ = writeln!(
        o,
        "| time (UTC) | t (s) | what | outcome |\n|---|---|---|---|"
    );
    let zero = epoch_of(&r.started_at).unwrap_or(0.0);
    if let Some(on) = run.and_then(|f| f.onset_s) {
        let at = humantime::format_rfc3339_millis(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64((zero + on).max(0.0)),
        );
        let _ = writeln!(
            o,
            "| {at} | {on:.1} | trouble started (onset) | {} |",
            run.map(|f| f.onset_from.as_str()).unwrap_or("")
        );
    }
    for e in &ev.entries {
        let t = epoch_of(&e.ts)
            .map(|t| format!("{:.1}", t - zero))
            .unwrap_or_default();
        let row = match &e.event {
            Event::RunStarted { started_by, .. } => Some((
                "run started".to_string(),
                started_by
                    .clone()
                    .map(|b| format!("by {b}"))
                    .unwrap_or_default(),
            )),
            Event::Resumed { pid } => Some(("run resumed".into(), format!("pid {pid}"))),
            Event::Decided(d) => Some((
                format!("decided: verdict {}", d.verdict.verdict.as_str()),
                d.plan
                    .as_ref()
                    .map(|p| {
                        format!(
                            "shed {:.0}%, admit {:.1} req/s",
                            p.shed_fraction * 100.0,
                            p.admit_rate
                        )
                    })
                    .unwrap_or_else(|| "no plan".into()),
            )),
            Event::StepStarted {
                phase,
                step,
                action,
                ..
            } => Some((
                format!(
                    "step **{step}** started ({action}{})",
                    if *phase == Phase::OnFailure {
                        ", on_failure"
                    } else {
                        ""
                    }
                ),
                String::new(),
            )),
            Event::ActionFinished { step, action } => {
                Some((format!("{step}: {}", describe(action)), "done".into()))
            }
            Event::RampDecided(d) => Some((format!("{}: decision", d.step), d.describe())),
            Event::StepFinished {
                step,
                outcome,
                message,
                ..
            } => Some((
                format!("step **{step}** finished"),
                with_message(outcome.words(), message),
            )),
            Event::FailurePhase { reason } => {
                Some(("switched to the on_failure steps".into(), reason.clone()))
            }
            Event::RunFinished {
                outcome, message, ..
            } => Some((
                "run finished".into(),
                with_message(outcome.words(), message),
            )),
            Event::ActionStarted { .. } => None,
        };
        if let Some((what, outcome)) = row {
            let _ = writeln!(
                o,
                "| {} | {t} | {} | {} |",
                e.ts,
                cell(&what),
                cell(&outcome)
            );
        }
    }
    let _ = writeln!(o);

    // What was shed.
    let _ = writeln!(o, "## What was shed and why\n");
    match &r.plan {
        Some(p) => {
            let _ = writeln!(
                o,
                "The plan shed {:.0}% of arrivals so that what reached the service stayed under what it could serve, letting its queue drain:\n",
                p.shed_fraction * 100.0
            );
            for a in &p.arithmetic {
                let _ = writeln!(o, "- {a}");
            }
            if let Some(s) = &r.input_sources {
                let _ = writeln!(o, "\nIts inputs and where they came from:\n");
                for line in s.describe() {
                    let _ = writeln!(o, "- {line}");
                }
            }
        }
        None => {
            let _ = writeln!(o, "No plan was recorded: the run shed nothing on purpose.");
        }
    }
    let drains: Vec<_> = r
        .steps
        .iter()
        .filter_map(|s| s.figures.get("drained").map(|d| (s, d)))
        .collect();
    if !drains.is_empty() {
        let _ = writeln!(o, "\nDrained on purpose:\n");
    }
    for (s, d) in drains {
        {
            let _ = writeln!(
                o,
                "- step `{}` drained {d:.0} queued requests (clients waiting on them had given up or were retrying)",
                s.name
            );
        }
    }
    let _ = writeln!(o);

    // What a human still has to do.
    let _ = writeln!(o, "## What a human still has to do\n");
    match (&r.gate, r.outcome) {
        (Some(g), _) => {
            let _ = writeln!(o, "- The gate: {}.", g.said);
            if let Some(by) = &g.review_by {
                let _ = writeln!(o, "- Review the gate's limit by {by}.");
            }
            for c in &g.commands {
                let _ = writeln!(o, "- To change it: `{c}`");
            }
        }
        (None, _) => {
            let _ = writeln!(
                o,
                "- The journal does not say what the run left on the gate (it ends early, or it was written before runs recorded it): read it with `recover gate limit get`, and lift or set it with `recover gate limit lift|set`."
            );
        }
    }
    if r.outcome != Outcome::Succeeded {
        let _ = writeln!(
            o,
            "- The run did not succeed: check the service by hand; if it was interrupted, `recover resume {}` carries it on.",
            r.run_id
        );
    }
    let _ = writeln!(
        o,
        "- Attach this draft, `timeline.svg` and `report.json` to the incident.\n"
    );

    // Open questions.
    let _ = writeln!(o, "## Open questions for the author\n");
    let _ = writeln!(
        o,
        "- What triggered the incident? The run saw the stuck state, not its cause."
    );
    let _ = writeln!(
        o,
        "- Which users or clients were refused at the gate, and were they told?"
    );
    for s in r
        .steps
        .iter()
        .filter(|s| s.outcome != crate::engine::StepOutcome::Succeeded)
    {
        let _ = writeln!(
            o,
            "- Why did step `{}` end {}{}?",
            s.name,
            s.outcome.words(),
            s.message
                .as_ref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default()
        );
    }
    // The figures a person would ask about; the rest of `run.unknown` are report.json's
    // rehearsal-only fields.
    if let Some(f) = run {
        for (field, why) in f.unknown.iter().filter(|(k, _)| {
            ["series", "time_to_recover_s", "dropped."]
                .iter()
                .any(|p| k.starts_with(p))
        }) {
            let _ = writeln!(o, "- `{field}` is unknown: {why}.");
        }
    }
    o
}

/// A table cell: no line breaks or pipes of its own.
fn cell(s: &str) -> String {
    s.replace('\n', " ").replace('|', "\\|")
}

/// An outcome's words, then the message after a colon when there is one.
fn with_message(words: &str, message: &Option<String>) -> String {
    match message {
        Some(m) => format!("{words}: {m}"),
        None => words.to_string(),
    }
}
