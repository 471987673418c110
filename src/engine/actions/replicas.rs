//! Actions on the service's replicas besides the drain ([`super::drain`]): `restart.batched`
//! (resuming a half-done restart where the journal says it stopped) and `cache.warm`.

use super::super::batches::{remaining, RestartProgress};
use super::super::journal::{unknown, ActionRecord, Event};
use super::super::restart::{decide, RestartDecision, RestartEvidence};
use super::ctx::append;
use super::{Act, Ctx, Preview, StepFailure, Tally};
use crate::platform::{AdminOp, AdminReply};
use crate::runbook::action::{CacheWarm, ReplicaSelect, RestartBatched, RestartWhen};
use crate::util::duration::format as dur;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[async_trait::async_trait]
impl Act for RestartBatched {
    async fn perform(&self, ctx: &Arc<Ctx>, step: &str, tally: &Tally) -> Result<(), StepFailure> {
        let mut ids: Vec<String> = ctx
            .platform
            .replicas()
            .await?
            .into_iter()
            .map(|r| r.id)
            .collect();
        ids.sort();
        let ids = select(self.replicas, ids, ctx.fixed.slow_replica.as_deref())?;
        let progress = ctx.restart.get(step).cloned().unwrap_or_default();
        let ids = match self.when {
            RestartWhen::Always => ids,
            RestartWhen::Needed => match needed(ctx, &ids, &progress).await? {
                RestartDecision::Restart { replicas, reason } => {
                    ctx.info(
                        step,
                        format!("restarting {}: {reason}", replicas.join(", ")),
                    );
                    tally.say(reason);
                    ids.into_iter().filter(|r| replicas.contains(r)).collect()
                }
                RestartDecision::Skip { reason } => {
                    ctx.info(step, reason.clone());
                    tally.set("restarted", 0.0);
                    tally.set("restart_skipped", 1.0);
                    tally.say(reason);
                    return Ok(());
                }
            },
        };
        let work = remaining(&ids, self.batch, &progress);
        tally.set("restarted", 0.0);
        tally.set("batches", work.batches.len() as f64);
        tally.set("skipped_already_restarted", progress.restarted.len() as f64);
        if !progress.restarted.is_empty() {
            ctx.info(
                step,
                format!(
                    "resuming: {} already restarted, {} awaiting ready",
                    progress.restarted.len(),
                    work.await_ready.len()
                ),
            );
        }
        if !work.await_ready.is_empty() {
            wait_ready(ctx, step, &work.await_ready, self.ready_timeout).await?;
        }
        for (i, batch) in work.batches.iter().enumerate() {
            if i > 0 && !self.pause.is_zero() {
                tokio::time::sleep(self.pause).await;
            }
            ctx.info(
                step,
                format!(
                    "batch {}/{}: {}",
                    i + 1,
                    work.batches.len(),
                    batch.join(", ")
                ),
            );
            for r in batch {
                restart_one(ctx, step, r).await?;
                tally.add("restarted", 1.0);
            }
            wait_ready(ctx, step, batch, self.ready_timeout).await?;
        }
        Ok(())
    }

    fn describe(&self, p: &Preview) -> Vec<String> {
        let only_if = match self.when {
            RestartWhen::Always => "",
            RestartWhen::Needed => " (only if needed: a replica not ready, named slow or not drained, or the gate admitting as much as the warm capacity; otherwise nothing)",
        };
        let ids = match select(
            self.replicas,
            p.replicas.to_vec(),
            p.fixed.slow_replica.as_deref(),
        ) {
            Ok(ids) => ids,
            Err(e) => return vec![format!("refuse: {e}")],
        };
        let work = remaining(&ids, self.batch, &RestartProgress::default());
        work.batches
            .iter()
            .enumerate()
            .map(|(i, b)| {
                format!(
                    "batch {}: restart {} and wait up to {} for ready{only_if}",
                    i + 1,
                    b.join(", "),
                    dur(self.ready_timeout)
                )
            })
            .collect()
    }
}

#[async_trait::async_trait]
impl Act for CacheWarm {
    async fn perform(&self, ctx: &Arc<Ctx>, step: &str, tally: &Tally) -> Result<(), StepFailure> {
        // Caches already warm (no restart, or the service warmed by serving): a warm call
        // would only cost its own time.
        if let Some(v) = ctx.snapshot().await.ok().and_then(|s| s.get(&self.signal)) {
            if v >= self.threshold {
                ctx.info(
                    step,
                    format!(
                        "{} = {v:.2} already (want >= {}): no warm call",
                        self.signal, self.threshold
                    ),
                );
                tally.set(&self.signal, v);
                tally.set("warm_skipped", 1.0);
                return Ok(());
            }
        }
        // After a drain alone the service answers at the warmth it kept: readmit while
        // the caches warm instead of turning those clients away for the warm call.
        super::readmit::open_while_warming(ctx, step, tally).await?;
        // Every replica at once: each warms its own cache, and the readmission waits on
        // the slowest, so one after the other would only add their times up.
        let replicas = ctx.platform.replicas().await?;
        for r in &replicas {
            ctx.started(
                step,
                ActionRecord::Warm {
                    replica: r.id.clone(),
                    warm_fraction: None,
                },
            )?;
        }
        let replies = futures::future::join_all(
            replicas
                .iter()
                .map(|r| ctx.platform.admin(&r.id, AdminOp::Warm)),
        )
        .await;
        let mut failed = None;
        for (r, reply) in replicas.iter().zip(replies) {
            let warm_fraction = match reply {
                Ok(AdminReply::Warmed(k)) => k,
                Ok(other) => unknown(format!("{} answered a warm with {other:?}", r.id)),
                Err(e) => {
                    let k = unknown(format!("the call failed: {e}"));
                    failed.get_or_insert(e);
                    k
                }
            };
            ctx.finished(
                step,
                ActionRecord::Warm {
                    replica: r.id.clone(),
                    warm_fraction: Some(warm_fraction),
                },
            )?;
        }
        if let Some(e) = failed {
            return Err(e.into());
        }
        loop {
            let snap = ctx.snapshot().await;
            match snap.as_ref().ok().and_then(|s| s.get(&self.signal)) {
                Some(v) => {
                    ctx.info(
                        step,
                        format!("{} = {v:.2} (want >= {})", self.signal, self.threshold),
                    );
                    if v >= self.threshold {
                        tally.set(&self.signal, v);
                        return Ok(());
                    }
                }
                None => ctx.info(
                    step,
                    format!("{}: no data yet; waiting (not a pass)", self.signal),
                ),
            }
            tokio::time::sleep(self.poll).await;
        }
    }

    fn describe(&self, p: &Preview) -> Vec<String> {
        let mut lines = vec![format!(
            "unless {1} >= {2} already: POST /admin/warm on {0} at once, then wait until {1} >= {2}",
            p.replicas.join(", "),
            self.signal,
            self.threshold
        )];
        // Which step this is: the runbook's own (its position decides what follows).
        let me = p.rb.steps.iter().find(|s| {
            matches!(&s.action, crate::runbook::action::Action::CacheWarm(w) if std::ptr::eq(w, self))
        });
        let me = me.or_else(|| {
            p.rb.steps.iter().find(
                |s| matches!(&s.action, crate::runbook::action::Action::CacheWarm(w) if w == self),
            )
        });
        if let Some(line) = me.and_then(|s| super::readmit::describe_while_warming(p.rb, &s.name)) {
            lines.push(line);
        }
        lines
    }
}

/// What the run knows for a `when: needed` restart, decided by [`decide`].
async fn needed(
    ctx: &Ctx,
    ids: &[String],
    progress: &RestartProgress,
) -> Result<RestartDecision, StepFailure> {
    let replicas = ctx
        .platform
        .replicas()
        .await?
        .into_iter()
        .filter(|r| ids.contains(&r.id))
        .map(|r| (r.id, r.ready))
        .collect();
    Ok(decide(&RestartEvidence {
        replicas,
        drained: ctx.drained(),
        slow: ctx.fixed.slow_replica.clone(),
        resumed: progress.restarted.iter().cloned().collect(),
        admit_rate: ctx
            .platform
            .gate()
            .get_limit()
            .await
            .ok()
            .and_then(|l| l.rate_per_s),
        capacity: ctx.fixed.inputs.capacity,
        capacity_cold: ctx.fixed.inputs.capacity_cold,
    }))
}

/// The replicas a restart acts on: all of them, or only the one the verdict named slow
/// (which must still be among them). Pure.
fn select(
    which: ReplicaSelect,
    ids: Vec<String>,
    slow: Option<&str>,
) -> Result<Vec<String>, StepFailure> {
    match (which, slow) {
        (ReplicaSelect::All, _) => Ok(ids),
        (ReplicaSelect::Slow, None) => Err(StepFailure::NoSlowReplica(
            "the run's verdict named no slow replica".into(),
        )),
        (ReplicaSelect::Slow, Some(s)) if ids.iter().any(|i| i == s) => Ok(vec![s.to_string()]),
        (ReplicaSelect::Slow, Some(s)) => Err(StepFailure::NoSlowReplica(format!(
            "{s} is not among the replicas now ({})",
            ids.join(", ")
        ))),
    }
}

/// Restart one replica on a task of its own, so that a Ctrl-C or timeout that drops the
/// step does not leave a replica stopped and not started: the restart finishes and its
/// journal record is written either way.
async fn restart_one(ctx: &Arc<Ctx>, step: &str, replica: &str) -> Result<(), StepFailure> {
    ctx.started(
        step,
        ActionRecord::Restart {
            replica: replica.into(),
            seconds: None,
        },
    )?;
    let platform = ctx.platform.clone();
    let journal = ctx.journal.clone();
    let (step_s, r) = (step.to_string(), replica.to_string());
    let t0 = Instant::now();
    let task = tokio::spawn(async move {
        platform.restart(&r).await?;
        let done = Event::ActionFinished {
            step: step_s,
            action: ActionRecord::Restart {
                replica: r,
                seconds: Some(t0.elapsed().as_secs_f64()),
            },
        };
        Ok::<_, crate::platform::PlatformError>(append(&journal, done))
    });
    match task.await {
        Ok(Ok(recorded)) => {
            ctx.note_restarted(replica);
            ctx.info(step, format!("{replica} restarted"));
            recorded
        }
        Ok(Err(source)) => Err(StepFailure::PlatformAt {
            what: format!("restarting {replica}"),
            source,
        }),
        Err(e) => Err(StepFailure::TaskFailed {
            replica: replica.into(),
            message: e.to_string(),
        }),
    }
}

async fn wait_ready(
    ctx: &Ctx,
    step: &str,
    replicas: &[String],
    timeout: Duration,
) -> Result<(), StepFailure> {
    let t0 = Instant::now();
    ctx.platform
        .wait_ready(replicas, timeout)
        .await
        .map_err(|source| StepFailure::PlatformAt {
            what: format!("waiting for {} to be ready", replicas.join(", ")),
            source,
        })?;
    for r in replicas {
        ctx.finished(
            step,
            ActionRecord::Ready {
                replica: r.clone(),
                seconds: t0.elapsed().as_secs_f64(),
            },
        )?;
    }
    ctx.info(step, format!("ready: {}", replicas.join(", ")));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> Vec<String> {
        ["replica-0", "replica-1", "replica-2"]
            .map(String::from)
            .to_vec()
    }

    #[test]
    fn slow_selects_only_the_named_replica_and_refuses_without_one() {
        assert_eq!(
            select(ReplicaSelect::All, ids(), Some("replica-1")).unwrap(),
            ids()
        );
        assert_eq!(
            select(ReplicaSelect::Slow, ids(), Some("replica-1")).unwrap(),
            vec!["replica-1".to_string()]
        );
        let e = select(ReplicaSelect::Slow, ids(), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("named no slow replica"), "{e}");
        let e = select(ReplicaSelect::Slow, ids(), Some("replica-9"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("replica-9") && e.contains("replica-0"), "{e}");
    }
}
