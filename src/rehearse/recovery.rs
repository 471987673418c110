//! Runs the runbook against the stuck system through the engine, in-process, on the local
//! platform, with an inventory the rehearsal generates.
//!
//! Why it exists: the rehearsal proves the real procedure, so it goes through the same
//! engine and platform an on-call engineer uses. This is the one seam between the two: it
//! writes `inventory.yaml`, hands the running replicas to the platform (pid files), calls
//! `engine::run`, and turns the engine's report into steps on the rehearsal clock.
//!
//! The detector already said Stuck on the rehearsal's own feed, so the engine gets the plan
//! inputs from that verdict (`RunOptions::inputs`) and its pre-action observation is cut to two
//! intervals instead of waiting out a second persist window.

use super::orchestrate::{System, INVENTORY_NAME};
use super::recorder::Clock;
use super::report::StepRecord;
use crate::engine::{self, Observer, RunOptions, RunReport, RunRequest};
use crate::metrics::scrape::ScrapeSource;
use crate::plan::{Plan, SourcedInputs};
use crate::platform::local::LocalPlatform;
use crate::platform::Target;
use crate::runbook::schema::ActionKind;
use crate::runbook::LoadedRunbook;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What the runbook did.
#[derive(Debug, Clone, Default)]
pub struct RunbookOutcome {
    /// Steps on the rehearsal clock (on_failure steps prefixed `on_failure:`).
    pub steps: Vec<StepRecord>,
    /// Relapses the engine saw and stepped back from during readmission.
    pub relapses: u32,
    /// Queued requests the drain step reported dropping.
    pub drained: Option<u64>,
    /// Some step restarted a replica (a `when: needed` restart may decide not to).
    pub restarted: bool,
    /// Some step made a warm call (a `cache.warm` step skips it when already warm).
    pub warmed: bool,
    /// The engine's error, or why the run failed or aborted.
    pub error: Option<String>,
    /// When the engine was started (rehearsal clock), even if it did nothing.
    pub started_s: f64,
    /// The plan the engine executed.
    pub plan: Option<Plan>,
    /// The engine's own summary table, kept in the run directory.
    pub summary: String,
}

/// Run `loaded` against `sys` with the plan inputs from the rehearsal's verdict.
pub async fn run_runbook(
    sys: &mut System,
    clock: Clock,
    metrics: Arc<ScrapeSource>,
    loaded: &LoadedRunbook,
    inputs: SourcedInputs,
    observer: Option<Arc<dyn Observer>>,
) -> RunbookOutcome {
    let started_s = clock.now_s();
    let fail = |error: String| RunbookOutcome {
        started_s,
        error: Some(error),
        ..RunbookOutcome::default()
    };
    let inventory = match sys.hand_over() {
        Ok(path) => path,
        Err(e) => return fail(format!("handing the replicas to the local platform: {e}")),
    };
    let platform = match LocalPlatform::from_file(&inventory) {
        Ok(p) => Arc::new(p),
        Err(e) => return fail(format!("the local platform: {e}")),
    };
    let mut loaded = loaded.clone();
    // The rehearsal has already watched the stuck state; the engine needs only a short
    // look to confirm before it acts on the assumed inputs.
    // A runbook acting on one replica needs the engine's own verdict to name it, so it
    // watches as long as the detector needs.
    if !loaded
        .runbook
        .when
        .contains(&crate::detect::VerdictKind::SlowReplica)
    {
        loaded.runbook.observe.span = Some(loaded.runbook.observe.interval * 2);
    }
    let options = RunOptions {
        journal_dir: sys.run_dir().join("journal"),
        inputs: Some(inputs),
        target: Some(Target::Local {
            name: INVENTORY_NAME.into(),
            inventory,
        }),
        started_by: Some(format!("rehearsal in {}", sys.run_dir().display())),
        observer,
        ..RunOptions::default()
    };
    let req = RunRequest {
        runbook: loaded,
        platform,
        metrics,
        options,
    };
    match engine::run(req, CancellationToken::new()).await {
        Ok(report) => convert(&report, clock, started_s),
        Err(e) => fail(format!("the engine refused to run: {e}")),
    }
}

/// The engine's report on the rehearsal clock.
pub fn convert(r: &RunReport, clock: Clock, started_s: f64) -> RunbookOutcome {
    let at = |s: &Option<String>| {
        s.as_deref()
            .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
            .map(|t| clock.wall_s(t))
    };
    let steps: Vec<StepRecord> = r
        .steps
        .iter()
        .filter(|s| s.started_at.is_some())
        .map(|s| {
            let start_s = at(&s.started_at).unwrap_or(started_s);
            let outcome = format!("{:?}", s.outcome).to_lowercase();
            StepRecord {
                name: match s.phase {
                    engine::Phase::OnFailure => format!("on_failure:{}", s.name),
                    engine::Phase::Main => s.name.clone(),
                },
                start_s,
                end_s: at(&s.finished_at).unwrap_or(start_s),
                outcome: match &s.message {
                    Some(m) if outcome != "succeeded" => format!("{outcome}: {m}"),
                    _ => outcome,
                },
            }
        })
        .collect();
    let relapses: f64 = r
        .steps
        .iter()
        .filter_map(|s| s.figures.get("relapses"))
        .sum();
    let error = match r.outcome {
        engine::Outcome::Succeeded => None,
        other => Some(format!(
            "run {} {:?}{}",
            r.run_id,
            other,
            r.message
                .as_ref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        )),
    };
    let restarted = r
        .steps
        .iter()
        .any(|s| s.figures.get("restarted").is_some_and(|n| *n > 0.0));
    let warmed = r.steps.iter().any(|s| {
        s.action == ActionKind::CacheWarm.as_str()
            && s.started_at.is_some()
            && !s.figures.contains_key("warm_skipped")
    });
    RunbookOutcome {
        steps,
        relapses: relapses as u32,
        restarted,
        warmed,
        drained: r.dropped_requests().map(|d| d.round() as u64),
        error,
        started_s,
        plan: r.plan.clone(),
        summary: r.summary_table(),
    }
}
