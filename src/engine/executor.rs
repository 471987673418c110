//! Runs a runbook: lock, observe, decide, confirm, then the steps (`steps`);
//! or, for `resume`, lock, read the journal and carry on from where it stopped.

use super::actions::{self, Ctx, GateMemory};
use super::batches::RestartProgress;
use super::journal::{self, Event, Journal, ResumePoint};
use super::planning::PlannedRun;
use super::progress::ProgressEvent;
use super::report::{Outcome, Phase, RunReport, StepOutcome, StepRecord};
use super::steps::execute;
use super::vars::Fixed;
use super::{EngineError, RunOptions, RunRequest};
use crate::detect::windows::Fields;
use crate::detect::Watched;
use crate::metrics::source::MetricSource;
use crate::platform::{LockHolder, Platform};
use crate::runbook::Runbook;
use crate::util::time::now_rfc3339;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

fn identity() -> String {
    format!("{}:{}", crate::util::procfs::hostname(), std::process::id())
}

/// Run `body` holding the target's lock (when `lock`), and release it after. `body` gets
/// a token cancelled by `cancel` or by the loss of the lock (a Kubernetes Lease taken over
/// or not renewed): another controller may be acting, so the run stops as on Ctrl-C.
async fn with_lock<T, F, Fut>(
    platform: &dyn Platform,
    run_id: &str,
    lock: bool,
    cancel: &CancellationToken,
    body: F,
) -> Result<T, EngineError>
where
    F: FnOnce(super::lock_loss::Stop) -> Fut,
    Fut: Future<Output = Result<T, EngineError>>,
{
    let guard = if lock {
        let holder = LockHolder {
            run_id: run_id.to_string(),
            identity: identity(),
        };
        Some(platform.lock(&holder).await?)
    } else {
        None
    };
    let stop = super::lock_loss::cancel_on_loss(cancel, guard.as_deref());
    let result = body(stop.clone()).await;
    stop.cancel.cancel(); // ends the watch on the lock
    if let Some(g) = guard {
        if let Err(e) = g.release().await {
            tracing::warn!("could not release the lock: {e}");
        }
    }
    result
}

/// Watch the runbook's signals for its observation window, judged as `recover detect`
/// judges them ([`crate::detect::watch`]); the look back over the history only when the
/// plan inputs are not given already.
async fn observe(
    run_id: &str,
    rb: &Runbook,
    metrics: &dyn MetricSource,
    opts: &RunOptions,
    cancel: &CancellationToken,
) -> Result<Watched, EngineError> {
    let fields = Fields::runbook();
    let w = crate::detect::Watch {
        signals: &rb.signals,
        config: &rb.detect,
        fields: &fields,
        interval: rb.observe.interval,
        span: Some(rb.observe_span()),
        at: None,
        scrape: None,
        look_back: opts.inputs.is_none() && !opts.overrides.is_complete(),
    };
    let watch = crate::detect::watch(metrics, &w, |seen| {
        if let Some(o) = &opts.observer {
            let e = ProgressEvent::Observing {
                sample: seen.n,
                of: seen.of,
            };
            o.event(run_id, &e);
        }
    });
    tokio::select! {
        w = watch => Ok(w?),
        _ = cancel.cancelled() => Err(EngineError::Cancelled),
    }
}

/// A run about to act: decided, with its journal open and the target locked.
struct Ready<'a> {
    rb: &'a Runbook,
    platform: Arc<dyn Platform>,
    metrics: Arc<dyn MetricSource>,
    decision: &'a PlannedRun,
    run_id: &'a str,
    started_at: &'a str,
    journal: Journal,
    /// What an interrupted run had already done (empty for a new run).
    done: BTreeSet<(Phase, String)>,
    failing: Option<String>,
    restart: BTreeMap<String, RestartProgress>,
    /// What the run saw of the gate, from the journal (resume).
    gate_memory: GateMemory,
    /// The snapshots the run judged before it acted (empty for a resume).
    window: &'a [crate::metrics::signal::Snapshot],
}

/// Carry out the steps of a run that is ready to act (shared by run and resume).
async fn act(r: Ready<'_>, options: &RunOptions, stop: &super::lock_loss::Stop) -> RunReport {
    let report = base_report(
        r.run_id,
        r.rb,
        r.platform.as_ref(),
        r.decision,
        r.started_at,
        false,
    );
    let ctx = Arc::new(
        Ctx::new(
            r.rb.clone(),
            r.platform,
            r.metrics,
            fixed(r.rb, r.decision),
            r.run_id.to_string(),
            r.journal,
            options.clone(),
            r.restart,
        )
        .remembering(r.gate_memory)
        .seeing(r.window),
    );
    execute(ctx, report, &r.done, r.failing, options, stop).await
}

fn fixed(rb: &Runbook, d: &PlannedRun) -> Fixed {
    Fixed {
        plan: d.plan.clone(),
        inputs: d.inputs,
        config: rb.plan.clone(),
        params: rb.params.clone(),
        slow_replica: d.verdict.slow_replica.as_ref().map(|s| s.replica.clone()),
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
    let rb = loaded.runbook.at_resolution(metrics.resolution().await?)?;
    let run_id = journal::new_run_id();
    let started_at = now_rfc3339();
    let (target, locked_by) = (platform.clone(), run_id.clone());
    let lock = !options.dry_run;
    with_lock(
        target.as_ref(),
        &locked_by,
        lock,
        &cancel,
        |stop| async move {
            let cancel = stop.cancel.clone();
            let watched = observe(&run_id, &rb, metrics.as_ref(), &options, &cancel).await?;
            let (verdict, lookback) = (&watched.verdict, watched.lookback.as_ref());
            let d = super::prior::plan_with_history(&rb, verdict, lookback, &options).await?;
            super::preflight::run(&rb, platform.as_ref(), &watched.window)
                .await
                .map_err(EngineError::Preflight)?;
            let replicas: Vec<String> = platform
                .replicas()
                .await?
                .into_iter()
                .map(|r| r.id)
                .collect();
            let preview = preview(&run_id, &rb, platform.as_ref(), &d, &started_at, &replicas);
            if let Some(o) = &options.observer {
                o.event(
                    &run_id,
                    &ProgressEvent::Decided {
                        summary: format!(
                            "plan: shed {:.0}%, admit {:.1} req/s",
                            d.plan.shed_fraction * 100.0,
                            d.plan.admit_rate
                        ),
                    },
                );
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
                format: journal::FORMAT,
                runbook: rb.name.clone(),
                runbook_source: loaded.source.clone(),
                origin: loaded.origin.to_string(),
                target: platform.target_id(),
                target_spec: options.target.clone(),
                started_by: options.started_by.clone(),
                pid: std::process::id(),
            })?;
            j.append(Event::Decided(d.recorded()))?;
            let ready = Ready {
                rb: &rb,
                platform: platform.clone(),
                metrics: metrics.clone(),
                decision: &d,
                run_id: &run_id,
                started_at: &started_at,
                journal: j,
                done: BTreeSet::new(),
                failing: None,
                restart: BTreeMap::new(),
                gate_memory: GateMemory::default(),
                window: &watched.window,
            };
            Ok(act(ready, &options, &stop).await)
        },
    )
    .await
}

/// What the run would do, step by step, with its numbers (dry run and confirmation).
fn preview(
    run_id: &str,
    rb: &Runbook,
    platform: &dyn Platform,
    d: &PlannedRun,
    started_at: &str,
    replicas: &[String],
) -> RunReport {
    let fixed = fixed(rb, d);
    let mut preview = base_report(run_id, rb, platform, d, started_at, true);
    for (phase, steps) in [
        (Phase::Main, &rb.main_steps()),
        (Phase::OnFailure, &rb.on_failure),
    ] {
        for s in steps {
            preview.steps.push(StepRecord {
                name: s.name.clone(),
                action: s.action_name().into(),
                phase,
                started_at: None,
                finished_at: None,
                outcome: StepOutcome::Planned,
                message: s.note.clone(),
                actions: actions::describe(s, &fixed, replicas, rb),
                figures: Default::default(),
            });
        }
    }
    preview.outcome = Outcome::Planned;
    preview.finished_at = now_rfc3339();
    preview
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
    let Some(d) = point.decided.as_ref().and_then(PlannedRun::from_recorded) else {
        return Err(EngineError::NotDecided {
            run_id: point.run_id,
        });
    };
    let started_at = entries.first().map(|e| e.ts.clone()).unwrap_or_default();
    let (target, locked_by) = (platform.clone(), point.run_id.clone());
    with_lock(
        target.as_ref(),
        &locked_by,
        true,
        &cancel,
        |stop| async move {
            let (mut j, _) = Journal::reopen(journal_path)?;
            j.append(Event::Resumed {
                pid: std::process::id(),
            })?;
            let ready = Ready {
                rb: &rb,
                platform: platform.clone(),
                metrics: metrics.clone(),
                decision: &d,
                run_id: &point.run_id,
                started_at: &started_at,
                journal: j,
                done: point.done.clone(),
                failing: point.failing.clone(),
                restart: point.restart.clone(),
                gate_memory: point.gate.clone(),
                window: &[],
            };
            Ok(act(ready, &options, &stop).await)
        },
    )
    .await
}

fn base_report(
    run_id: &str,
    rb: &Runbook,
    platform: &dyn Platform,
    d: &PlannedRun,
    started_at: &str,
    dry_run: bool,
) -> RunReport {
    let mut r = RunReport::new(run_id, &rb.name, &platform.target_id(), started_at);
    r.dry_run = dry_run;
    r.record_decision(&d.recorded());
    r
}
