//! The gate as the engine sees it on Kubernetes: write the limit into the ConfigMap every
//! gate replica polls, then wait until each gate pod's `/metrics` (scraped through the pod
//! proxy) reports the new resourceVersion as applied. "Set" means "in force everywhere",
//! not "written".

use super::api::{call_error, live_pod_names};
use super::limit_source::parse_limit;
use super::proxy::PodProxy;
use super::rbac::{self, LIMIT_KEY};
use super::rollout::applied_version;
use crate::gate::limit::Limit;
use crate::platform::{GateControl, PlatformError};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, Patch, PatchParams};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Gate pods that do not report `want` yet (all of them when there are none: zero gates
/// is never "applied").
pub fn lagging(reports: &[(String, Option<String>)], want: &str) -> Vec<String> {
    if reports.is_empty() {
        return vec!["<no gate pods>".to_string()];
    }
    reports
        .iter()
        .filter(|(_, v)| v.as_deref() != Some(want))
        .map(|(p, v)| format!("{p} (at {})", v.as_deref().unwrap_or("none")))
        .collect()
}

pub struct KubeGate {
    pub(crate) configmaps: Api<ConfigMap>,
    pub(crate) pods: Api<Pod>,
    pub(crate) proxy: Arc<dyn PodProxy>,
    pub(crate) configmap: String,
    pub(crate) selector: String,
    pub(crate) metrics_port: u16,
    pub(crate) apply_timeout: Duration,
}

impl KubeGate {
    async fn gate_pods(&self) -> Result<Vec<String>, PlatformError> {
        live_pod_names(&self.pods, &self.selector, || {
            format!("listing gate pods ({})", self.selector)
        })
        .await
    }

    /// Which version each gate pod reports as applied right now.
    pub async fn applied(&self) -> Result<Vec<(String, Option<String>)>, PlatformError> {
        let mut out = Vec::new();
        for pod in self.gate_pods().await? {
            let v = match self.proxy.get(&pod, self.metrics_port, "/metrics").await {
                Ok(text) => applied_version(&text),
                Err(e) => {
                    tracing::debug!(pod = %pod, error = %e, "gate metrics not readable yet");
                    None
                }
            };
            out.push((pod, v));
        }
        Ok(out)
    }
}

#[async_trait::async_trait]
impl GateControl for KubeGate {
    async fn get_limit(&self) -> Result<Limit, PlatformError> {
        let cm = self.configmaps.get(&self.configmap).await.map_err(|e| {
            call_error(
                &rbac::CONFIGMAPS_GET,
                format!("reading ConfigMap {}", self.configmap),
                e,
            )
        })?;
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get(LIMIT_KEY))
            .ok_or_else(|| {
                PlatformError::Other(format!(
                    "ConfigMap {} has no key {LIMIT_KEY}",
                    self.configmap
                ))
            })?;
        parse_limit(text)
            .map_err(|m| PlatformError::Other(format!("ConfigMap {}: {m}", self.configmap)))
    }

    async fn set_limit(&self, limit: &Limit) -> Result<(), PlatformError> {
        let json = serde_json::to_string(limit).map_err(|e| PlatformError::Other(e.to_string()))?;
        let patch = serde_json::json!({ "data": { LIMIT_KEY: json } });
        let cm = self
            .configmaps
            .patch(
                &self.configmap,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(|e| {
                call_error(
                    &rbac::CONFIGMAPS_PATCH,
                    format!("patching ConfigMap {}", self.configmap),
                    e,
                )
            })?;
        let want = cm.metadata.resource_version.unwrap_or_default();
        let started = Instant::now();
        loop {
            let reports = self.applied().await?;
            let behind = lagging(&reports, &want);
            if behind.is_empty() {
                return Ok(());
            }
            if started.elapsed() >= self.apply_timeout {
                return Err(PlatformError::Timeout {
                    what: format!(
                        "gate pods to apply limit version {want}; behind: {}",
                        behind.join(", ")
                    ),
                    after: started.elapsed(),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
