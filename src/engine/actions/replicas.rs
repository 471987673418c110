//! Actions on the service's replicas: `backlog.drain`, `restart.batched` (resuming a
//! half-done restart where the journal says it stopped) and `cache.warm`.

use super::super::batches::{remaining, RestartProgress};
use super::ctx::{figure, finished_event, record_to};
use super::{Act, Ctx, Preview, StepFailure, Tally};
use crate::platform::AdminOp;
use crate::runbook::action::{BacklogDrain, CacheWarm, ReplicaSelect, RestartBatched};
use crate::util::duration::format as dur;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[async_trait::async_trait]
impl Act for BacklogDrain {
    async fn perform(&self, ctx: &Arc<Ctx>, step: &str, tally: &Tally) -> Result<(), StepFailure> {
        tally.set("drained", 0.0);
        for r in ctx.platform.replicas().await? {
            ctx.started(step, "replica.drain", Some(&r.id), json!({}));
            let reply = ctx.platform.admin(&r.id, AdminOp::Drain).await?;
            let n = reply.get("drained").and_then(|v| v.as_f64()).unwrap_or(0.0);
            tally.add("drained", n);
            ctx.finished(
                step,
                "replica.drain",
                Some(&r.id),
                reply,
                figure("drained", n),
            );
            ctx.info(step, format!("{}: dropped {n} queued requests", r.id));
        }
        let total = tally.snapshot().figures["drained"];
        tally.say(format!("dropped {total} queued requests on purpose"));
        Ok(())
    }

    fn describe(&self, p: &Preview) -> Vec<String> {
        vec![format!(
            "POST /admin/drain on {} (drops their queued requests)",
            p.replicas.join(", ")
        )]
    }
}

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
                    "batch {}: restart {} and wait up to {} for ready",
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
        // Every replica at once: each warms its own cache, and the readmission waits on
        // the slowest, so one after the other would only add their times up.
        let replicas = ctx.platform.replicas().await?;
        for r in &replicas {
            ctx.started(step, "replica.warm", Some(&r.id), json!({}));
        }
        let replies = futures::future::join_all(
            replicas
                .iter()
                .map(|r| ctx.platform.admin(&r.id, AdminOp::Warm)),
        )
        .await;
        let mut failed = None;
        for (r, reply) in replicas.iter().zip(replies) {
            let after = match reply {
                Ok(reply) => reply,
                Err(e) => {
                    let after = json!({ "error": e.to_string() });
                    failed.get_or_insert(e);
                    after
                }
            };
            ctx.finished(step, "replica.warm", Some(&r.id), after, Default::default());
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
        vec![format!(
            "POST /admin/warm on {} at once, then wait until {} >= {}",
            p.replicas.join(", "),
            self.signal,
            self.threshold
        )]
    }
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
    ctx.started(step, "replica.restart", Some(replica), json!({}));
    let platform = ctx.platform.clone();
    let journal = ctx.journal.clone();
    let (step_s, r) = (step.to_string(), replica.to_string());
    let t0 = Instant::now();
    let task = tokio::spawn(async move {
        let res = platform.restart(&r).await;
        if res.is_ok() {
            let f = figure("seconds", t0.elapsed().as_secs_f64());
            record_to(
                &journal,
                finished_event(&step_s, "replica.restart", Some(&r), json!({}), f),
            );
        }
        res
    });
    match task.await {
        Ok(Ok(())) => {
            ctx.info(step, format!("{replica} restarted"));
            Ok(())
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
        let f = figure("seconds", t0.elapsed().as_secs_f64());
        ctx.finished(step, "replica.ready", Some(r), json!({}), f);
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
