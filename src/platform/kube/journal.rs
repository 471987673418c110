//! The run's journal, the batched restart's progress and the run's summary, mirrored into
//! one ConfigMap (`recover-journal`, created by the manifests) so `recover resume` works
//! from another machine or a new Job, a resumed run never evicts a finished pod again, and
//! what the run did outlives the Events' one-hour TTL. One key group per run:
//! `<run>.jsonl`, `<run>.rollout.json`, `<run>.summary.json`, `<run>.observed.json` (the
//! series the run observed, bounded by the engine to fit one value).
//!
//! The object must stay under the API server's 1 MiB limit: every write drops the oldest
//! runs first ([`super::decide::keys::prune`]), decided on the same read the write is
//! conditioned on (a resourceVersion precondition: a concurrent writer makes it 409, and
//! it is read and decided again). A value over [`MAX_RUN_BYTES`] is cut to its first and
//! last lines and marked (`<key>.cut`), never refused: one huge journal must not wedge the
//! rollout's progress behind it. A journal marked cut is not resumed from (its middle is
//! missing); the local journal is complete. Writes go through [`Mirror`], a background
//! writer that coalesces them (the latest value of a key wins), so a slow or failing
//! ConfigMap write never sits on the restart path. Every write is fenced by the lease.

use super::api::is_conflict_error;
use super::call::{self, READ, WRITE};
use super::decide::keys::{cut_to, prune};
use super::decide::{configmap_key, RolloutState};
use super::fence::Fence;
use super::rbac::{self, FIELD_MANAGER};
use crate::platform::PlatformError;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{watch, Notify};

/// What the ConfigMap may hold in all: under the API server's 1 MiB object limit with
/// room for its metadata.
pub const BUDGET_BYTES: usize = 900 * 1024;
/// One run's journal; a longer one stays complete on the local disk only.
pub const MAX_RUN_BYTES: usize = 512 * 1024;

pub fn journal_key(run_id: &str) -> String {
    configmap_key(run_id, ".jsonl")
}
pub fn rollout_key(run_id: &str) -> String {
    configmap_key(run_id, ".rollout.json")
}
pub fn summary_key(run_id: &str) -> String {
    configmap_key(run_id, ".summary.json")
}
pub fn observed_key(run_id: &str) -> String {
    configmap_key(run_id, ".observed.json")
}

/// Reads and pruned writes of the journal ConfigMap.
#[derive(Clone)]
pub struct JournalStore {
    api: Api<ConfigMap>,
    name: String,
    fence: Arc<Fence>,
}

/// The marker key saying `key`'s value was cut to fit.
pub fn cut_key(key: &str) -> String {
    format!("{key}.cut")
}

/// `values` with every value over [`MAX_RUN_BYTES`] cut to fit, and a marker for each.
/// Pure.
pub fn fit(values: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (key, value) in values {
        match cut_to(value, MAX_RUN_BYTES) {
            None => {
                out.insert(key.clone(), value.clone());
            }
            Some(cut) => {
                out.insert(
                    cut_key(key),
                    format!(
                        "{{\"bytes\":{},\"kept\":{},\"why\":\"over the {MAX_RUN_BYTES} bytes a value may take; the local journal is complete\"}}",
                        value.len(),
                        cut.len()
                    ),
                );
                out.insert(key.clone(), cut);
            }
        }
    }
    out
}

impl JournalStore {
    pub fn new(client: kube::Client, namespace: &str, name: &str, fence: Arc<Fence>) -> Self {
        JournalStore {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            fence,
        }
    }

    async fn read(&self) -> Result<Option<ConfigMap>, PlatformError> {
        call::call(
            &READ,
            &rbac::CONFIGMAPS_GET,
            || format!("reading ConfigMap {}", self.name),
            || self.api.get_opt(&self.name),
        )
        .await
    }

    /// Write `values` (cut to fit), dropping the oldest runs' keys as needed to stay in
    /// budget, conditioned on the resourceVersion the pruning was decided on.
    pub async fn write(&self, values: &BTreeMap<String, String>) -> Result<(), PlatformError> {
        let values = fit(values);
        let mut conflicts = 0;
        loop {
            let what = format!("writing to ConfigMap {}", self.name);
            match self.fence.guard(&what, self.write_once(&values)).await {
                Err(e) if is_conflict_error(&e) && conflicts < 5 => {
                    conflicts += 1;
                    tracing::info!(configmap = %self.name, conflicts, "the journal ConfigMap changed under our write; reading it again");
                }
                other => return other,
            }
        }
    }

    async fn write_once(&self, values: &BTreeMap<String, String>) -> Result<(), PlatformError> {
        let cm = self.read().await?.ok_or_else(|| {
            PlatformError::Other(format!(
                "ConfigMap {} does not exist; apply manifests/: it creates it",
                self.name
            ))
        })?;
        let version = cm.metadata.resource_version.clone();
        let current = cm.data.unwrap_or_default();
        let sizes: BTreeMap<String, usize> =
            current.iter().map(|(k, v)| (k.clone(), v.len())).collect();
        let writes: BTreeMap<String, usize> =
            values.iter().map(|(k, v)| (k.clone(), v.len())).collect();
        let dropped = prune(&sizes, &writes, BUDGET_BYTES);
        if !dropped.is_empty() {
            tracing::info!(configmap = %self.name, keys = ?dropped, "pruning the oldest runs from the journal mirror to stay under 1 MiB");
        }
        let mut data = serde_json::Map::new();
        for k in dropped {
            data.insert(k, serde_json::Value::Null);
        }
        for (k, v) in values {
            data.insert(k.clone(), serde_json::Value::String(v.clone()));
            // A value that fits now clears an older cut marker.
            let marker = cut_key(k);
            if !values.contains_key(&marker) && current.contains_key(&marker) {
                data.insert(marker, serde_json::Value::Null);
            }
        }
        let patch = Patch::Merge(serde_json::json!({
            "metadata": { "resourceVersion": version },
            "data": data,
        }));
        let pp = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        call::call(
            &WRITE,
            &rbac::CONFIGMAPS_PATCH,
            || format!("writing to ConfigMap {}", self.name),
            || self.api.patch(&self.name, &pp, &patch),
        )
        .await
        .map(|_| ())
    }

    /// The mirrored journal of `run_id`; an error if it was cut to fit (resuming from it
    /// would redo what its missing middle recorded as done).
    pub async fn journal(&self, run_id: &str) -> Result<Option<String>, PlatformError> {
        let key = journal_key(run_id);
        let data = self
            .read()
            .await?
            .and_then(|cm| cm.data)
            .unwrap_or_default();
        if let Some(cut) = data.get(&cut_key(&key)) {
            return Err(PlatformError::Other(format!(
                "the journal of run {run_id} in ConfigMap {} was cut to fit ({cut}); resume it where its full journal is (recover resume --journal-dir DIR)",
                self.name
            )));
        }
        Ok(data.get(&key).cloned())
    }

    pub async fn get(&self, key: &str) -> Result<Option<String>, PlatformError> {
        Ok(self
            .read()
            .await?
            .and_then(|cm| cm.data)
            .and_then(|mut d| d.remove(key)))
    }

    pub async fn load_rollout(&self, run_id: &str) -> Result<Option<RolloutState>, PlatformError> {
        match self.get(&rollout_key(run_id)).await? {
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

#[derive(Default)]
struct Pending {
    values: BTreeMap<String, String>,
    /// Bumped by every put; the writer reports the last one it wrote.
    generation: u64,
}

/// The background writer: `put` returns at once; the latest value of each key is written
/// soon after, with a growing pause after failures.
#[derive(Clone)]
pub struct Mirror {
    store: JournalStore,
    pending: Arc<Mutex<Pending>>,
    wake: Arc<Notify>,
    written: watch::Receiver<u64>,
    written_tx: Arc<watch::Sender<u64>>,
    started: Arc<std::sync::Once>,
}

impl Mirror {
    pub fn new(store: JournalStore) -> Mirror {
        let (tx, rx) = watch::channel(0);
        Mirror {
            store,
            pending: Arc::default(),
            wake: Arc::new(Notify::new()),
            written: rx,
            written_tx: Arc::new(tx),
            started: Arc::new(std::sync::Once::new()),
        }
    }

    pub fn store(&self) -> &JournalStore {
        &self.store
    }

    /// Queue `value` for `key`; returns the generation to [`Mirror::flush`] for.
    pub fn put(&self, key: String, value: String) -> u64 {
        self.start();
        let generation = {
            let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            p.values.insert(key, value);
            p.generation += 1;
            p.generation
        };
        self.wake.notify_one();
        generation
    }

    /// The generation of the last put (what a flush of everything waits for).
    pub fn queued(&self) -> u64 {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .generation
    }

    /// Wait until everything queued up to `generation` is written, at most `timeout`;
    /// false if it was not.
    pub async fn flush(&self, generation: u64, timeout: Duration) -> bool {
        let mut rx = self.written.clone();
        tokio::time::timeout(timeout, rx.wait_for(|w| *w >= generation))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    fn start(&self) {
        self.started.call_once(|| {
            let (store, pending, wake, tx) = (
                self.store.clone(),
                self.pending.clone(),
                self.wake.clone(),
                self.written_tx.clone(),
            );
            tokio::spawn(async move {
                let mut failures = 0u32;
                loop {
                    wake.notified().await;
                    loop {
                        let (batch, generation) = {
                            let mut p = pending.lock().unwrap_or_else(|e| e.into_inner());
                            (std::mem::take(&mut p.values), p.generation)
                        };
                        if batch.is_empty() {
                            break;
                        }
                        match store.write(&batch).await {
                            Ok(()) => {
                                failures = 0;
                                let _ = tx.send(generation);
                            }
                            Err(e @ PlatformError::LockLost { .. }) => {
                                tracing::warn!(error = %e, keys = ?batch.keys().collect::<Vec<_>>(), "not mirroring to the journal ConfigMap: the lease is lost");
                                pending.lock().unwrap_or_else(|e| e.into_inner()).values.clear();
                            }
                            Err(e) => {
                                failures += 1;
                                tracing::warn!(error = %e, failures, keys = ?batch.keys().collect::<Vec<_>>(), "mirroring to the journal ConfigMap failed; will retry");
                                // Put back what no newer put replaced.
                                {
                                    let mut p = pending.lock().unwrap_or_else(|e| e.into_inner());
                                    for (k, v) in batch {
                                        p.values.entry(k).or_insert(v);
                                    }
                                }
                                tokio::time::sleep(Duration::from_millis(200 * u64::from(failures.min(25)))).await;
                            }
                        }
                    }
                }
            });
        });
    }
}

/// One line of a run's summary: a step boundary as it was published as an Event.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SummaryLine {
    pub at: String,
    pub step: String,
    pub phase: String,
    pub message: String,
}

/// The lines a summary keeps (the last ones), and the longest message.
pub const SUMMARY_LINES: usize = 100;
const SUMMARY_MESSAGE: usize = 500;

/// Append `line` to `lines`, keeping the last [`SUMMARY_LINES`] and cutting long messages.
pub fn add_summary_line(lines: &mut Vec<SummaryLine>, mut line: SummaryLine) {
    if line.message.len() > SUMMARY_MESSAGE {
        let mut cut = SUMMARY_MESSAGE;
        while !line.message.is_char_boundary(cut) {
            cut -= 1;
        }
        line.message.truncate(cut);
        line.message.push('…');
    }
    lines.push(line);
    if lines.len() > SUMMARY_LINES {
        let extra = lines.len() - SUMMARY_LINES;
        lines.drain(..extra);
    }
}
