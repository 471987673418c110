//! Runs a runbook: lock, observe, decide, confirm, then each step with its timeout, abort
//! conditions and Ctrl-C, switching to the on_failure steps when one fails. Every step
//! boundary and action goes to the journal first, so `resume` can carry on after a crash.

use super::actions::{self, Ctx};
use super::journal::{self, Event, Journal, ResumePoint};
use super::progress::ProgressEvent;
use super::report::{Outcome, Phase, RunReport, StepOutcome, StepRecord};
use super::vars::Fixed;
use super::{EngineError, RunOptions, RunRequest};
use crate::detect::{detect_with, Lookback, Verdict};
use crate::metrics::signal::Snapshot;
use crate::metrics::source::MetricSource;
use crate::plan::{make_plan, Overrides, Plan, PlanInputs, Source, SourcedInputs};
use crate::platform::{LockHolder, Platform, StepEvent};
use crate::runbook::expr::Value;
use crate::runbook::{Runbook, Step};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// What the engine decided before acting: the verdict, and the plan it will follow.
#[derive(Debug, Clone)]
pub struct Decision {
    pub verdict: Verdict,
    pub inputs: PlanInputs,
    /// Where each input came from.
    pub sources: SourcedInputs,
    pub plan: Plan,
    /// True when the plan does not rest on this run's own verdict (inputs given).
    pub assumed: bool,
}

/// Decide from an observed window (and what a look back over the metrics history found).
/// Pure: the verdict must be one the runbook runs in, unless the plan inputs were given
/// (see [`RunOptions::inputs`] and [`RunOptions::overrides`]).
pub fn decide(
    rb: &Runbook,
    window: &[Snapshot],
    lookback: Option<&Lookback>,
    overrides: &Overrides,
    given: Option<&SourcedInputs>,
) -> Result<Decision, EngineError> {
    let now = window.last().map_or(std::time::UNIX_EPOCH, |s| s.at);
    let verdict = detect_with(window, &rb.detect, lookback, now);
    let evidence = || {
        verdict
            .evidence
            .iter()
            .map(|e| format!("{}={:?} ({})", e.signal, e.value, e.note))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let (sources, assumed) = match given {
        Some(g) => (g.clone(), true),
        // Everything the plan needs is given: measurements play no part in it.
        None if overrides.is_complete() => (
            PlanInputs::from_verdict(&Verdict::default(), &rb.detect, overrides).map_err(
                |source| EngineError::MissingInputs {
                    source,
                    evidence: String::new(),
                },
            )?,
            true,
        ),
        None => {
            if !rb.when.contains(&verdict.verdict) {
                return Err(EngineError::NotWhen {
                    verdict: verdict.verdict,
                    runbook: rb.name.clone(),
                    when: rb.when.clone(),
                    evidence: evidence(),
                });
            }
            let s =
                PlanInputs::from_verdict(&verdict, &rb.detect, overrides).map_err(|source| {
                    EngineError::MissingInputs {
                        source,
                        evidence: evidence(),
                    }
                })?;
            (s, false)
        }
    };
    let inputs = sources.values();
    inputs.validate().map_err(EngineError::BadInputs)?;
    let plan = make_plan(&inputs, &rb.plan);
    Ok(Decision {
        verdict,
        inputs,
        sources,
        plan,
        assumed,
    })
}

fn identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    format!("{host}:{}", std::process::id())
}

async fn observe(
    rb: &Runbook,
    metrics: &dyn MetricSource,
    opts: &RunOptions,
    cancel: &CancellationToken,
) -> Result<Vec<Snapshot>, EngineError> {
    let interval = rb.observe.interval;
    let span = rb.observe_span();
    let of = (span.as_secs_f64() / interval.as_secs_f64()).ceil() as u32 + 1;
    let mut n = 0;
    let watch = crate::detect::observe::observe(metrics, &rb.signals, span, interval, |_| {
        n += 1;
        if let Some(o) = &opts.observer {
            o.event(&ProgressEvent::Observing { sample: n, of });
        }
    });
    tokio::select! {
        w = watch => Ok(w?),
        _ = cancel.cancelled() => Err(EngineError::Cancelled),
    }
}

/// Start a new run. Errors mean nothing was changed (refused, declined, bad input); a run
/// that acted and then failed returns a report with outcome `failed` or `aborted`.
pub async fn run(req: RunRequest, cancel: CancellationToken) -> Result<RunReport, EngineError> {
    let RunRequest {
        runbook: loaded,
        platform,
        metrics,
        options,
    } = req;
    let rb = loaded.runbook.clone();
    let run_id = journal::new_run_id();
    let started_at = journal::now_rfc3339();
    let lock = if options.dry_run {
        None
    } else {
        Some(
            platform
                .lock(&LockHolder {
                    run_id: run_id.clone(),
                    identity: identity(),
                })
                .await?,
        )
    };
    let result = async {
        let window = observe(&rb, metrics.as_ref(), &options, &cancel).await?;
        let d = super::prior::decide(&rb, &window, metrics.as_ref(), &options).await?;
        super::preflight::run(&rb, platform.as_ref(), &window)
            .await
            .map_err(EngineError::Preflight)?;
        let fixed = Fixed {
            plan: d.plan.clone(),
            inputs: d.inputs,
            config: rb.plan.clone(),
            params: rb.params.clone(),
        };
        let replicas: Vec<String> = platform
            .replicas()
            .await?
            .into_iter()
            .map(|r| r.id)
            .collect();
        let mut preview = base_report(&run_id, &rb, platform.as_ref(), &d, &started_at, true);
        for (phase, steps) in [(Phase::Main, &rb.steps), (Phase::OnFailure, &rb.on_failure)] {
            for s in steps {
                preview.steps.push(StepRecord {
                    name: s.name.clone(),
                    action: s.action_name().into(),
                    phase,
                    started_at: None,
                    finished_at: None,
                    outcome: StepOutcome::Planned,
                    message: s.note.clone(),
                    actions: actions::describe(s, &fixed, &replicas, &rb),
                    figures: Default::default(),
                });
            }
        }
        preview.outcome = Outcome::Planned;
        preview.finished_at = journal::now_rfc3339();
        if let Some(o) = &options.observer {
            o.event(&ProgressEvent::Decided {
                summary: format!(
                    "plan: shed {:.0}%, admit {:.1} req/s",
                    d.plan.shed_fraction * 100.0,
                    d.plan.admit_rate
                ),
            });
        }
        if options.dry_run {
            return Ok(preview);
        }
        if let Some(confirm) = &options.confirm {
            if !confirm(&preview) {
                return Err(EngineError::Declined);
            }
        }
        if cancel.is_cancelled() {
            return Err(EngineError::Cancelled);
        }
        let mut j = Journal::create(&options.journal_dir, &run_id)?;
        j.append(Event::RunStarted {
            runbook: rb.name.clone(),
            runbook_source: loaded.source.clone(),
            origin: loaded.origin.to_string(),
            target: platform.target_id(),
            target_spec: options.target.clone(),
            started_by: options.started_by.clone(),
            invocation: serde_json::Value::Null,
            pid: std::process::id(),
        })?;
        j.append(Event::Decided {
            verdict: d.verdict.clone(),
            inputs: Some(d.inputs),
            sources: Some(d.sources.clone()),
            plan: Some(d.plan.clone()),
            assumed: d.assumed,
        })?;
        let report = base_report(&run_id, &rb, platform.as_ref(), &d, &started_at, false);
        let ctx = Arc::new(Ctx::new(
            rb.clone(),
            platform.clone(),
            metrics.clone(),
            fixed,
            run_id.clone(),
            j,
            options.clone(),
            Default::default(),
        ));
        Ok(execute(ctx, report, &BTreeSet::new(), None, &options, &cancel).await)
    }
    .await;
    if let Some(l) = lock {
        if let Err(e) = l.release().await {
            tracing::warn!("could not release the lock: {e}");
        }
    }
    result
}

/// Continue an interrupted run from its journal: finished steps are skipped, a half-done
/// batched restart carries on with the replicas not yet restarted.
pub async fn resume(
    journal_path: &Path,
    platform: Arc<dyn Platform>,
    metrics: Arc<dyn MetricSource>,
    options: RunOptions,
    cancel: CancellationToken,
) -> Result<RunReport, EngineError> {
    let entries = journal::read(journal_path)?;
    let point: ResumePoint = journal::resume_point(&entries)?;
    if let Some(outcome) = point.finished {
        return Err(EngineError::AlreadyFinished {
            run_id: point.run_id,
            outcome,
        });
    }
    let rb = crate::runbook::parse_str(
        &format!("{} (from journal)", point.origin),
        &point.runbook_source,
    )?;
    let Some(journal::Decided {
        verdict,
        inputs: Some(inputs),
        sources,
        plan: Some(plan),
        assumed,
    }) = point.decided.clone()
    else {
        return Err(EngineError::NotDecided {
            run_id: point.run_id,
        });
    };
    // Journals written before sources were recorded say only whether inputs were given.
    let sources = sources.unwrap_or_else(|| {
        let (source, from) = if assumed {
            (Source::Operator, "given (journal of an older version)")
        } else {
            (Source::Measured, "measured (journal of an older version)")
        };
        SourcedInputs::all_from(&inputs, source, from)
    });
    let lock = platform
        .lock(&LockHolder {
            run_id: point.run_id.clone(),
            identity: identity(),
        })
        .await?;
    let result = async {
        let (mut j, _) = Journal::reopen(journal_path)?;
        j.append(Event::Resumed {
            pid: std::process::id(),
        })?;
        let d = Decision {
            verdict,
            inputs,
            sources,
            plan: plan.clone(),
            assumed,
        };
        let started_at = entries.first().map(|e| e.ts.clone()).unwrap_or_default();
        let report = base_report(
            &point.run_id,
            &rb,
            platform.as_ref(),
            &d,
            &started_at,
            false,
        );
        let fixed = Fixed {
            plan,
            inputs,
            config: rb.plan.clone(),
            params: rb.params.clone(),
        };
        let ctx = Arc::new(Ctx::new(
            rb.clone(),
            platform.clone(),
            metrics.clone(),
            fixed,
            point.run_id.clone(),
            j,
            options.clone(),
            point.restart.clone(),
        ));
        Ok(execute(
            ctx,
            report,
            &point.done,
            point.failing.clone(),
            &options,
            &cancel,
        )
        .await)
    }
    .await;
    if let Err(e) = lock.release().await {
        tracing::warn!("could not release the lock: {e}");
    }
    result
}

fn base_report(
    run_id: &str,
    rb: &Runbook,
    platform: &dyn Platform,
    d: &Decision,
    started_at: &str,
    dry_run: bool,
) -> RunReport {
    RunReport {
        run_id: run_id.to_string(),
        runbook: rb.name.clone(),
        target: platform.target_id(),
        outcome: Outcome::Failed,
        dry_run,
        message: None,
        verdict: Some(d.verdict.clone()),
        plan_inputs: Some(d.inputs),
        input_sources: Some(d.sources.clone()),
        plan: Some(d.plan.clone()),
        assumed_inputs: d.assumed,
        started_at: started_at.to_string(),
        finished_at: String::new(),
        steps: Vec::new(),
        journal: None,
    }
}

async fn execute(
    ctx: Arc<Ctx>,
    mut report: RunReport,
    done: &BTreeSet<(Phase, String)>,
    mut failing: Option<String>,
    opts: &RunOptions,
    cancel: &CancellationToken,
) -> RunReport {
    report.journal = ctx.journal_path();
    let rb = &ctx.rb;
    let mut selected: Option<Vec<String>> = None;
    let mut aborted = false;
    let total = rb.steps.len();
    if failing.is_none() {
        for (i, step) in rb.steps.iter().enumerate() {
            if done.contains(&(Phase::Main, step.name.clone())) {
                report.steps.push(already_done(step, Phase::Main));
                continue;
            }
            let rec = run_step(&ctx, step, Phase::Main, i + 1, total, opts, cancel).await;
            let outcome = rec.outcome;
            let msg = rec.message.clone().unwrap_or_default();
            report.steps.push(rec);
            if outcome != StepOutcome::Succeeded {
                aborted = outcome == StepOutcome::Aborted;
                failing = Some(format!(
                    "step {} {}: {msg}",
                    step.name,
                    format!("{outcome:?}").to_lowercase()
                ));
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
            // on_failure steps run to completion even after Ctrl-C: they make things safe.
            let never = CancellationToken::new();
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
                let rec = run_step(&ctx, step, Phase::OnFailure, i + 1, n, opts, &never).await;
                report.steps.push(rec);
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
    report.finished_at = journal::now_rfc3339();
    ctx.record(Event::RunFinished {
        outcome,
        message: report.message.clone(),
    });
    ctx.emit(ProgressEvent::Finished {
        run_id: ctx.run_id.clone(),
        outcome,
    });
    report
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
    cancel: &CancellationToken,
) -> StepRecord {
    let started_at = journal::now_rfc3339();
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
    let result = tokio::select! {
        r = tokio::time::timeout(timeout, actions::perform(ctx, step)) => match r {
            Ok(Ok(done)) => (StepOutcome::Succeeded, done),
            Ok(Err(e)) => (StepOutcome::Failed, actions::StepDone::failed(e)),
            Err(_) => (StepOutcome::TimedOut, actions::StepDone::failed(format!("timed out after {}", crate::util::duration::format(timeout)))),
        },
        _ = cancel.cancelled() => (StepOutcome::Aborted, actions::StepDone::failed("cancelled by the operator (Ctrl-C)".into())),
        reason = abort_monitor(ctx, &conds) => (StepOutcome::Aborted, actions::StepDone::failed(reason)),
    };
    let (outcome, done) = result;
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
        finished_at: Some(journal::now_rfc3339()),
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

/// A shared journal handle for actions that finish on a spawned task.
pub(crate) type SharedJournal = Arc<Mutex<Journal>>;
