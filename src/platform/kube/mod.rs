//! The Kubernetes platform: the same engine and runbooks acting on a Deployment through
//! kube-rs, needing nothing but a kubeconfig (or in-cluster credentials).
//!
//! Replicas are the target Deployment's pods. Restarts go through the Eviction API and
//! honour PodDisruptionBudgets; admin calls and scrapes go through the API server's pod
//! proxy; the gate's limit lives in a ConfigMap the gates poll; the lock is a Lease; each
//! step is a Kubernetes Event; journal and rollout progress are mirrored into a ConfigMap
//! so a run resumes from another machine. Decisions live in [`rollout`] as pure functions;
//! every API call names its permission in [`rbac`].

pub mod api;
pub mod disrupt;
pub mod events;
pub mod gate;
pub mod journal;
pub mod lease;
pub mod limit_source;
mod platform_impl;
pub mod proxy;
pub mod rbac;
pub mod rollout;

pub use limit_source::ConfigMapLimitSource;

use self::api::call_error;
use self::disrupt::{ApiDisruptor, Disruptor};
use self::gate::KubeGate;
use self::journal::JournalStore;
use self::proxy::{ApiPodProxy, PodProxy};
use self::rollout::{PodView, RolloutState};
use crate::platform::PlatformError;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What to act on, in one namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Workload {
    /// A Deployment by name; its pods are found through their ReplicaSet owner, so no
    /// permission on Deployments is needed.
    Deployment(String),
    /// Pods matching a label selector (`app=config-service`).
    Selector(String),
}

/// The target id of a workload: `kube:<namespace>/<deployment>` or
/// `kube:<namespace>/selector:<labels>`.
pub fn target_id(namespace: &str, workload: &Workload) -> String {
    match workload {
        Workload::Deployment(n) => format!("kube:{namespace}/{n}"),
        Workload::Selector(s) => format!("kube:{namespace}/selector:{s}"),
    }
}

/// Everything the platform needs to know; [`KubeOptions::new`] gives the defaults that
/// match `manifests/`.
#[derive(Debug, Clone)]
pub struct KubeOptions {
    pub namespace: String,
    pub workload: Workload,
    /// Port of the target pods serving `/admin/*` and `/metrics`.
    pub service_port: u16,
    /// Label selector of the gate pods, and the port of their `/metrics`.
    pub gate_selector: String,
    pub gate_metrics_port: u16,
    /// Label selector and metrics port of the client pods, if they are to be scraped.
    pub clients_selector: Option<String>,
    pub clients_metrics_port: u16,
    pub limit_configmap: String,
    pub journal_configmap: String,
    /// Who we are in the Lease (`user@host` or the pod name).
    pub identity: String,
    pub lease_duration: Duration,
    /// How long one eviction may stay blocked by a disruption budget.
    pub evict_timeout: Duration,
    pub evict_retry: Duration,
    /// Delete a pod whose eviction stayed blocked for `evict_timeout`. Off by default.
    pub allow_delete_fallback: bool,
    /// How long `set_limit` waits for every gate pod to report the new version.
    pub gate_apply_timeout: Duration,
    /// Poll interval while waiting for pods.
    pub poll: Duration,
}

impl KubeOptions {
    pub fn new(namespace: &str, workload: Workload) -> Self {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "unknown-host".to_string());
        let user = std::env::var("USER").unwrap_or_else(|_| "recover".to_string());
        KubeOptions {
            namespace: namespace.to_string(),
            workload,
            service_port: 9001,
            gate_selector: "app.kubernetes.io/name=recover-gate".to_string(),
            gate_metrics_port: 8081,
            clients_selector: Some("app.kubernetes.io/name=workers".to_string()),
            clients_metrics_port: 9100,
            limit_configmap: rbac::LIMIT_CONFIGMAP.to_string(),
            journal_configmap: rbac::JOURNAL_CONFIGMAP.to_string(),
            identity: format!("{user}@{host}:{}", std::process::id()),
            lease_duration: Duration::from_secs(15),
            evict_timeout: Duration::from_secs(120),
            evict_retry: Duration::from_secs(2),
            allow_delete_fallback: false,
            gate_apply_timeout: Duration::from_secs(10),
            poll: Duration::from_millis(250),
        }
    }
}

/// Per-run memory: which run holds the lock and how far the batched restart has come.
#[derive(Debug, Default)]
struct RunMemory {
    run_id: Option<String>,
    rollout: Option<RolloutState>,
}

/// The `kube` [`crate::platform::Platform`].
pub struct KubePlatform {
    client: kube::Client,
    opts: KubeOptions,
    pods: Api<Pod>,
    disruptor: Arc<dyn Disruptor>,
    proxy: Arc<dyn PodProxy>,
    journal: JournalStore,
    memory: Mutex<RunMemory>,
}

impl KubePlatform {
    /// A platform on an existing client (tests pass a kube-fake-client here).
    pub fn new(client: kube::Client, opts: KubeOptions) -> Self {
        let ns = opts.namespace.clone();
        KubePlatform {
            pods: Api::namespaced(client.clone(), &ns),
            disruptor: Arc::new(ApiDisruptor::new(client.clone(), &ns)),
            proxy: Arc::new(ApiPodProxy::new(client.clone(), &ns)),
            journal: JournalStore::new(client.clone(), &ns, &opts.journal_configmap),
            client,
            opts,
            memory: Mutex::new(RunMemory::default()),
        }
    }

    /// Connect with the kubeconfig (`context`, or its current context) or, with no
    /// kubeconfig, the in-cluster service account.
    pub async fn connect(context: Option<&str>, opts: KubeOptions) -> Result<Self, PlatformError> {
        let config = match context {
            Some(ctx) => {
                let o = kube::config::KubeConfigOptions {
                    context: Some(ctx.to_string()),
                    ..Default::default()
                };
                kube::Config::from_kubeconfig(&o)
                    .await
                    .map_err(|e| PlatformError::Other(format!("kubeconfig context {ctx}: {e}")))?
            }
            None => kube::Config::infer().await.map_err(|e| {
                PlatformError::Other(format!("no kubeconfig and not in a cluster: {e}"))
            })?,
        };
        let client = kube::Client::try_from(config)
            .map_err(|e| PlatformError::Other(format!("building the Kubernetes client: {e}")))?;
        Ok(Self::new(client, opts))
    }

    /// Replace how pods are taken down (tests: an Eviction API with budgets).
    pub fn with_disruptor(mut self, d: Arc<dyn Disruptor>) -> Self {
        self.disruptor = d;
        self
    }

    /// Replace how pods are reached over HTTP (tests: real local servers).
    pub fn with_proxy(mut self, p: Arc<dyn PodProxy>) -> Self {
        self.proxy = p;
        self
    }

    pub fn options(&self) -> &KubeOptions {
        &self.opts
    }

    /// The gate control with its own handles (cheap; built per call).
    pub fn kube_gate(&self) -> KubeGate {
        KubeGate {
            configmaps: Api::<ConfigMap>::namespaced(self.client.clone(), &self.opts.namespace),
            pods: self.pods.clone(),
            proxy: self.proxy.clone(),
            configmap: self.opts.limit_configmap.clone(),
            selector: self.opts.gate_selector.clone(),
            metrics_port: self.opts.gate_metrics_port,
            apply_timeout: self.opts.gate_apply_timeout,
        }
    }

    /// The target's pods now, terminating ones included (decisions need to see them).
    pub async fn target_pods(&self) -> Result<Vec<PodView>, PlatformError> {
        let lp = match &self.opts.workload {
            Workload::Selector(s) => ListParams::default().labels(s),
            Workload::Deployment(_) => ListParams::default(),
        };
        let list = self.pods.list(&lp).await.map_err(|e| {
            call_error(
                &rbac::PODS_LIST,
                format!("listing pods in {}", self.opts.namespace),
                e,
            )
        })?;
        let mut views: Vec<PodView> = list.items.iter().map(PodView::of).collect();
        if let Workload::Deployment(name) = &self.opts.workload {
            views.retain(|p| p.deployment.as_deref() == Some(name.as_str()));
        }
        views.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(views)
    }

    /// The Deployment Events are recorded on.
    async fn deployment_name(&self) -> Result<String, PlatformError> {
        match &self.opts.workload {
            Workload::Deployment(n) => Ok(n.clone()),
            Workload::Selector(s) => self
                .target_pods()
                .await?
                .into_iter()
                .find_map(|p| p.deployment)
                .ok_or_else(|| {
                    PlatformError::Other(format!("no Deployment owns the pods matching {s}"))
                }),
        }
    }

    fn run_key(&self) -> String {
        let mem = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        mem.run_id.clone().unwrap_or_else(|| "adhoc".to_string())
    }

    /// The rollout's progress, starting one from the current pods if none is underway.
    async fn rollout(&self) -> Result<RolloutState, PlatformError> {
        if let Some(r) = self
            .memory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .rollout
            .clone()
        {
            return Ok(r);
        }
        let state = RolloutState::begin(&self.target_pods().await?);
        self.store_rollout(state.clone()).await?;
        Ok(state)
    }

    async fn store_rollout(&self, state: RolloutState) -> Result<(), PlatformError> {
        self.journal.save_rollout(&self.run_key(), &state).await?;
        self.memory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .rollout = Some(state);
        Ok(())
    }

    /// Adopt a run (resume): its id, and its mirrored rollout progress if there is one.
    pub async fn adopt_run(&self, run_id: &str) -> Result<Option<RolloutState>, PlatformError> {
        let rollout = self.journal.load_rollout(run_id).await?;
        let mut mem = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        mem.run_id = Some(run_id.to_string());
        mem.rollout = rollout.clone();
        Ok(rollout)
    }

    /// The batched restart's progress so far, if one is underway in this run.
    pub fn rollout_state(&self) -> Option<RolloutState> {
        self.memory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .rollout
            .clone()
    }

    /// The next `size` pods to restart: from the rollout's snapshot, not evicted yet.
    pub async fn next_batch(&self, size: usize) -> Result<Vec<String>, PlatformError> {
        let state = self.rollout().await?;
        Ok(rollout::next_batch(
            &state,
            &self.target_pods().await?,
            size,
        ))
    }

    /// The rollout is finished: forget it so a later restart step starts a fresh one.
    pub fn finish_rollout(&self) {
        self.memory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .rollout = None;
    }
}
