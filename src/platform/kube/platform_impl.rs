//! [`Platform`] for [`KubePlatform`]: each method is one short sequence of API calls
//! around a decision from [`super::rollout`].

use super::api::{call_error, live_pod_names};
use super::disrupt::{take_down, TakenDown};
use super::proxy::{parse_locator, proxy_path};
use super::rollout::{batch_progress, PodView};
use super::{events, lease, rbac, KubePlatform};
use crate::platform::{
    AdminOp, GateControl, LockGuard, LockHolder, Platform, PlatformError, Replica, ScrapeEndpoint,
    StepEvent,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, PostParams};
use std::sync::Arc;
use std::time::{Duration, Instant};

impl KubePlatform {
    /// Wait until `pod` is gone or terminating (out of service, replacement on its way).
    async fn wait_gone(&self, pod: &str) -> Result<(), PlatformError> {
        let started = Instant::now();
        loop {
            match self.pods.get_opt(pod).await {
                Ok(None) => return Ok(()),
                Ok(Some(p)) if PodView::of(&p).terminating => return Ok(()),
                Ok(Some(_)) => {}
                Err(e) => return Err(call_error(&rbac::PODS_GET, format!("reading pod {pod}"), e)),
            }
            if started.elapsed() > self.opts.evict_timeout {
                return Err(PlatformError::Timeout {
                    what: format!("pod {pod} to terminate after its eviction"),
                    after: started.elapsed(),
                });
            }
            tokio::time::sleep(self.opts.poll).await;
        }
    }

    async fn list_selected(&self, selector: &str) -> Result<Vec<String>, PlatformError> {
        live_pod_names(&self.pods, selector, || format!("listing pods {selector}")).await
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

    async fn replicas(&self) -> Result<Vec<Replica>, PlatformError> {
        Ok(self
            .target_pods()
            .await?
            .into_iter()
            .filter(|p| !p.terminating)
            .map(|p| Replica {
                id: p.name,
                ready: p.ready,
                started_at: p.started_at,
            })
            .collect())
    }

    async fn restart(&self, replica: &str) -> Result<(), PlatformError> {
        let mut state = self.rollout().await?;
        if state.evicted.iter().any(|e| e == replica) {
            // Evicted earlier in this run (maybe by an instance that crashed): never twice.
            return Ok(());
        }
        let current = self
            .pods
            .get_opt(replica)
            .await
            .map_err(|e| call_error(&rbac::PODS_GET, format!("reading pod {replica}"), e))?;
        let in_snapshot = state.snapshot.iter().any(|s| s == replica);
        match current {
            None if in_snapshot => {
                // Gone already (evicted before a crash, before we could record it).
                state.record_evicted(replica);
                return self.store_rollout(state).await;
            }
            None => return Err(PlatformError::NoSuchReplica(replica.to_string())),
            Some(p) if PodView::of(&p).terminating => {
                state.record_evicted(replica);
                return self.store_rollout(state).await;
            }
            // Born during this rollout: a replacement, restarted by definition. The engine
            // lists replicas by name, and a resumed engine sees the new names.
            Some(_) if !in_snapshot => return Ok(()),
            Some(_) => {}
        }
        let how = take_down(
            self.disruptor.as_ref(),
            replica,
            self.opts.evict_timeout,
            self.opts.allow_delete_fallback,
            self.opts.evict_retry,
        )
        .await?;
        state.record_evicted(replica);
        self.store_rollout(state).await?;
        if let TakenDown::Deleted { blocked_by } = &how {
            let note = StepEvent {
                run_id: self.run_key(),
                step: "restart".to_string(),
                phase: "delete-fallback".to_string(),
                message: format!(
                    "pod {replica} deleted after eviction stayed blocked: {blocked_by}"
                ),
            };
            if let Err(e) = self.record_event(&note).await {
                tracing::warn!(error = %e, "could not record the delete-fallback event");
            }
        }
        self.wait_gone(replica).await
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
                        "replacements ready ({} of {} new pods ready; old still serving: {:?})",
                        progress.new_ready, progress.new_needed, progress.old_remaining
                    ),
                    after: started.elapsed(),
                });
            }
            tokio::time::sleep(self.opts.poll).await;
        }
    }

    async fn admin(&self, replica: &str, op: AdminOp) -> Result<serde_json::Value, PlatformError> {
        let text = self
            .proxy
            .post(replica, self.opts.service_port, op.path())
            .await?;
        serde_json::from_str(&text).map_err(|e| PlatformError::Call {
            what: format!(
                "{} on pod {replica}: reply is not JSON: {}",
                op.path(),
                text.chars().take(200).collect::<String>()
            ),
            source: Box::new(e),
        })
    }

    fn gate(&self) -> Arc<dyn GateControl> {
        Arc::new(self.kube_gate())
    }

    async fn scrape_endpoints(&self) -> Result<Vec<ScrapeEndpoint>, PlatformError> {
        let ns = &self.opts.namespace;
        let mut out = Vec::new();
        let mut add = |role: &str, pod: String, port: u16| {
            out.push(ScrapeEndpoint {
                role: role.to_string(),
                locator: proxy_path(ns, &pod, port, "/metrics"),
                instance: pod,
            })
        };
        for p in self
            .target_pods()
            .await?
            .into_iter()
            .filter(|p| !p.terminating)
        {
            add("service", p.name, self.opts.service_port);
        }
        for pod in self.list_selected(&self.opts.gate_selector).await? {
            add("gate", pod, self.opts.gate_metrics_port);
        }
        if let Some(sel) = self.opts.clients_selector.clone() {
            for pod in self.list_selected(&sel).await? {
                add("clients", pod, self.opts.clients_metrics_port);
            }
        }
        Ok(out)
    }

    async fn scrape(&self, endpoint: &ScrapeEndpoint) -> Result<String, PlatformError> {
        let (pod, port, path) = parse_locator(&endpoint.locator).ok_or_else(|| {
            PlatformError::Other(format!("not a pod proxy locator: {}", endpoint.locator))
        })?;
        self.proxy.get(&pod, port, &path).await
    }

    async fn lock(&self, holder: &LockHolder) -> Result<Box<dyn LockGuard>, PlatformError> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), &self.opts.namespace);
        let target = self.target_id();
        let name = lease::lease_name(target.trim_start_matches("kube:"));
        lease::acquire(&leases, &name, &target, holder, self.opts.lease_duration).await?;
        self.adopt_run(&holder.run_id).await?;
        Ok(Box::new(lease::LeaseGuard::start(
            leases,
            name,
            holder.clone(),
            self.opts.lease_duration,
        )))
    }

    async fn record_event(&self, event: &StepEvent) -> Result<(), PlatformError> {
        let deployment = self.deployment_name().await?;
        let ev = events::build(
            &self.opts.namespace,
            &deployment,
            &self.opts.identity,
            event,
        );
        let api: Api<Event> = Api::namespaced(self.client.clone(), &self.opts.namespace);
        api.create(&PostParams::default(), &ev)
            .await
            .map(|_| ())
            .map_err(|e| {
                call_error(
                    &rbac::EVENTS_CREATE,
                    format!("recording event on deployment {deployment}"),
                    e,
                )
            })
    }

    async fn mirror_journal(&self, run_id: &str, jsonl: &str) -> Result<(), PlatformError> {
        self.journal.mirror_journal(run_id, jsonl).await
    }

    async fn fetch_journal(&self, run_id: &str) -> Result<Option<String>, PlatformError> {
        self.journal.fetch_journal(run_id).await
    }
}
