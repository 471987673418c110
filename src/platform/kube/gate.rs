//! The gate as the engine sees it on Kubernetes: write the limit (the total for the whole
//! service) into the ConfigMap every gate replica follows, then wait until every gate pod
//! that takes traffic reports the new resourceVersion as applied, all with the same
//! number of peers, equal to the number of ready gate pods: only then do their shares add
//! up to the total. "Set" means "in force everywhere, shared exactly", not "written".
//!
//! Only Ready gate pods are waited for (a Pending pod, a rollout's surge pod, a pod that
//! failed its probe gets no traffic), and they are read concurrently, each within its own
//! deadline.

use super::call::{self, WRITE};
use super::decide::{applied_version, reported_peers, PodView};
use super::fence::{Fence, Token, FENCE_ANNOTATION};
use super::limit_source::parse_limit;
use super::proxy::{Locator, PodReach};
use super::rbac::{self, FIELD_MANAGER, LIMIT_KEY};
use crate::gate::limit::Limit;
use crate::platform::{GateControl, PlatformError};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one gate pod reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateReport {
    pub pod: String,
    pub version: Option<String>,
    pub peers: Option<usize>,
}

/// Gate pods that do not report `want` with `ready` peers yet; empty when the limit is in
/// force everywhere and shared exactly. Zero gates is never "applied". Pure.
pub fn lagging(reports: &[GateReport], want: &str, ready: usize) -> Vec<String> {
    if reports.is_empty() {
        return vec!["<no ready gate pods>".to_string()];
    }
    reports
        .iter()
        .filter(|r| r.version.as_deref() != Some(want) || r.peers != Some(ready))
        .map(|r| {
            format!(
                "{} (at version {}, sharing with {} of {ready} ready gate pods)",
                r.pod,
                r.version.as_deref().unwrap_or("none"),
                r.peers.map_or("?".to_string(), |p| p.to_string())
            )
        })
        .collect()
}

pub struct KubeGate {
    pub(crate) configmaps: Api<ConfigMap>,
    pub(crate) pods: Api<Pod>,
    pub(crate) reach: Arc<dyn PodReach>,
    pub(crate) configmap: String,
    pub(crate) namespace: String,
    pub(crate) selector: String,
    pub(crate) metrics_port: u16,
    pub(crate) apply_timeout: Duration,
    pub(crate) poll: Duration,
    pub(crate) fence: Arc<Fence>,
}

impl KubeGate {
    /// The gate pods that take traffic now: Running, Ready, not terminating, with an IP.
    async fn ready_gate_pods(&self) -> Result<Vec<PodView>, PlatformError> {
        let lp = ListParams::default().labels(&self.selector);
        let list = call::call(
            &call::READ,
            &rbac::PODS_LIST,
            || format!("listing gate pods ({})", self.selector),
            || self.pods.list(&lp),
        )
        .await?;
        Ok(list
            .items
            .iter()
            .map(PodView::of)
            .filter(|p| p.serving())
            .collect())
    }

    /// What each ready gate pod reports right now, read concurrently; a pod that does not
    /// answer in time reports nothing.
    pub async fn applied(&self) -> Result<Vec<GateReport>, PlatformError> {
        let pods = self.ready_gate_pods().await?;
        let reads = pods.iter().map(|p| async move {
            let loc = Locator::of(p, self.metrics_port, "/metrics");
            match self.reach.get(&loc).await {
                Ok(text) => GateReport {
                    pod: p.name.clone(),
                    version: applied_version(&text),
                    peers: reported_peers(&text),
                },
                Err(e) => {
                    tracing::debug!(pod = %p.name, error = %e, "gate metrics not readable yet");
                    GateReport {
                        pod: p.name.clone(),
                        version: None,
                        peers: None,
                    }
                }
            }
        });
        Ok(futures::future::join_all(reads).await)
    }
}

#[async_trait::async_trait]
impl GateControl for KubeGate {
    async fn get_limit(&self) -> Result<Limit, PlatformError> {
        let cm = call::call(
            &call::READ,
            &rbac::CONFIGMAPS_GET,
            || format!("reading ConfigMap {}", self.configmap),
            || self.configmaps.get(&self.configmap),
        )
        .await?;
        // No key yet: nobody set a limit, the gates pass everything through.
        match cm.data.as_ref().and_then(|d| d.get(LIMIT_KEY)) {
            None => Ok(Limit::unlimited()),
            Some(text) => parse_limit(text)
                .map_err(|m| PlatformError::Other(format!("ConfigMap {}: {m}", self.configmap))),
        }
    }

    fn shell_flags(&self) -> Vec<String> {
        vec![format!(
            "--target kube --namespace {}",
            crate::util::shell::quote(&self.namespace)
        )]
    }

    async fn set_limit(&self, limit: &Limit) -> Result<(), PlatformError> {
        let json = serde_json::to_string(limit).map_err(|e| PlatformError::Other(e.to_string()))?;
        let what = format!("writing the limit into ConfigMap {}", self.configmap);
        let cm = self.fence.guard(&what, self.write_limit(&json)).await?;
        let want = cm.metadata.resource_version.unwrap_or_default();
        let started = Instant::now();
        loop {
            let reports = self.applied().await?;
            let behind = lagging(&reports, &want, reports.len());
            if behind.is_empty() {
                return Ok(());
            }
            if started.elapsed() >= self.apply_timeout {
                return Err(PlatformError::Timeout {
                    what: format!(
                        "gate pods to apply limit version {want}, shared by every ready gate pod; behind: {}",
                        behind.join(", ")
                    ),
                    after: started.elapsed(),
                });
            }
            self.fence
                .sleep("waiting for the gates to apply the limit", self.poll)
                .await?;
        }
    }
}

impl KubeGate {
    /// Write `json` as the limit, fenced: read the ConfigMap, refuse if a later holder of
    /// the lease wrote it, and write with the resourceVersion read and our [`Token`], so
    /// the API server refuses (409) a write that raced with anyone else's; a conflict reads
    /// again and decides again, a few times.
    async fn write_limit(&self, json: &str) -> Result<ConfigMap, PlatformError> {
        let name = &self.configmap;
        let pp = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        let mut conflicts = 0;
        loop {
            let cm = call::call(
                &call::READ,
                &rbac::CONFIGMAPS_GET,
                || {
                    format!(
                        "reading ConfigMap {name} (apply manifests/: it creates this ConfigMap)"
                    )
                },
                || self.configmaps.get(name),
            )
            .await?;
            let found = cm
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(FENCE_ANNOTATION))
                .and_then(|t| Token::parse(t));
            let mine = self.fence.token();
            if let Some(t) = &mine {
                if !t.may_overwrite(found.as_ref()) {
                    return Err(PlatformError::LockLost {
                        what: format!("writing the limit into ConfigMap {name}"),
                        why: format!(
                            "it was last written under a later holding of the lease ({})",
                            found.map(|f| f.render()).unwrap_or_default()
                        ),
                    });
                }
            }
            let patch = Patch::Merge(serde_json::json!({
                "metadata": {
                    "resourceVersion": cm.metadata.resource_version,
                    "annotations": { FENCE_ANNOTATION: mine.map(|t| t.render()) },
                },
                "data": { LIMIT_KEY: json },
            }));
            match call::call(
                &WRITE,
                &rbac::CONFIGMAPS_PATCH,
                || format!("patching ConfigMap {name}"),
                || self.configmaps.patch(name, &pp, &patch),
            )
            .await
            {
                Ok(cm) => return Ok(cm),
                Err(e) if super::api::is_conflict_error(&e) && conflicts < 5 => {
                    conflicts += 1;
                    tracing::info!(configmap = %name, conflicts, "the limit ConfigMap changed under our write; reading it again");
                }
                Err(e) => return Err(e),
            }
        }
    }
}
