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
    pub(crate) selector: String,
    pub(crate) metrics_port: u16,
    pub(crate) apply_timeout: Duration,
    pub(crate) poll: Duration,
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

    async fn set_limit(&self, limit: &Limit) -> Result<(), PlatformError> {
        let json = serde_json::to_string(limit).map_err(|e| PlatformError::Other(e.to_string()))?;
        let patch = Patch::Merge(serde_json::json!({ "data": { LIMIT_KEY: json } }));
        let pp = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        let cm = call::call(
            &WRITE,
            &rbac::CONFIGMAPS_PATCH,
            || format!("patching ConfigMap {}", self.configmap),
            || self.configmaps.patch(&self.configmap, &pp, &patch),
        )
        .await
        .map_err(|e| match e {
            PlatformError::Call { what, source } => PlatformError::Call {
                what: format!("{what} (apply manifests/: it creates this ConfigMap)"),
                source,
            },
            other => other,
        })?;
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
            tokio::time::sleep(self.poll).await;
        }
    }
}
