//! The actions, carried out through the [`Platform`]: each records what it is about to do
//! in the journal (fsync'd) before doing it, and what it observed after. Decisions come
//! from the pure modules ([`super::check`], [`super::ramp`], [`super::batches`]).

use super::batches::{remaining, RestartProgress};
use super::check::{measure, record, CheckState, CheckStatus};
use super::executor::SharedJournal;
use super::journal::{Event, Figures, Journal};
use super::progress::ProgressEvent;
use super::ramp::{decide, RampDecision, RampParams, RampState};
use super::vars::Fixed;
use super::RunOptions;
use crate::gate::limit::Limit;
use crate::metrics::signal::Snapshot;
use crate::metrics::source::MetricSource;
use crate::platform::{AdminOp, Platform};
use crate::runbook::action::{Action, RateSetting};
use crate::runbook::{Runbook, Step};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// What a run's actions share.
pub struct Ctx {
    pub rb: Runbook,
    pub platform: Arc<dyn Platform>,
    pub metrics: Arc<dyn MetricSource>,
    pub fixed: Fixed,
    pub run_id: String,
    journal: SharedJournal,
    opts: RunOptions,
    /// Batched-restart progress from the journal of an interrupted run, by step name.
    restart: BTreeMap<String, RestartProgress>,
}

/// A step's result: figures, what it did, and a message.
#[derive(Debug, Default, Clone)]
pub struct StepDone {
    pub figures: Figures,
    pub actions: Vec<String>,
    pub message: Option<String>,
}

impl StepDone {
    pub fn failed(message: String) -> Self {
        StepDone {
            message: Some(message),
            ..Default::default()
        }
    }
}

impl Ctx {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        rb: Runbook,
        platform: Arc<dyn Platform>,
        metrics: Arc<dyn MetricSource>,
        fixed: Fixed,
        run_id: String,
        journal: Journal,
        opts: RunOptions,
        restart: BTreeMap<String, RestartProgress>,
    ) -> Self {
        Ctx {
            rb,
            platform,
            metrics,
            fixed,
            run_id,
            journal: Arc::new(Mutex::new(journal)),
            opts,
            restart,
        }
    }

    pub fn journal_path(&self) -> Option<String> {
        self.journal
            .lock()
            .ok()
            .map(|j| j.path().display().to_string())
    }

    /// Append to the journal (fsync'd). A journal that cannot be written is logged loudly;
    /// the run goes on, because stopping halfway is worse than an incomplete record.
    pub fn record(&self, event: Event) {
        record_to(&self.journal, event);
    }

    pub fn emit(&self, e: ProgressEvent) {
        match &self.opts.observer {
            Some(o) => o.event(&e),
            None => tracing::info!("{e:?}"),
        }
    }

    fn info(&self, step: &str, message: String) {
        self.emit(ProgressEvent::Info {
            step: step.to_string(),
            message,
        });
    }

    async fn snapshot(&self) -> Result<Snapshot, String> {
        self.metrics
            .snapshot(&self.rb.signals)
            .await
            .map_err(|e| e.to_string())
    }
}

fn record_to(journal: &SharedJournal, event: Event) {
    match journal.lock() {
        Ok(mut j) => {
            if let Err(e) = j.append(event) {
                tracing::error!("journal write failed: {e}");
            }
        }
        Err(_) => tracing::error!("journal lock poisoned"),
    }
}

fn started(ctx: &Ctx, step: &str, action: &str, subject: Option<&str>, before: serde_json::Value) {
    ctx.record(Event::ActionStarted {
        step: step.into(),
        action: action.into(),
        subject: subject.map(String::from),
        before,
    });
}

fn finished(
    ctx: &Ctx,
    step: &str,
    action: &str,
    subject: Option<&str>,
    after: serde_json::Value,
    figures: Figures,
) {
    ctx.record(Event::ActionFinished {
        step: step.into(),
        action: action.into(),
        subject: subject.map(String::from),
        after,
        figures,
    });
}

/// The note every limit the engine sets carries: who set it, until when, who must act.
fn limit_note(ctx: &Ctx, step: &str, note: Option<&str>, deadline: Duration) -> String {
    let until = humantime::format_rfc3339_seconds(SystemTime::now() + deadline);
    let owner = ctx
        .rb
        .owner
        .as_deref()
        .unwrap_or("the owner of the target service");
    format!(
        "set by recover run {} (runbook {}, step {step}){}; review by {until}: if that run is no longer active (recover history), {owner} must check the service and lift or adjust this limit (PUT /admin/limit)",
        ctx.run_id,
        ctx.rb.name,
        note.map(|n| format!(": {n}")).unwrap_or_default()
    )
}

fn limit_json(l: &Result<Limit, String>) -> serde_json::Value {
    match l {
        Ok(l) => serde_json::to_value(l).unwrap_or_default(),
        Err(e) => json!({ "error": e }),
    }
}

async fn set_limit(ctx: &Ctx, step: &str, limit: Limit) -> Result<(), String> {
    let gate = ctx.platform.gate();
    let before = gate.get_limit().await.map_err(|e| e.to_string());
    started(
        ctx,
        step,
        "gate.set_limit",
        Some("gate"),
        json!({ "limit": limit_json(&before), "new": limit }),
    );
    gate.set_limit(&limit)
        .await
        .map_err(|e| format!("setting the gate limit: {e}"))?;
    let after = gate.get_limit().await.map_err(|e| e.to_string());
    let mut figs = Figures::new();
    if let Some(r) = limit.rate_per_s {
        figs.insert("rate_per_s".into(), r);
    }
    finished(
        ctx,
        step,
        "gate.set_limit",
        Some("gate"),
        json!({ "limit": limit_json(&after) }),
        figs,
    );
    Ok(())
}

fn burst_for(rate: f64, burst: Option<u32>) -> u32 {
    burst.unwrap_or_else(|| crate::gate::limit::default_burst(rate))
}

/// Carry out one step.
pub async fn perform(ctx: &Arc<Ctx>, step: &Step) -> Result<StepDone, String> {
    let name = step.name.as_str();
    let mut done = StepDone::default();
    match &step.action {
        Action::GateLimit(a) => {
            let deadline = a.deadline.unwrap_or(Duration::from_secs(1800));
            let note = Some(limit_note(ctx, name, a.note.as_deref(), deadline));
            let limit = match &a.rate {
                RateSetting::Unlimited => Limit {
                    note,
                    ..Limit::unlimited()
                },
                RateSetting::Rate(q) => {
                    let rate = ctx.fixed.quantity(q).map_err(|e| e.to_string())?.max(0.0);
                    let mif = a
                        .max_in_flight
                        .as_ref()
                        .map(|m| ctx.fixed.quantity(m).map_err(|e| e.to_string()))
                        .transpose()?
                        .map(|v| v.max(0.0).round() as u32);
                    Limit {
                        rate_per_s: Some(rate),
                        burst: burst_for(rate, a.burst),
                        max_in_flight: mif,
                        note,
                    }
                }
            };
            done.actions
                .push(format!("gate limit -> {}", describe_limit(&limit)));
            ctx.info(name, format!("gate limit -> {}", describe_limit(&limit)));
            set_limit(ctx, name, limit.clone()).await?;
            if let Some(r) = limit.rate_per_s {
                done.figures.insert("rate_per_s".into(), r);
            }
        }
        Action::BacklogDrain(_) => {
            let mut total = 0.0;
            for r in ctx.platform.replicas().await.map_err(|e| e.to_string())? {
                started(ctx, name, "replica.drain", Some(&r.id), json!({}));
                let reply = ctx
                    .platform
                    .admin(&r.id, AdminOp::Drain)
                    .await
                    .map_err(|e| e.to_string())?;
                let n = reply.get("drained").and_then(|v| v.as_f64()).unwrap_or(0.0);
                total += n;
                let mut f = Figures::new();
                f.insert("drained".into(), n);
                finished(ctx, name, "replica.drain", Some(&r.id), reply, f);
                ctx.info(name, format!("{}: dropped {n} queued requests", r.id));
            }
            done.figures.insert("drained".into(), total);
            done.message = Some(format!("dropped {total} queued requests on purpose"));
        }
        Action::RestartBatched(a) => {
            let mut ids: Vec<String> = ctx
                .platform
                .replicas()
                .await
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|r| r.id)
                .collect();
            ids.sort();
            let progress = ctx.restart.get(name).cloned().unwrap_or_default();
            let work = remaining(&ids, a.batch, &progress);
            if !progress.restarted.is_empty() {
                ctx.info(
                    name,
                    format!(
                        "resuming: {} already restarted, {} awaiting ready",
                        progress.restarted.len(),
                        work.await_ready.len()
                    ),
                );
            }
            if !work.await_ready.is_empty() {
                wait_ready(ctx, name, &work.await_ready, a.ready_timeout).await?;
            }
            let mut restarted = 0.0;
            for (i, batch) in work.batches.iter().enumerate() {
                if i > 0 && !a.pause.is_zero() {
                    tokio::time::sleep(a.pause).await;
                }
                ctx.info(
                    name,
                    format!(
                        "batch {}/{}: {}",
                        i + 1,
                        work.batches.len(),
                        batch.join(", ")
                    ),
                );
                for r in batch {
                    restart_one(ctx, name, r).await?;
                    restarted += 1.0;
                }
                wait_ready(ctx, name, batch, a.ready_timeout).await?;
            }
            done.figures.insert("restarted".into(), restarted);
            done.figures
                .insert("batches".into(), work.batches.len() as f64);
            done.figures.insert(
                "skipped_already_restarted".into(),
                progress.restarted.len() as f64,
            );
        }
        Action::CacheWarm(a) => {
            for r in ctx.platform.replicas().await.map_err(|e| e.to_string())? {
                started(ctx, name, "replica.warm", Some(&r.id), json!({}));
                let reply = ctx
                    .platform
                    .admin(&r.id, AdminOp::Warm)
                    .await
                    .map_err(|e| e.to_string())?;
                finished(
                    ctx,
                    name,
                    "replica.warm",
                    Some(&r.id),
                    reply,
                    Figures::new(),
                );
            }
            loop {
                let snap = ctx.snapshot().await;
                let v = snap.as_ref().ok().and_then(|s| s.get(&a.signal));
                if let Some(v) = v {
                    ctx.info(
                        name,
                        format!("{} = {v:.2} (want >= {})", a.signal, a.threshold),
                    );
                    if v >= a.threshold {
                        done.figures.insert(a.signal.clone(), v);
                        break;
                    }
                } else {
                    ctx.info(
                        name,
                        format!("{}: no data yet; waiting (not a pass)", a.signal),
                    );
                }
                tokio::time::sleep(a.poll).await;
            }
        }
        Action::WaitUntil(a) => {
            let st = run_check(ctx, name, &a.check).await?;
            done.figures
                .insert("measurements".into(), st.measurements as f64);
            done.figures.insert("failures".into(), st.failures as f64);
        }
        Action::Notify(a) => {
            ctx.info(name, a.message.clone());
            tracing::warn!(run_id = %ctx.run_id, "notify: {}", a.message);
            started(ctx, name, "notify", None, json!({ "message": a.message }));
            finished(ctx, name, "notify", None, json!({}), Figures::new());
            done.message = Some(a.message.clone());
        }
        Action::GateRamp(a) => {
            let from = ctx.fixed.quantity(&a.from).map_err(|e| e.to_string())?;
            let factor = ctx.fixed.quantity(&a.factor).map_err(|e| e.to_string())?;
            if !(from > 0.0 && factor > 1.0) {
                return Err(format!(
                    "ramp needs from > 0 and factor > 1 (got {from}, {factor})"
                ));
            }
            let ceiling = ramp_ceiling(&ctx.fixed, from);
            let p = RampParams {
                from,
                factor,
                ceiling,
                max_relapses: a.max_relapses,
                ceiling_holds: a.ceiling_holds,
            };
            let hold = a.hold.unwrap_or(ctx.rb.plan.step_hold);
            let mut st = RampState::start(&p);
            let mut raises = 0.0;
            let mut lifted = false;
            let mut applied: Option<f64> = None;
            loop {
                if applied != Some(st.rate) {
                    let limit = Limit {
                        rate_per_s: Some(st.rate),
                        burst: burst_for(st.rate, a.burst),
                        max_in_flight: None,
                        note: Some(limit_note(
                            ctx,
                            name,
                            a.note.as_deref(),
                            Duration::from_secs(1800),
                        )),
                    };
                    set_limit(ctx, name, limit).await?;
                    applied = Some(st.rate);
                    done.actions.push(format!("admit {:.1} req/s", st.rate));
                }
                ctx.info(
                    name,
                    format!(
                        "admitting {:.1} req/s; holding {}",
                        st.rate,
                        crate::util::duration::format(hold)
                    ),
                );
                tokio::time::sleep(hold).await;
                let checked = run_check(ctx, name, &a.check).await.map(|_| ());
                let rejected = ctx
                    .snapshot()
                    .await
                    .ok()
                    .and_then(|s| s.get(&a.rejected_signal));
                match decide(&p, &mut st, checked, rejected) {
                    RampDecision::Raise { .. } => raises += 1.0,
                    RampDecision::Hold { reason, .. } => ctx.info(name, reason),
                    RampDecision::StepBack { rate, reason } => ctx.info(
                        name,
                        format!("relapse ({reason}); stepping back to {rate:.1} req/s and holding"),
                    ),
                    RampDecision::Finish { reason } => {
                        ctx.info(name, format!("{reason}; lifting the limit"));
                        let lift = Limit {
                            note: Some(format!(
                                "lifted by recover run {} (runbook {}, step {name}): {reason}",
                                ctx.run_id, ctx.rb.name
                            )),
                            ..Limit::unlimited()
                        };
                        set_limit(ctx, name, lift).await?;
                        lifted = true;
                        done.message = Some(reason);
                        break;
                    }
                    RampDecision::Settle { rate, reason } => {
                        let next = format!(
                            "{reason}. The gate stays at {rate:.1} req/s, which the service can take. \
                             Next: add capacity (replicas) and lift the limit by hand \
                             (PUT /admin/limit with rate_per_s null), or find what still offers the excess"
                        );
                        ctx.info(name, next.clone());
                        tracing::warn!(run_id = %ctx.run_id, "{next}");
                        done.message = Some(next);
                        break;
                    }
                    RampDecision::Fail { reason } => return Err(reason),
                }
            }
            done.figures.insert("final_rate".into(), st.rate);
            done.figures.insert("relapses".into(), st.relapses as f64);
            done.figures.insert("raises".into(), raises);
            done.figures
                .insert("lifted".into(), if lifted { 1.0 } else { 0.0 });
        }
    }
    Ok(done)
}

/// Restart one replica on a task of its own, so that a Ctrl-C or timeout that drops the
/// step does not leave a replica stopped and not started: the restart finishes and its
/// journal record is written either way.
async fn restart_one(ctx: &Arc<Ctx>, step: &str, replica: &str) -> Result<(), String> {
    started(ctx, step, "replica.restart", Some(replica), json!({}));
    let platform = ctx.platform.clone();
    let journal = ctx.journal.clone();
    let (step_s, r) = (step.to_string(), replica.to_string());
    let t0 = Instant::now();
    let task = tokio::spawn(async move {
        let res = platform.restart(&r).await;
        if res.is_ok() {
            let mut f = Figures::new();
            f.insert("seconds".into(), t0.elapsed().as_secs_f64());
            record_to(
                &journal,
                Event::ActionFinished {
                    step: step_s,
                    action: "replica.restart".into(),
                    subject: Some(r),
                    after: json!({}),
                    figures: f,
                },
            );
        }
        res
    });
    match task.await {
        Ok(Ok(())) => {
            ctx.info(step, format!("{replica} restarted"));
            Ok(())
        }
        Ok(Err(e)) => Err(format!("restarting {replica}: {e}")),
        Err(e) => Err(format!("restarting {replica}: task failed: {e}")),
    }
}

async fn wait_ready(
    ctx: &Ctx,
    step: &str,
    replicas: &[String],
    timeout: Duration,
) -> Result<(), String> {
    let t0 = Instant::now();
    ctx.platform
        .wait_ready(replicas, timeout)
        .await
        .map_err(|e| format!("waiting for {} to be ready: {e}", replicas.join(", ")))?;
    for r in replicas {
        let mut f = Figures::new();
        f.insert("seconds".into(), t0.elapsed().as_secs_f64());
        finished(ctx, step, "replica.ready", Some(r), json!({}), f);
    }
    ctx.info(step, format!("ready: {}", replicas.join(", ")));
    Ok(())
}

/// Run a named check to its end.
async fn run_check(ctx: &Ctx, step: &str, name: &str) -> Result<CheckState, String> {
    let check = ctx
        .rb
        .checks
        .get(name)
        .ok_or_else(|| format!("check {name:?} is not defined"))?;
    let mut st = CheckState::default();
    loop {
        let m = match ctx.snapshot().await {
            Ok(snap) => measure(check, &ctx.fixed.lookup(Some(&snap))),
            Err(e) => super::check::Measurement::Inconclusive {
                missing: vec![format!("(metric source: {e})")],
            },
        };
        let status = record(check, &mut st, &m);
        match status {
            CheckStatus::Passed => {
                ctx.info(
                    step,
                    format!(
                        "check {name} passed after {} measurement(s)",
                        st.measurements
                    ),
                );
                return Ok(st);
            }
            CheckStatus::Failed(why) => return Err(format!("check {name}: {why}")),
            CheckStatus::Running => {
                if !matches!(m, super::check::Measurement::Success) {
                    ctx.info(step, format!("check {name}: {m:?}"));
                }
            }
        }
        tokio::time::sleep(check.interval).await;
    }
}

fn describe_limit(l: &Limit) -> String {
    match l.rate_per_s {
        None => "unlimited".into(),
        Some(r) => format!(
            "{r:.1} req/s (burst {}{})",
            l.burst,
            l.max_in_flight
                .map(|m| format!(", max in flight {m}"))
                .unwrap_or_default()
        ),
    }
}

/// What a step would do, in words with its numbers (dry run and confirmation). Pure.
pub fn describe(step: &Step, fixed: &Fixed, replicas: &[String], rb: &Runbook) -> Vec<String> {
    let q = |x: &crate::runbook::action::Quantity| {
        fixed
            .quantity(x)
            .map(|v| format!("{v:.1}"))
            .unwrap_or_else(|e| e.to_string())
    };
    match &step.action {
        Action::GateLimit(a) => vec![match &a.rate {
            RateSetting::Unlimited => "set the gate to unlimited".into(),
            RateSetting::Rate(r) => format!(
                "set the gate to {} req/s ({}), burst {}, review deadline {}",
                q(r),
                r.0,
                a.burst.map(|b| b.to_string()).unwrap_or_else(|| format!(
                    "{} (half a second of the rate)",
                    burst_for(fixed.quantity(r).unwrap_or(0.0), None)
                )),
                crate::util::duration::format(a.deadline.unwrap_or(Duration::from_secs(1800)))
            ),
        }],
        Action::GateRamp(a) => {
            let from = fixed.quantity(&a.from).unwrap_or(0.0);
            let factor = fixed.quantity(&a.factor).unwrap_or(2.0);
            let ceiling = ramp_ceiling(fixed, from);
            let mut rates = vec![];
            let mut r = from;
            while r < ceiling && rates.len() < 20 && factor > 1.0 {
                rates.push(format!("{r:.1}"));
                r *= factor;
            }
            rates.push(format!("{ceiling:.1}"));
            vec![format!(
                "raise the gate through {} req/s (or straight to what is offered, within the last), holding {} and running check {} at each; step back on relapse (max {}); lift the limit once the gate rejects nothing; at the last rate hold while it still rejects (up to {} more holds), then leave the limit there",
                rates.join(" -> "),
                crate::util::duration::format(a.hold.unwrap_or(rb.plan.step_hold)),
                a.check,
                a.max_relapses,
                a.ceiling_holds
            )]
        }
        Action::BacklogDrain(_) => vec![format!(
            "POST /admin/drain on {} (drops their queued requests)",
            replicas.join(", ")
        )],
        Action::RestartBatched(a) => {
            let work = remaining(replicas, a.batch, &RestartProgress::default());
            work.batches
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    format!(
                        "batch {}: restart {} and wait up to {} for ready",
                        i + 1,
                        b.join(", "),
                        crate::util::duration::format(a.ready_timeout)
                    )
                })
                .collect()
        }
        Action::CacheWarm(a) => vec![format!(
            "POST /admin/warm on {}, then wait until {} >= {}",
            replicas.join(", "),
            a.signal,
            a.threshold
        )],
        Action::WaitUntil(a) => vec![format!(
            "wait until check {} passes ({})",
            a.check,
            rb.checks
                .get(&a.check)
                .map(|c| c.success.source.clone())
                .unwrap_or_default()
        )],
        Action::Notify(a) => vec![format!("notify: {}", a.message)],
    }
}

/// How high the ramp may raise the limit: the plan's ramp end rate (headroom x healthy
/// capacity when known), else the larger of the stuck-state arrival rate and healthy
/// capacity.
fn ramp_ceiling(fixed: &Fixed, from: f64) -> f64 {
    let end = fixed.plan.ramp_end_rate;
    let fallback = fixed
        .inputs
        .arrival_rate
        .max(fixed.inputs.capacity.unwrap_or(0.0));
    (if end.is_finite() && end > 0.0 {
        end
    } else {
        fallback
    })
    .max(from)
}
