//! [`Platform`] for [`KubePlatform`]: each method is one short sequence of API calls
//! around a decision from [`super::decide`].

use super::call::{self, READ};
use super::decide::{batch_progress, PodRef, PodView};
use super::disrupt::{take_down, TakenDown};
use super::journal::{self, add_summary_line, SummaryLine};
use super::proxy::{parse_address, Locator};
use super::{lease, rbac, KubePlatform};
use crate::platform::{
    AdminOp, AdminReply, GateControl, LockGuard, LockHolder, Platform, PlatformError, Replica,
    ScrapeEndpoint, StepEvent,
};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams};
use std::sync::Arc;
use std::time::{Duration, Instant};

impl KubePlatform {
    async fn get_pod(&self, name: &str) -> Result<Option<PodView>, PlatformError> {
        Ok(call::call(
            &READ,
            &rbac::PODS_GET,
            || format!("reading pod {name}"),
            || self.pods.get_opt(name),
        )
        .await?
        .as_ref()
        .map(PodView::of))
    }

    /// Wait until the pod with `uid` is gone from the API (its containers stopped, its
    /// grace period over), not merely marked for deletion: a terminating pod may still be
    /// serving, and the budget still counts it. A new pod under the same name (a
    /// StatefulSet) is another pod.
    async fn wait_gone(&self, pod: &PodRef) -> Result<(), PlatformError> {
        let started = Instant::now();
        loop {
            match self.get_pod(&pod.name).await? {
                None => return Ok(()),
                Some(p) if p.uid != pod.uid => return Ok(()),
                Some(_) => {}
            }
            if started.elapsed() > self.opts.evict_timeout {
                return Err(PlatformError::Timeout {
                    what: format!("pod {} to terminate after its eviction", pod.name),
                    after: started.elapsed(),
                });
            }
            tokio::time::sleep(self.opts.poll).await;
        }
    }

    /// The pod cache, started on first use.
    fn cache(&self) -> &super::pod_cache::PodCache {
        self.pod_cache
            .get_or_init(|| super::pod_cache::PodCache::start(self.pods.clone()))
    }

    /// Pods matching `selector` that can be scraped (Running with an IP): from the pod
    /// cache once it has its first list, else listed.
    async fn reachable(&self, selector: &str) -> Result<Vec<PodView>, PlatformError> {
        if let Some(pods) = self.cache().matching(selector) {
            return Ok(pods.into_iter().filter(PodView::reachable).collect());
        }
        let lp = ListParams::default().labels(selector);
        let list = call::call(
            &READ,
            &rbac::PODS_LIST,
            || format!("listing pods {selector}"),
            || self.pods.list(&lp),
        )
        .await?;
        Ok(list
            .items
            .iter()
            .map(PodView::of)
            .filter(PodView::reachable)
            .collect())
    }

    /// Keep the step in the run's summary, mirrored beside its journal.
    fn summarise(&self, event: &StepEvent) {
        let (run, json) = {
            let mut mem = self.memory.lock().unwrap_or_else(|e| e.into_inner());
            add_summary_line(
                &mut mem.summary,
                SummaryLine {
                    at: crate::util::time::now_rfc3339(),
                    step: event.step.clone(),
                    phase: event.phase.clone(),
                    message: event.message.clone(),
                },
            );
            (
                event.run_id.clone(),
                serde_json::to_string(&mem.summary).unwrap_or_default(),
            )
        };
        self.mirror.put(journal::summary_key(&run), json);
    }
}

#[async_trait::async_trait]
impl Platform for KubePlatform {
    fn kind(&self) -> &'static str {
        "kube"
    }

    fn target_id(&self) -> String {
        super::target_id(&self.opts.namespace, &self.opts.workload)
    }

    /// Running pods (ready or not); Pending, terminating and terminal pods are not replicas.
    async fn replicas(&self) -> Result<Vec<Replica>, PlatformError> {
        Ok(self
            .target_pods()
            .await?
            .into_iter()
            .filter(PodView::running)
            .map(|p| Replica {
                id: p.name,
                ready: p.ready,
                started_at: p.started_at,
            })
            .collect())
    }

    async fn hazards(&self) -> Result<Vec<crate::platform::Hazard>, PlatformError> {
        super::hazards::read(self).await
    }

    async fn restart(&self, replica: &str) -> Result<(), PlatformError> {
        self.fence.check(&format!("restarting pod {replica}"))?;
        let state = self.rollout().await?;
        let current = self.get_pod(replica).await?;
        let original = state.original(replica).cloned();
        let pod = match (current, original) {
            // Gone already (evicted before a crash, before we could record it).
            (None, Some(o)) => {
                self.record_evicted(state, &o);
                return Ok(());
            }
            (None, None) => return Err(PlatformError::NoSuchReplica(replica.to_string())),
            (Some(p), _) if state.was_evicted(&p.uid) => {
                // Evicted earlier in this run (maybe by an instance that crashed): never twice.
                return Ok(());
            }
            // Born during this rollout (a new UID, maybe under the old name): a
            // replacement, restarted by definition.
            (Some(p), _) if !state.in_snapshot(&p.uid) => return Ok(()),
            (Some(p), _) if p.terminating || p.terminal() => {
                self.record_evicted(state, &PodRef::of(&p));
                return Ok(());
            }
            (Some(p), _) => PodRef::of(&p),
        };
        let how = take_down(
            self.disruptor.as_ref(),
            &self.fence,
            &self.opts.namespace,
            &pod,
            self.opts.evict_timeout,
            self.opts.allow_delete_fallback,
            self.opts.evict_retry,
        )
        .await?;
        self.record_evicted(state, &pod);
        if let TakenDown::Deleted { blocked } = &how {
            let note = StepEvent {
                run_id: self.run_key(),
                step: "restart".to_string(),
                phase: "delete-fallback".to_string(),
                message: format!(
                    "pod {replica} deleted after eviction stayed blocked: {}",
                    blocked.explain(&self.opts.namespace, replica)
                ),
            };
            if let Err(e) = self.record_event(&note).await {
                tracing::warn!(error = %e, "could not record the delete-fallback event");
            }
        }
        self.wait_gone(&pod).await
    }

    async fn wait_ready(
        &self,
        replicas: &[String],
        timeout: Duration,
    ) -> Result<(), PlatformError> {
        let state = self.rollout_state().ok_or_else(|| {
            PlatformError::Other(
                "wait_ready: no batched restart is underway in this run".to_string(),
            )
        })?;
        let started = Instant::now();
        loop {
            let progress = batch_progress(&state, replicas, &self.target_pods().await?);
            if progress.done() {
                return Ok(());
            }
            if started.elapsed() >= timeout {
                return Err(PlatformError::Timeout {
                    what: format!(
                        "replacements ready ({} of {} new pods ready; not ready: [{}]; old still serving: {:?})",
                        progress.new_ready,
                        progress.new_needed,
                        progress.new_waiting.join(", "),
                        progress.old_remaining
                    ),
                    after: started.elapsed(),
                });
            }
            tokio::time::sleep(self.opts.poll).await;
        }
    }

    /// Only to a Running pod with an IP: a Pending pod has nothing to drain or warm.
    async fn admin(&self, replica: &str, op: AdminOp) -> Result<AdminReply, PlatformError> {
        let pod = self
            .get_pod(replica)
            .await?
            .ok_or_else(|| PlatformError::NoSuchReplica(replica.to_string()))?;
        if !pod.reachable() {
            return Err(PlatformError::Other(format!(
                "{} on pod {}: not running with an IP, no admin call made",
                op.path(),
                pod.describe()
            )));
        }
        let what = format!("{} on pod {replica}", op.path());
        let text = self
            .fence
            .guard(
                &what,
                self.reach
                    .post(&Locator::of(&pod, self.opts.service_port, op.path())),
            )
            .await?;
        Ok(AdminReply::read(op, &text))
    }

    fn gate(&self) -> Arc<dyn GateControl> {
        Arc::new(self.kube_gate())
    }

    async fn scrape_endpoints(&self) -> Result<Vec<ScrapeEndpoint>, PlatformError> {
        let mut out = Vec::new();
        let mut add = |role: &str, p: &PodView, port: u16| {
            out.push(ScrapeEndpoint {
                role: role.to_string(),
                locator: self.reach.address(&Locator::of(p, port, "/metrics")),
                instance: p.name.clone(),
            })
        };
        let resolved = self.resolved().await?;
        let targets = match self.cache().matching(&resolved.selector) {
            Some(pods) => pods
                .into_iter()
                .filter(|p| resolved.owner.is_none() || p.owner == resolved.owner)
                .collect(),
            None => self.target_pods().await?,
        };
        for p in targets.iter().filter(|p| p.reachable()) {
            add("service", p, self.opts.service_port);
        }
        for p in self.reachable(&self.opts.gate_selector).await? {
            add("gate", &p, self.opts.gate_metrics_port);
        }
        if let Some(sel) = self.opts.clients_selector.clone() {
            for p in self.reachable(&sel).await? {
                add("clients", &p, self.opts.clients_metrics_port);
            }
        }
        Ok(out)
    }

    async fn scrape(&self, endpoint: &ScrapeEndpoint) -> Result<String, PlatformError> {
        let mut loc = parse_address(&endpoint.locator).ok_or_else(|| {
            PlatformError::Other(format!("not a pod address: {}", endpoint.locator))
        })?;
        if loc.pod.is_empty() {
            loc.pod = endpoint.instance.clone();
        }
        self.reach.get(&loc).await
    }

    async fn lock(&self, holder: &LockHolder) -> Result<Box<dyn LockGuard>, PlatformError> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), &self.opts.namespace);
        let target = self.target_id();
        let name = lease::lease_name(target.trim_start_matches("kube:"));
        let acquired =
            lease::acquire(&leases, &name, &target, holder, self.opts.lease_duration).await?;
        let guard = lease::LeaseGuard::start(
            leases,
            name,
            holder.clone(),
            self.opts.lease_duration,
            acquired,
            self.fence.clone(),
        );
        self.adopt_run(&holder.run_id).await?;
        Ok(Box::new(guard))
    }

    /// Queued, written in the background ([`super::event_writer`]); the Event after a lost
    /// lease is written at once, with what this platform left where.
    async fn record_event(&self, event: &StepEvent) -> Result<(), PlatformError> {
        if event.phase == crate::platform::LOCK_LOST_PHASE {
            if !self.fence.last_word() {
                return Err(PlatformError::LockLost {
                    what: "recording a second event after the loss".into(),
                    why: "only one is written".into(),
                });
            }
            let mut e = event.clone();
            e.message = format!("{}; {}", e.message, self.left_where());
            return self.events_out.write_now(&e).await;
        }
        self.fence.check("recording an event")?;
        self.summarise(event);
        self.events_out.send(event.clone())
    }

    /// Queued for the background writer and awaited (the engine calls this off the
    /// critical path): a slow API server delays the mirror, never a step.
    async fn mirror_journal(&self, run_id: &str, jsonl: &str) -> Result<(), PlatformError> {
        self.fence
            .check(&format!("mirroring the journal of run {run_id}"))?;
        let generation = self
            .mirror
            .put(journal::journal_key(run_id), jsonl.to_string());
        if self.mirror.flush(generation, Duration::from_secs(30)).await {
            Ok(())
        } else {
            Err(PlatformError::Timeout {
                what: format!("mirroring the journal of run {run_id} to its ConfigMap"),
                after: Duration::from_secs(30),
            })
        }
    }

    async fn fetch_journal(&self, run_id: &str) -> Result<Option<String>, PlatformError> {
        self.mirror.store().journal(run_id).await
    }

    /// Queued for the background writer like the journal; not awaited (the series is for
    /// the postmortem, never for a resume).
    async fn mirror_observed(&self, run_id: &str, json: &str) -> Result<(), PlatformError> {
        self.fence
            .check(&format!("mirroring the observed series of run {run_id}"))?;
        self.mirror
            .put(journal::observed_key(run_id), json.to_string());
        Ok(())
    }

    async fn fetch_observed(&self, run_id: &str) -> Result<Option<String>, PlatformError> {
        self.mirror
            .store()
            .get(&journal::observed_key(run_id))
            .await
    }
}
