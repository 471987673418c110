//! The run's journal and the batched restart's progress, mirrored into one ConfigMap
//! (`recover-journal`, created by the manifests) so `recover resume` works from another
//! machine and a resumed run never evicts a finished pod again. One key per run:
//! `<run_id>.jsonl` for the journal, `<run_id>.rollout.json` for the rollout state.

use super::api::{call_error, is_not_found};
use super::rbac;
use super::rollout::{configmap_key, RolloutState};
use crate::platform::PlatformError;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};

/// A ConfigMap holds at most 1 MiB in all; keep one run well inside it.
pub const MAX_JOURNAL_BYTES: usize = 512 * 1024;

pub struct JournalStore {
    api: Api<ConfigMap>,
    name: String,
}

impl JournalStore {
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        JournalStore {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
        }
    }

    async fn put(&self, key: &str, value: &str) -> Result<(), PlatformError> {
        let patch = serde_json::json!({ "data": { key: value } });
        self.api
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|e| {
                let hint = if is_not_found(&e) {
                    " (apply manifests/: it creates this ConfigMap)"
                } else {
                    ""
                };
                call_error(
                    &rbac::CONFIGMAPS_PATCH,
                    format!("writing {key} to ConfigMap {}{hint}", self.name),
                    e,
                )
            })
    }

    async fn get(&self, key: &str) -> Result<Option<String>, PlatformError> {
        match self.api.get_opt(&self.name).await {
            Ok(cm) => Ok(cm.and_then(|cm| cm.data).and_then(|mut d| d.remove(key))),
            Err(e) => Err(call_error(
                &rbac::CONFIGMAPS_GET,
                format!("reading ConfigMap {}", self.name),
                e,
            )),
        }
    }

    pub async fn mirror_journal(&self, run_id: &str, jsonl: &str) -> Result<(), PlatformError> {
        if jsonl.len() > MAX_JOURNAL_BYTES {
            return Err(PlatformError::Other(format!(
                "journal of run {run_id} is {} bytes, more than the {MAX_JOURNAL_BYTES} a ConfigMap mirror keeps; the local journal is complete",
                jsonl.len()
            )));
        }
        self.put(&configmap_key(run_id, ".jsonl"), jsonl).await
    }

    pub async fn fetch_journal(&self, run_id: &str) -> Result<Option<String>, PlatformError> {
        self.get(&configmap_key(run_id, ".jsonl")).await
    }

    pub async fn save_rollout(
        &self,
        run_id: &str,
        state: &RolloutState,
    ) -> Result<(), PlatformError> {
        let json = serde_json::to_string(state).map_err(|e| PlatformError::Other(e.to_string()))?;
        self.put(&configmap_key(run_id, ".rollout.json"), &json)
            .await
    }

    pub async fn load_rollout(&self, run_id: &str) -> Result<Option<RolloutState>, PlatformError> {
        match self.get(&configmap_key(run_id, ".rollout.json")).await? {
            None => Ok(None),
            Some(s) => serde_json::from_str(&s).map(Some).map_err(|e| {
                PlatformError::Other(format!(
                    "rollout state of run {run_id} in ConfigMap {} is unreadable: {e}",
                    self.name
                ))
            }),
        }
    }
}
