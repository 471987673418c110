//! Where `recover serve` keeps its budgets and breakers (the [`BudgetBook`]) so that a
//! restarted or rescheduled receiver still refuses to act on a target whose breaker is
//! open: a file on a host, or a ConfigMap in the cluster (an emptyDir would be lost with
//! the pod).
//!
//! Saving never blocks the receiver: the decisions hold a lock while they save, so the
//! ConfigMap store writes in the background, the latest book winning, retried until it
//! lands. A state that cannot be read stops the receiver at start, because acting on a
//! target whose breaker may be open is worse than not starting.

use super::budget::BudgetBook;
use crate::platform::kube::call::{self, READ, WRITE};
use crate::platform::kube::rbac;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// The key of the book in the ConfigMap.
pub const KEY: &str = "state.json";

/// Why the state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{place}: {message}")]
    Unreadable { place: String, message: String },
    #[error("{place}: {source}")]
    Io {
        place: String,
        source: crate::platform::PlatformError,
    },
}

/// A place for the book.
#[async_trait::async_trait]
pub trait StateStore: Send + Sync {
    /// Where it is, for messages.
    fn place(&self) -> String;
    /// The stored book (empty when there is none yet).
    async fn load(&self) -> Result<BudgetBook, StateError>;
    /// Store `book` now.
    async fn save(&self, book: &BudgetBook) -> Result<(), StateError>;
    /// Store `book` soon, without waiting (called with the receiver's lock held).
    fn save_soon(&self, book: BudgetBook);
}

/// A JSON file, written atomically.
pub struct FileStore {
    pub path: PathBuf,
}

#[async_trait::async_trait]
impl StateStore for FileStore {
    fn place(&self) -> String {
        format!("state file {}", self.path.display())
    }

    async fn load(&self) -> Result<BudgetBook, StateError> {
        let err = |message: String| StateError::Unreadable {
            place: self.place(),
            message,
        };
        match std::fs::read(&self.path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| err(e.to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BudgetBook::default()),
            Err(e) => Err(err(e.to_string())),
        }
    }

    async fn save(&self, book: &BudgetBook) -> Result<(), StateError> {
        let bytes = serde_json::to_vec_pretty(book).map_err(|e| StateError::Unreadable {
            place: self.place(),
            message: e.to_string(),
        })?;
        crate::util::atomic_file::write_atomic(&self.path, &bytes).map_err(|e| {
            StateError::Unreadable {
                place: self.place(),
                message: e.to_string(),
            }
        })
    }

    fn save_soon(&self, book: BudgetBook) {
        let result = serde_json::to_vec_pretty(&book)
            .map_err(|e| e.to_string())
            .and_then(|b| {
                crate::util::atomic_file::write_atomic(&self.path, &b).map_err(|e| e.to_string())
            });
        if let Err(e) = result {
            tracing::error!("cannot write state file {}: {e}", self.path.display());
        }
    }
}

/// One key of a ConfigMap (`NS/NAME`, created by the manifests), written with field
/// manager "recover". RBAC: get and patch on that name.
pub struct ConfigMapStore {
    api: Api<ConfigMap>,
    namespace: String,
    name: String,
    pending: Arc<Mutex<Option<BudgetBook>>>,
    wake: Arc<Notify>,
    started: std::sync::Once,
}

impl ConfigMapStore {
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        ConfigMapStore {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            name: name.to_string(),
            pending: Arc::default(),
            wake: Arc::new(Notify::new()),
            started: std::sync::Once::new(),
        }
    }

    /// From `NS/NAME`, with the in-cluster or kubeconfig client.
    pub async fn connect(spec: &str) -> Result<Self, StateError> {
        let place = format!("state ConfigMap {spec}");
        let (ns, name) = spec.split_once('/').ok_or_else(|| StateError::Unreadable {
            place: place.clone(),
            message: "expected NAMESPACE/NAME".into(),
        })?;
        let client = call::infer_client()
            .await
            .map_err(|message| StateError::Unreadable { place, message })?;
        Ok(Self::new(client, ns, name))
    }

    fn start_writer(&self) {
        self.started.call_once(|| {
            let (api, name, pending, wake) = (
                self.api.clone(),
                self.name.clone(),
                self.pending.clone(),
                self.wake.clone(),
            );
            tokio::spawn(async move {
                let mut failures = 0u32;
                loop {
                    wake.notified().await;
                    loop {
                        let next = pending.lock().unwrap_or_else(|e| e.into_inner()).take();
                        let Some(book) = next else { break };
                        if let Err(e) = write(&api, &name, &book).await {
                            failures += 1;
                            tracing::error!(configmap = %name, failures, error = %e, "cannot save serve's state; retrying");
                            pending
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .get_or_insert(book);
                            tokio::time::sleep(Duration::from_millis(500 * u64::from(failures.min(20)))).await;
                        } else {
                            failures = 0;
                        }
                    }
                }
            });
        });
    }
}

async fn write(
    api: &Api<ConfigMap>,
    name: &str,
    book: &BudgetBook,
) -> Result<(), crate::platform::PlatformError> {
    let json = serde_json::to_string(book)
        .map_err(|e| crate::platform::PlatformError::Other(e.to_string()))?;
    let patch = Patch::Merge(serde_json::json!({ "data": { KEY: json } }));
    let pp = PatchParams {
        field_manager: Some(rbac::FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    call::call(
        &WRITE,
        &rbac::SERVE_STATE_PATCH,
        || format!("saving serve's state to ConfigMap {name}"),
        || api.patch(name, &pp, &patch),
    )
    .await
    .map(|_| ())
}

#[async_trait::async_trait]
impl StateStore for ConfigMapStore {
    fn place(&self) -> String {
        format!("state ConfigMap {}/{}", self.namespace, self.name)
    }

    async fn load(&self) -> Result<BudgetBook, StateError> {
        let cm = call::call(
            &READ,
            &rbac::SERVE_STATE_GET,
            || format!("reading ConfigMap {}", self.name),
            || self.api.get(&self.name),
        )
        .await
        .map_err(|source| StateError::Io {
            place: format!("{} (apply manifests/: it creates it)", self.place()),
            source,
        })?;
        match cm.data.as_ref().and_then(|d| d.get(KEY)) {
            None => Ok(BudgetBook::default()),
            Some(text) => serde_json::from_str(text).map_err(|e| StateError::Unreadable {
                place: format!("{} key {KEY}", self.place()),
                message: e.to_string(),
            }),
        }
    }

    async fn save(&self, book: &BudgetBook) -> Result<(), StateError> {
        write(&self.api, &self.name, book)
            .await
            .map_err(|source| StateError::Io {
                place: self.place(),
                source,
            })
    }

    fn save_soon(&self, book: BudgetBook) {
        *self.pending.lock().unwrap_or_else(|e| e.into_inner()) = Some(book);
        self.start_writer();
        self.wake.notify_one();
    }
}
