//! Carries out a decided run: each main step with its timeout, abort conditions and
//! Ctrl-C, then, once one fails, the on_failure steps (to completion, even after Ctrl-C:
//! they make things safe; not after the lock is lost: another controller may be acting).
//! Every step boundary goes to the journal first, so `resume` can carry on after a crash.

use super::actions::{self, Ctx, Tally};
use super::journal::Event;
use super::lock_loss::Stop;
use super::progress::ProgressEvent;
use super::report::{Outcome, Phase, RunReport, StepOutcome, StepRecord};
use super::RunOptions;
use crate::platform::{StepEvent, LOCK_LOST_PHASE};
use crate::runbook::expr::Value;
use crate::runbook::Step;
use crate::util::duration::format as dur;
use crate::util::time::now_rfc3339;
use std::collections::BTreeSet;
use std::sync::Arc;

pub(super) async fn execute(
    ctx: Arc<Ctx>,
    mut report: RunReport,
    done: &BTreeSet<(Phase, String)>,
    mut failing: Option<String>,
    opts: &RunOptions,
    stop: &Stop,
) -> RunReport {
    let cancel = &stop.cancel;
    report.journal = ctx.journal_path();
    // Copies the journal where a new run on another machine finds it (a ConfigMap on
    // Kubernetes): marked at every step boundary, flushed at the end.
    let mirror = report.journal.as_ref().map(|p| {
        super::mirror::JournalMirror::start(
            ctx.platform.clone(),
            ctx.run_id.clone(),
            p.into(),
            ctx.observed_path(),
        )
    });
    let rb = &ctx.rb;
    let mut selected: Option<Vec<String>> = None;
    let mut aborted = false;
    // The hand-back runs as the last main step: journaled, resumable, and, if it fails,
    // a failure like any other (on_failure's safe hold follows).
    let main = rb.main_steps();
    let total = main.len();
    if failing.is_none() {
        for (i, step) in main.iter().enumerate() {
            if done.contains(&(Phase::Main, step.name.clone())) {
                report.steps.push(already_done(step, Phase::Main));
                continue;
            }
            let rec = run_step(&ctx, step, Phase::Main, i + 1, total, opts, stop).await;
            mirror.iter().for_each(|m| m.mark());
            let outcome = rec.outcome;
            let msg = rec.message.clone().unwrap_or_default();
            report.steps.push(rec);
            if outcome != StepOutcome::Succeeded {
                aborted = outcome == StepOutcome::Aborted;
                failing = Some(format!("step {} {}: {msg}", step.name, outcome.words()));
                selected = step.on_failure.clone();
                break;
            }
        }
    }
    let outcome = match &failing {
        None => Outcome::Succeeded,
        Some(reason) => {
            ctx.record(Event::FailurePhase {
                reason: reason.clone(),
            });
            // on_failure steps run to completion even after Ctrl-C (they make things
            // safe), and not at all once the lock is lost.
            let steps: Vec<&Step> = rb
                .on_failure
                .iter()
                .filter(|s| selected.as_ref().is_none_or(|sel| sel.contains(&s.name)))
                .collect();
            let n = steps.len();
            for (i, step) in steps.into_iter().enumerate() {
                if done.contains(&(Phase::OnFailure, step.name.clone())) {
                    report.steps.push(already_done(step, Phase::OnFailure));
                    continue;
                }
                if stop.lost.is_cancelled() {
                    report.steps.push(not_run(step, stop.reason()));
                    continue;
                }
                let rec = run_step(&ctx, step, Phase::OnFailure, i + 1, n, opts, stop).await;
                mirror.iter().for_each(|m| m.mark());
                report.steps.push(rec);
            }
            if stop.lost.is_cancelled() {
                left_where(&ctx, &report).await;
            }
            report.message = Some(reason.clone());
            if aborted || cancel.is_cancelled() {
                Outcome::Aborted
            } else {
                Outcome::Failed
            }
        }
    };
    report.outcome = outcome;
    report.gate = Some(actions::gate_left(&ctx, outcome).await);
    if let Some(g) = &report.gate {
        tracing::info!(run_id = %ctx.run_id, commands = ?g.commands, "gate {}", g.said);
    }
    report.finished_at = now_rfc3339();
    ctx.record(Event::RunFinished {
        outcome,
        message: report.message.clone(),
        gate: report.gate.clone(),
    });
    report.observed = ctx.flush_observed();
    ctx.emit(ProgressEvent::Finished {
        run_id: ctx.run_id.clone(),
        outcome,
    });
    if let Some(m) = mirror {
        m.finish(std::time::Duration::from_secs(30)).await;
    }
    report
}

/// An on_failure step not run because the lock was lost.
fn not_run(step: &Step, why: &str) -> StepRecord {
    StepRecord {
        name: step.name.clone(),
        action: step.action_name().into(),
        phase: Phase::OnFailure,
        started_at: None,
        finished_at: None,
        outcome: StepOutcome::Aborted,
        message: Some(format!("not run: {why}")),
        actions: vec![],
        figures: Default::default(),
    }
}

/// The one event after the lock is lost: which step was stopped, what was not run, where
/// the journal is (the platform adds what it left where on the target).
async fn left_where(ctx: &Arc<Ctx>, report: &RunReport) {
    let names = |pred: &dyn Fn(&StepRecord) -> bool| -> String {
        report
            .steps
            .iter()
            .filter(|s| pred(s))
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let stopped = names(&|s| s.phase == Phase::Main && s.outcome == StepOutcome::Aborted);
    let skipped = names(&|s| s.phase == Phase::OnFailure && s.started_at.is_none());
    let journal = report.journal.clone().unwrap_or_else(|| "none".into());
    let message = format!(
        "the lock on {} was lost; stopped step [{stopped}]; on_failure not run [{skipped}]; full journal at {journal} on the machine that ran it",
        ctx.platform.target_id()
    );
    if let Err(e) = ctx
        .platform
        .record_event(&StepEvent {
            run_id: ctx.run_id.clone(),
            step: "lock".into(),
            phase: LOCK_LOST_PHASE.into(),
            message,
        })
        .await
    {
        tracing::warn!(error = %e, "could not record the event saying the lock was lost");
    }
}

fn already_done(step: &Step, phase: Phase) -> StepRecord {
    StepRecord {
        name: step.name.clone(),
        action: step.action_name().into(),
        phase,
        started_at: None,
        finished_at: None,
        outcome: StepOutcome::AlreadyDone,
        message: Some("done before the run was resumed".into()),
        actions: vec![],
        figures: Default::default(),
    }
}

async fn run_step(
    ctx: &Arc<Ctx>,
    step: &Step,
    phase: Phase,
    index: usize,
    total: usize,
    opts: &RunOptions,
    stop: &Stop,
) -> StepRecord {
    // Main steps stop on Ctrl-C or a lost lock; on_failure steps on a lost lock only.
    let cancel = match phase {
        Phase::Main => &stop.cancel,
        _ => &stop.lost,
    };
    let started_at = now_rfc3339();
    ctx.record(Event::StepStarted {
        phase,
        index,
        step: step.name.clone(),
        action: step.action_name().into(),
    });
    ctx.emit(ProgressEvent::StepStarted {
        index,
        total,
        phase,
        step: step.name.clone(),
        action: step.action_name().into(),
    });
    let _ = ctx
        .platform
        .record_event(&StepEvent {
            run_id: ctx.run_id.clone(),
            step: step.name.clone(),
            phase: "started".into(),
            message: step.note.clone().unwrap_or_default(),
        })
        .await;
    let timeout = step.timeout.unwrap_or(opts.default_step_timeout);
    let conds: Vec<_> = ctx
        .rb
        .abort_when
        .iter()
        .chain(step.abort_when.iter())
        .cloned()
        .collect();
    let tally = Tally::default();
    let result = tokio::select! {
        r = tokio::time::timeout(timeout, actions::perform(ctx, step, tally.clone())) => match r {
            Ok(Ok(done)) => (StepOutcome::Succeeded, done),
            Ok(Err(e)) => (StepOutcome::Failed, e.done),
            Err(_) => (
                StepOutcome::TimedOut,
                tally.snapshot().stopped(format!("timed out after {}", dur(timeout))),
            ),
        },
        _ = cancel.cancelled() => (
            StepOutcome::Aborted,
            tally.snapshot().stopped(stop.reason()),
        ),
        reason = abort_monitor(ctx, &conds) => (StepOutcome::Aborted, tally.snapshot().stopped(reason)),
    };
    let (outcome, done) = match result {
        // The lock went while the step ran: whatever failed, it was stopped.
        (StepOutcome::Failed, done) if stop.lost.is_cancelled() => (StepOutcome::Aborted, done),
        r => r,
    };
    ctx.record(Event::StepFinished {
        phase,
        step: step.name.clone(),
        outcome,
        message: done.message.clone(),
        figures: done.figures.clone(),
    });
    ctx.emit(ProgressEvent::StepFinished {
        step: step.name.clone(),
        outcome,
        message: done.message.clone(),
        figures: done.figures.clone(),
    });
    let _ = ctx
        .platform
        .record_event(&StepEvent {
            run_id: ctx.run_id.clone(),
            step: step.name.clone(),
            phase: format!("{outcome:?}").to_lowercase(),
            message: done.message.clone().unwrap_or_default(),
        })
        .await;
    StepRecord {
        name: step.name.clone(),
        action: step.action_name().into(),
        phase,
        started_at: Some(started_at),
        finished_at: Some(now_rfc3339()),
        outcome,
        message: done.message,
        actions: done.actions,
        figures: done.figures,
    }
}

/// Resolves with a reason once any abort condition holds. Missing data never aborts (and
/// never passes a check): abort conditions act on evidence only.
async fn abort_monitor(ctx: &Arc<Ctx>, conds: &[crate::runbook::expr::Expr]) -> String {
    if conds.is_empty() {
        return std::future::pending().await;
    }
    loop {
        tokio::time::sleep(ctx.rb.observe.interval).await;
        let Ok(snap) = ctx.metrics.snapshot(&ctx.rb.signals).await else {
            continue;
        };
        let lookup = ctx.fixed.lookup(Some(&snap));
        for c in conds {
            if c.eval(&lookup) == Value::Bool(true) {
                return format!("abort condition `{c}` holds");
            }
        }
    }
}
