//! The local platform: real OS processes on this host, described by an inventory
//! ([`inventory::Inventory`]). Replicas are restarted by pid (pid files in the state dir)
//! and started detached so they outlive an engine crash; replicas started by hand are
//! adopted by pid or listening port ([`adopt`]); admin endpoints and the gate are reached
//! over HTTP; the per-target lock is a file in the state dir.

pub mod adopt;
pub mod gate;
pub mod inventory;
pub mod lock;
pub mod process;
pub mod shared_gates;

use crate::platform::{
    AdminOp, AdminReply, CallCause, GateControl, LockGuard, LockHolder, Platform, PlatformError,
    Replica, ScrapeEndpoint, StepEvent,
};
use crate::util::http_body::{read_response_text, BodyCaps};
use inventory::Inventory;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long a scrape or an admin call may take, its body included.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

pub struct LocalPlatform {
    inv: Inventory,
    state_dir: PathBuf,
    gate: Arc<shared_gates::SharedGates>,
    client: reqwest::Client,
}

impl LocalPlatform {
    /// Build from a loaded inventory.
    pub fn new(inv: Inventory) -> Self {
        let state_dir = inv.state_dir();
        let gate = Arc::new(shared_gates::SharedGates::new(
            inv.gates
                .iter()
                .map(|g| gate::HttpGate::new(&g.admin_url, g.token_file.clone()))
                .collect(),
        ));
        let client = reqwest::Client::builder()
            .timeout(SCRAPE_TIMEOUT)
            .build()
            .unwrap_or_default();
        LocalPlatform {
            inv,
            state_dir,
            gate,
            client,
        }
    }

    /// Load the inventory file and build the platform.
    pub fn from_file(path: &Path) -> Result<Self, inventory::InventoryError> {
        Ok(Self::new(Inventory::load(path)?))
    }

    pub fn inventory(&self) -> &Inventory {
        &self.inv
    }

    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The pid of a replica's current process, if it runs.
    pub fn pid(&self, replica: &str) -> Option<u32> {
        process::read_pid(&self.state_dir, replica).filter(|p| process::running(*p))
    }

    /// Start every replica that is not running (the rehearsal and tests bring a system up
    /// this way, so the platform owns the pid files from the start).
    pub fn start_missing(&self) -> Result<Vec<String>, PlatformError> {
        let mut started = Vec::new();
        for r in &self.inv.replicas {
            if self.pid(&r.name).is_none() {
                process::start(&self.state_dir, r)
                    .map_err(|e| PlatformError::Other(format!("starting {}: {e}", r.name)))?;
                started.push(r.name.clone());
            }
        }
        Ok(started)
    }

    /// Stop every replica this platform started (end of a rehearsal or test).
    pub fn stop_all(&self) {
        for r in &self.inv.replicas {
            process::stop(&self.state_dir, &r.name, self.inv.stop_grace);
        }
    }

    fn spec(&self, replica: &str) -> Result<&inventory::ReplicaSpec, PlatformError> {
        self.inv
            .replica(replica)
            .ok_or_else(|| PlatformError::NoSuchReplica(replica.to_string()))
    }

    async fn ready(&self, url: &str) -> bool {
        matches!(self.client.get(url).timeout(Duration::from_millis(800)).send().await, Ok(r) if r.status().is_success())
    }

    /// The pid of the replica's process if this platform owns it (its pid file names a
    /// running process, or the inventory says to adopt it and it was found: the pid file
    /// is written then); `None` when nothing runs (a restart just starts it). An error
    /// when something answers for the replica that this platform cannot stop, saying how
    /// to let it.
    async fn owned_pid(&self, spec: &inventory::ReplicaSpec) -> Result<Option<u32>, String> {
        if let Some(pid) = self.pid(&spec.name) {
            return Ok(Some(pid));
        }
        if let Some(how) = spec.adopt {
            let pid = adopt::find(how)
                .map_err(|e| format!("replica {}: cannot adopt {how}: {e}", spec.name))?;
            std::fs::create_dir_all(&self.state_dir)
                .and_then(|_| {
                    crate::util::atomic_file::write_atomic(
                        &process::pid_file(&self.state_dir, &spec.name),
                        format!("{pid}\n").as_bytes(),
                    )
                })
                .map_err(|e| format!("replica {}: recording adopted pid {pid}: {e}", spec.name))?;
            tracing::info!(replica = %spec.name, pid, "adopted {how}");
            return Ok(Some(pid));
        }
        if self.ready(&spec.readiness_url).await {
            let port = reqwest::Url::parse(&spec.readiness_url)
                .ok()
                .and_then(|u| u.port_or_known_default())
                .map_or_else(|| "PORT".to_string(), |p| p.to_string());
            return Err(format!(
                "replica {} answers at {} but recover did not start it (no pid file in {}), so it cannot restart it; \
                 adopt it by adding `adopt: {{port: {port}}}` (or `adopt: {{pid: PID}}`) to replica {} in the inventory",
                spec.name,
                spec.readiness_url,
                self.state_dir.display(),
                spec.name
            ));
        }
        Ok(None)
    }
}

#[async_trait::async_trait]
impl Platform for LocalPlatform {
    fn kind(&self) -> &'static str {
        "local"
    }

    fn target_id(&self) -> String {
        format!("local:{}", self.inv.name)
    }

    async fn replicas(&self) -> Result<Vec<Replica>, PlatformError> {
        // Every replica's readiness asked at once: steps read the replicas between a
        // drain and the readmission, while the gate stands at the block.
        let ready = futures::future::join_all(
            self.inv
                .replicas
                .iter()
                .map(|r| self.ready(&r.readiness_url)),
        )
        .await;
        Ok(self
            .inv
            .replicas
            .iter()
            .zip(ready)
            .map(|(r, ready)| Replica {
                id: r.name.clone(),
                ready,
                started_at: self.pid(&r.name).and_then(|_| {
                    std::fs::metadata(process::pid_file(&self.state_dir, &r.name))
                        .ok()?
                        .modified()
                        .ok()
                }),
            })
            .collect())
    }

    async fn restart(&self, replica: &str) -> Result<(), PlatformError> {
        let spec = self.spec(replica)?.clone();
        let dir = self.state_dir.clone();
        let grace = self.inv.stop_grace;
        self.owned_pid(&spec).await.map_err(PlatformError::Other)?;
        tokio::task::spawn_blocking(move || {
            process::stop(&dir, &spec.name, grace);
            process::start(&dir, &spec).map(|_| ())
        })
        .await
        .map_err(|e| PlatformError::Other(e.to_string()))?
        .map_err(|e| PlatformError::Other(format!("starting {replica}: {e}")))
    }

    async fn wait_ready(
        &self,
        replicas: &[String],
        timeout: Duration,
    ) -> Result<(), PlatformError> {
        let deadline = tokio::time::Instant::now() + timeout;
        for r in replicas {
            let spec = self.spec(r)?;
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            crate::util::net::wait_http_ok(&spec.readiness_url, left)
                .await
                .map_err(|_| PlatformError::Timeout {
                    what: format!("{r} to be ready ({})", spec.readiness_url),
                    after: timeout,
                })?;
        }
        Ok(())
    }

    async fn admin(&self, replica: &str, op: AdminOp) -> Result<AdminReply, PlatformError> {
        let spec = self.spec(replica)?;
        let url = format!("{}{}", spec.admin_url.trim_end_matches('/'), op.path());
        let call = |e: CallCause| PlatformError::Call {
            what: format!("POST {url}"),
            source: e,
        };
        let mut req = self.client.post(&url);
        if let Some(file) = &spec.admin_token_file {
            // Read at each call, so a token rotated on disk is picked up.
            let token = std::fs::read_to_string(file).map_err(|e| {
                PlatformError::Other(format!(
                    "{replica}: admin_token_file {}: {e}",
                    file.display()
                ))
            })?;
            req = req.bearer_auth(token.trim_end_matches(['\r', '\n']));
        }
        let r = req.send().await.map_err(|e| call(e.into()))?;
        let status = r.status();
        let text = read_response_text(r, BodyCaps::small_json(1024 * 1024))
            .await
            .map_err(|e| call(e.into()))?;
        if !status.is_success() {
            return Err(call(format!("HTTP {status}: {text}").into()));
        }
        Ok(AdminReply::read(op, &text))
    }

    async fn restartable(&self, replica: &str) -> Result<(), PlatformError> {
        let spec = self.spec(replica)?;
        self.owned_pid(spec)
            .await
            .map(|_| ())
            .map_err(PlatformError::Other)
    }

    fn gate(&self) -> Arc<dyn GateControl> {
        self.gate.clone()
    }

    async fn scrape_endpoints(&self) -> Result<Vec<ScrapeEndpoint>, PlatformError> {
        let mut out: Vec<ScrapeEndpoint> =
            self.inv
                .gates
                .iter()
                .enumerate()
                .map(|(i, g)| ScrapeEndpoint {
                    role: "gate".into(),
                    instance: if i == 0 {
                        "gate".into()
                    } else {
                        format!("gate-{i}")
                    },
                    locator: g.metrics_url.clone().unwrap_or_else(|| {
                        format!("{}/metrics", g.admin_url.trim_end_matches('/'))
                    }),
                })
                .collect();
        for r in &self.inv.replicas {
            out.push(ScrapeEndpoint {
                role: "service".into(),
                instance: r.name.clone(),
                locator: r.metrics_url.clone(),
            });
        }
        for c in &self.inv.clients {
            out.push(ScrapeEndpoint {
                role: "clients".into(),
                instance: c.name.clone(),
                locator: c.metrics_url.clone(),
            });
        }
        Ok(out)
    }

    async fn scrape(&self, endpoint: &ScrapeEndpoint) -> Result<String, PlatformError> {
        let call = |e: CallCause| PlatformError::Call {
            what: format!("GET {}", endpoint.locator),
            source: e,
        };
        let r = self
            .client
            .get(&endpoint.locator)
            .send()
            .await
            .map_err(|e| call(e.into()))?;
        if !r.status().is_success() {
            return Err(call(format!("HTTP {}", r.status()).into()));
        }
        read_response_text(r, BodyCaps::metrics_page(SCRAPE_TIMEOUT))
            .await
            .map_err(|e| call(e.into()))
    }

    async fn lock(&self, holder: &LockHolder) -> Result<Box<dyn LockGuard>, PlatformError> {
        let l = lock::acquire(&self.state_dir.join("lock"), &self.target_id(), holder)?;
        Ok(Box::new(l))
    }

    async fn record_event(&self, event: &StepEvent) -> Result<(), PlatformError> {
        // The engine's progress says the same in words; a local target has no event
        // store of its own, so this is detail.
        tracing::debug!(run_id = %event.run_id, step = %event.step, phase = %event.phase, "{}", event.message);
        Ok(())
    }
}
