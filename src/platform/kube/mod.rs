//! The Kubernetes platform: the same engine and runbooks acting on a Deployment (or any
//! pods by selector, a StatefulSet's included) through kube-rs, needing nothing but a
//! kubeconfig (or in-cluster credentials).
//!
//! Replicas are the target's Running pods, tracked by UID. Restarts go through the
//! Eviction API and honour PodDisruptionBudgets; admin calls and scrapes go to the pod's IP
//! in the cluster and through the API server's pod proxy from outside; the gate's limit
//! lives in a ConfigMap the gates watch; the lock is a Lease; each step is a Kubernetes
//! Event; journal, rollout progress and the run's summary are mirrored into a ConfigMap so
//! a run resumes from another machine. Every API call has its own deadline and retry policy
//! ([`call`]); decisions live in [`decide`] as pure functions; every call names its
//! permission in [`rbac`].

pub mod api;
pub mod call;
pub mod decide;
pub mod disrupt;
pub mod event_writer;
pub mod events;
pub mod fence;
pub mod follow;
pub mod gate;
mod hazards;
pub mod journal;
pub mod lease;
pub mod limit_source;
pub mod peers;
mod platform_impl;
pub mod pod_cache;
pub mod proxy;
pub mod rbac;
pub mod throttle;
pub mod workload;

pub use limit_source::ConfigMapLimitSource;

use self::decide::{PodRef, PodView, RolloutState};
use self::disrupt::{ApiDisruptor, Disruptor};
use self::gate::KubeGate;
use self::journal::{JournalStore, Mirror, SummaryLine};
use self::proxy::{ApiProxy, Direct, PodReach};
use crate::platform::PlatformError;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::Api;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use workload::Workload;

/// The target id of a workload: `kube:<namespace>/<deployment>` or
/// `kube:<namespace>/selector:<labels>`.
pub fn target_id(namespace: &str, workload: &Workload) -> String {
    match workload {
        Workload::Deployment(n) => format!("kube:{namespace}/{n}"),
        Workload::Selector(s) => format!("kube:{namespace}/selector:{s}"),
    }
}

/// How the platform reaches pods over HTTP (scrapes, admin calls).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Through the API server's pod proxy (RBAC `pods/proxy`): for runs from a laptop.
    ApiProxy,
    /// To the pod's IP: for runs inside the cluster (no `pods/proxy` grant needed).
    PodIp,
}

impl Reach {
    /// Inside a pod (the service-account environment is set) the pod IPs are reachable;
    /// `RECOVER_KUBE_REACH=proxy|pod-ip` overrides.
    pub fn from_env() -> Reach {
        match std::env::var("RECOVER_KUBE_REACH").as_deref() {
            Ok("proxy") => Reach::ApiProxy,
            Ok("pod-ip") => Reach::PodIp,
            _ if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() => Reach::PodIp,
            _ => Reach::ApiProxy,
        }
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
    /// Our own wait between blocked evictions (the server's Retry-After wins).
    pub evict_retry: Duration,
    /// Delete a pod whose eviction stayed blocked for `evict_timeout`. Off by default.
    pub allow_delete_fallback: bool,
    /// How long `set_limit` waits for every ready gate pod to report the new version.
    pub gate_apply_timeout: Duration,
    /// Poll interval while waiting for pods.
    pub poll: Duration,
    pub reach: Reach,
    /// Deadlines of a scrape and of an admin call to a pod.
    pub pod_deadlines: proxy::Deadlines,
}

/// Who we are: the pod's name in a cluster, `user@host` elsewhere, and the process id.
fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .unwrap_or_else(|| "unknown-host".to_string());
    let user = std::env::var("USER").unwrap_or_else(|_| "recover".to_string());
    format!("{user}@{host}:{}", std::process::id())
}

impl KubeOptions {
    pub fn new(namespace: &str, workload: Workload) -> Self {
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
            identity: identity(),
            lease_duration: Duration::from_secs(15),
            evict_timeout: Duration::from_secs(120),
            evict_retry: Duration::from_secs(2),
            allow_delete_fallback: false,
            gate_apply_timeout: Duration::from_secs(10),
            poll: Duration::from_secs(1),
            reach: Reach::from_env(),
            pod_deadlines: proxy::Deadlines::default(),
        }
    }
}

/// Per-run memory: which run holds the lock, how far the batched restart has come, and the
/// run's summary so far.
#[derive(Debug, Default)]
struct RunMemory {
    run_id: Option<String>,
    rollout: Option<RolloutState>,
    summary: Vec<SummaryLine>,
}

/// The `kube` [`crate::platform::Platform`].
pub struct KubePlatform {
    client: kube::Client,
    opts: KubeOptions,
    pods: Api<Pod>,
    disruptor: Arc<dyn Disruptor>,
    reach: Arc<dyn PodReach>,
    mirror: Mirror,
    resolved: tokio::sync::OnceCell<workload::Resolved>,
    /// The namespace's pods, watched, for scrape rounds (started on the first one).
    pod_cache: std::sync::OnceLock<pod_cache::PodCache>,
    events_out: event_writer::EventWriter,
    memory: Mutex<RunMemory>,
    /// Holds while this platform's lease does; every mutating call goes through it.
    fence: Arc<fence::Fence>,
}

impl KubePlatform {
    /// A platform on an existing client (tests pass a kube-fake-client here).
    pub fn new(client: kube::Client, opts: KubeOptions) -> Self {
        let client = throttle::keep_retry_after(client);
        let ns = opts.namespace.clone();
        let fence = Arc::new(fence::Fence::default());
        let reach: Arc<dyn PodReach> = match opts.reach {
            Reach::ApiProxy => Arc::new(ApiProxy::new(client.clone(), &ns, opts.pod_deadlines)),
            Reach::PodIp => Arc::new(Direct::new(opts.pod_deadlines)),
        };
        KubePlatform {
            pods: Api::namespaced(client.clone(), &ns),
            disruptor: Arc::new(ApiDisruptor::new(client.clone(), &ns)),
            reach,
            mirror: Mirror::new(JournalStore::new(
                client.clone(),
                &ns,
                &opts.journal_configmap,
                fence.clone(),
            )),
            resolved: tokio::sync::OnceCell::new(),
            pod_cache: std::sync::OnceLock::new(),
            events_out: event_writer::EventWriter::new(
                event_writer::EventTarget {
                    client: client.clone(),
                    namespace: ns.clone(),
                    workload: opts.workload.clone(),
                    identity: opts.identity.clone(),
                },
                fence.clone(),
            ),
            client,
            opts,
            memory: Mutex::new(RunMemory::default()),
            fence,
        }
    }

    /// The fence of this platform's lease (tests: see when it is lost).
    pub fn fence(&self) -> Arc<fence::Fence> {
        self.fence.clone()
    }

    /// Connect with the kubeconfig (`context`, or its current context) or, with no
    /// kubeconfig, the in-cluster service account. kube-client's own retry layer is off:
    /// every call here has its own deadline and retry policy.
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
        let client = kube::Client::try_from(call::client_config(config))
            .map_err(|e| PlatformError::Other(format!("building the Kubernetes client: {e}")))?;
        Ok(Self::new(client, opts))
    }

    /// Replace how pods are taken down (tests: count what is asked).
    pub fn with_disruptor(mut self, d: Arc<dyn Disruptor>) -> Self {
        self.disruptor = d;
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
            reach: self.reach.clone(),
            configmap: self.opts.limit_configmap.clone(),
            namespace: self.opts.namespace.clone(),
            selector: self.opts.gate_selector.clone(),
            metrics_port: self.opts.gate_metrics_port,
            apply_timeout: self.opts.gate_apply_timeout,
            poll: self.opts.poll.min(Duration::from_millis(500)),
            fence: self.fence.clone(),
        }
    }

    /// The workload's selector and owner, read once.
    async fn resolved(&self) -> Result<&workload::Resolved, PlatformError> {
        self.resolved
            .get_or_try_init(|| {
                workload::resolve(&self.client, &self.opts.namespace, &self.opts.workload)
            })
            .await
    }

    /// The target's pods now, terminating and terminal ones included (decisions need to
    /// see them), listed by the workload's selector.
    pub async fn target_pods(&self) -> Result<Vec<PodView>, PlatformError> {
        let resolved = self.resolved().await?;
        resolved.pods(&self.pods).await
    }

    fn run_key(&self) -> String {
        let mem = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        mem.run_id.clone().unwrap_or_else(|| "adhoc".to_string())
    }

    /// The rollout's progress, starting one from the current pods if none is underway.
    /// A new rollout's snapshot (the pods it may evict, by UID) is mirrored before the
    /// first eviction, or nothing is evicted: a resumed run without it would take a new
    /// snapshot, the replacements in it, and restart them a second time.
    async fn rollout(&self) -> Result<RolloutState, PlatformError> {
        if let Some(r) = self.rollout_state() {
            return Ok(r);
        }
        let state = RolloutState::begin(&self.target_pods().await?);
        let generation = self.store_rollout(state.clone());
        let wait = Duration::from_secs(15);
        if !self.mirror.flush(generation, wait).await {
            self.memory
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .rollout = None;
            return Err(PlatformError::Timeout {
                what: format!(
                    "mirroring the batched restart's snapshot to ConfigMap {} before the first eviction (nothing was evicted: a resumed run could not tell the replacements from the pods to restart)",
                    self.opts.journal_configmap
                ),
                after: wait,
            });
        }
        Ok(state)
    }

    /// Remember the rollout and mirror it in the background.
    fn store_rollout(&self, state: RolloutState) -> u64 {
        let json = serde_json::to_string(&state).unwrap_or_default();
        self.memory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .rollout = Some(state);
        self.mirror.put(journal::rollout_key(&self.run_key()), json)
    }

    fn record_evicted(&self, mut state: RolloutState, pod: &PodRef) {
        state.record_evicted(pod);
        self.store_rollout(state);
    }

    /// Adopt a run (resume): its id, and its mirrored rollout progress if there is one.
    pub async fn adopt_run(&self, run_id: &str) -> Result<Option<RolloutState>, PlatformError> {
        let rollout = self.mirror.store().load_rollout(run_id).await?;
        let summary = match self
            .mirror
            .store()
            .get(&journal::summary_key(run_id))
            .await?
        {
            Some(s) => serde_json::from_str(&s).unwrap_or_default(),
            None => Vec::new(),
        };
        let mut mem = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        mem.run_id = Some(run_id.to_string());
        mem.rollout = rollout.clone();
        mem.summary = summary;
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
        Ok(decide::next_batch(&state, &self.target_pods().await?, size))
    }

    /// The rollout is finished: forget it so a later restart step starts a fresh one.
    pub fn finish_rollout(&self) {
        self.memory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .rollout = None;
    }

    /// Wait until every Event queued so far is written (tests, end of a run).
    pub async fn flush_events(&self, timeout: Duration) -> bool {
        self.events_out.flush(timeout).await
    }

    /// What this platform left where, for the Event after a lost lease: the batched
    /// restart's progress and the objects it writes.
    fn left_where(&self) -> String {
        let mut out = Vec::new();
        if let Some(r) = self.rollout_state() {
            let evicted: Vec<&str> = r.evicted.iter().map(|p| p.name.as_str()).collect();
            let left: Vec<&str> = r
                .snapshot
                .iter()
                .filter(|p| !r.was_evicted(&p.uid))
                .map(|p| p.name.as_str())
                .collect();
            out.push(format!(
                "batched restart: evicted [{}], not restarted [{}]",
                evicted.join(", "),
                left.join(", ")
            ));
        }
        out.push(format!(
            "the gate's limit stays as last written in ConfigMap {}/{} (key {})",
            self.opts.namespace,
            self.opts.limit_configmap,
            rbac::LIMIT_KEY
        ));
        out.push(format!(
            "the journal mirror in ConfigMap {}/{} stopped at the loss; the local journal is complete",
            self.opts.namespace, self.opts.journal_configmap
        ));
        out.join("; ")
    }
    pub async fn flush_mirror(&self, timeout: Duration) -> bool {
        let generation = self.mirror.queued();
        self.mirror.flush(generation, timeout).await
    }
}
