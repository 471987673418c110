//! Starts and stops the demo system as real processes on free loopback ports: the gate,
//! the config-service replicas and the worker fleet, each a `recover` subcommand.
//!
//! Why it exists: the rehearsal's promise is "real processes, no orphans". Every child is
//! spawned through `util::child::spawn_guarded` (own process group, killed with its parent,
//! stopped on drop), and [`sweep`] finds anything that escaped by the markers (ports, run
//! directory) on its command line, so teardown also holds after a panic or Ctrl-C.

use super::recorder::Target;
use super::scenario::Scenario;
use super::series::Role;
use crate::gate::limit::Limit;
use crate::util::child::{spawn_guarded, ChildGuard, GuardOptions};
use crate::util::net::{free_loopback_addr, wait_http_ok};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Why the system could not be built or driven.
#[derive(Debug, thiserror::Error)]
pub enum OrchestrateError {
    #[error("no free loopback port: {0}")]
    Port(std::io::Error),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    NotReady(String),
    #[error("gate admin API: {0}")]
    Gate(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> OrchestrateError {
    let what = what.into();
    move |source| OrchestrateError::Io { what, source }
}

/// Where everything listens.
#[derive(Debug, Clone)]
pub struct Addrs {
    pub gate: SocketAddr,
    pub gate_admin: SocketAddr,
    pub replicas: Vec<SocketAddr>,
    pub workers_metrics: SocketAddr,
}

/// The running demo system. Dropping it stops every process it started.
pub struct System {
    pub addrs: Addrs,
    /// Holds the gate's token and state file and every process's log.
    pub run_dir: PathBuf,
    pub token: String,
    /// The token the replicas' `/admin/*` requires (the gate forwards every path).
    service_token: String,
    exe: PathBuf,
    scenario: Scenario,
    gate: Option<ChildGuard>,
    replicas: Vec<Option<ChildGuard>>,
    workers: Option<ChildGuard>,
    http: reqwest::Client,
    /// A replica's own start-to-ready time, measured when the system started (the
    /// quickest replica, less the readiness poll's interval: the poll sees "ready" up to
    /// one interval late). What a restart costs at least, whoever does it.
    pub start_to_ready: Option<Duration>,
}

const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// How often a replica's readiness is asked while its start-to-ready is measured: it is
/// seen ready up to this late, so this much is taken off the measurement.
const START_POLL: Duration = Duration::from_millis(5);

/// The replicas' admin token, in the run directory.
const SERVICE_TOKEN_FILE: &str = "service-admin-token";

impl System {
    /// Start replicas and gate, wait until they answer, then start the workers and wait
    /// for their metrics. `exe` is the `recover` binary.
    pub async fn start(
        exe: &Path,
        scenario: &Scenario,
        run_dir: &Path,
    ) -> Result<System, OrchestrateError> {
        std::fs::create_dir_all(run_dir.join("logs"))
            .map_err(io(format!("creating {}", run_dir.display())))?;
        let port = || free_loopback_addr().map_err(OrchestrateError::Port);
        let mut replicas = Vec::new();
        for _ in 0..scenario.replicas {
            replicas.push(port()?);
        }
        let addrs = Addrs {
            gate: port()?,
            gate_admin: port()?,
            replicas,
            workers_metrics: port()?,
        };
        let token = uuid::Uuid::now_v7().simple().to_string();
        let token_file = run_dir.join("gate-token");
        std::fs::write(&token_file, &token).map_err(io("writing the gate token"))?;
        let service_token = uuid::Uuid::now_v7().simple().to_string();
        std::fs::write(run_dir.join(SERVICE_TOKEN_FILE), &service_token)
            .map_err(io("writing the service's admin token"))?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .map_err(|e| OrchestrateError::Gate(e.to_string()))?;
        let mut sys = System {
            addrs,
            run_dir: run_dir.to_path_buf(),
            token,
            service_token,
            exe: exe.to_path_buf(),
            scenario: scenario.clone(),
            gate: None,
            replicas: (0..scenario.replicas).map(|_| None).collect(),
            workers: None,
            http,
            start_to_ready: None,
        };
        let mut spawned = Vec::new();
        for i in 0..sys.replicas.len() {
            sys.spawn_replica(i, Duration::ZERO)?;
            spawned.push(std::time::Instant::now());
        }
        // The replicas' start-to-ready, before anything else starts competing for the CPU.
        for (i, at) in spawned.iter().enumerate() {
            crate::util::net::wait_http_ok_every(
                &format!("http://{}/readyz", sys.addrs.replicas[i]),
                READY_TIMEOUT,
                START_POLL,
            )
            .await
            .map_err(OrchestrateError::NotReady)?;
            let took = at.elapsed().saturating_sub(START_POLL);
            sys.start_to_ready = Some(sys.start_to_ready.map_or(took, |t| t.min(took)));
        }
        let mut gate = Command::new(exe);
        gate.arg("gate")
            .arg("--listen")
            .arg(sys.addrs.gate.to_string())
            .arg("--admin-listen")
            .arg(sys.addrs.gate_admin.to_string())
            .arg("--admin-token-file")
            .arg(&token_file)
            .arg("--state-file")
            .arg(run_dir.join("gate-state.json"))
            .arg("--upstream-timeout")
            .arg(crate::util::duration::format(scenario.workers.timeout));
        for r in &sys.addrs.replicas {
            gate.arg("--upstream").arg(format!("http://{r}"));
        }
        if let Some(sr) = &scenario.slow_replica {
            gate.args(&sr.gate_args);
        }
        sys.gate = Some(sys.spawn("gate", gate)?);
        wait_http_ok(
            &format!("http://{}/healthz", sys.addrs.gate_admin),
            READY_TIMEOUT,
        )
        .await
        .map_err(OrchestrateError::NotReady)?;
        let w = &scenario.workers;
        let mut workers = Command::new(exe);
        workers
            .args(["demo", "workers", "--target"])
            .arg(format!("http://{}/config", sys.addrs.gate))
            .arg("--count")
            .arg(w.count.to_string())
            .arg("--interval")
            .arg(crate::util::duration::format(w.interval))
            .arg("--timeout")
            .arg(crate::util::duration::format(w.timeout))
            .arg("--retry")
            .arg(&w.retry)
            .arg("--metrics-listen")
            .arg(sys.addrs.workers_metrics.to_string())
            .arg("--attempt-header")
            .arg(w.attempt_header.as_str());
        if w.idempotency_key {
            workers.arg("--idempotency-key");
        }
        sys.workers = Some(sys.spawn("workers", workers)?);
        wait_http_ok(
            &format!("http://{}/metrics", sys.addrs.workers_metrics),
            READY_TIMEOUT,
        )
        .await
        .map_err(OrchestrateError::NotReady)?;
        Ok(sys)
    }

    /// The command that starts replica `i` (the local platform's inventory reuses it).
    pub fn replica_command(&self, i: usize, startup_delay: Duration) -> Vec<String> {
        let s = &self.scenario.service;
        let fmt = crate::util::duration::format;
        vec![
            self.exe.display().to_string(),
            "demo".into(),
            "config-service".into(),
            "--listen".into(),
            self.addrs.replicas[i].to_string(),
            "--concurrency".into(),
            s.concurrency.to_string(),
            "--service-time".into(),
            fmt(s.service_time),
            "--cold-factor".into(),
            s.cold_factor.to_string(),
            "--overload-factor".into(),
            s.overload_factor.to_string(),
            "--warm-after".into(),
            s.warm_after.to_string(),
            "--warm-duration".into(),
            fmt(s.warm_duration),
            "--client-timeout".into(),
            fmt(self.scenario.workers.timeout),
            "--startup-delay".into(),
            fmt(startup_delay),
            "--admin-token-file".into(),
            self.service_token_file().display().to_string(),
        ]
    }

    /// Where the replicas' admin token is.
    pub fn service_token_file(&self) -> PathBuf {
        self.run_dir.join(SERVICE_TOKEN_FILE)
    }

    fn spawn_replica(&mut self, i: usize, startup_delay: Duration) -> Result<(), OrchestrateError> {
        let argv = self.replica_command(i, startup_delay);
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        let guard = self.spawn(&format!("replica-{i}"), cmd)?;
        self.replicas[i] = Some(guard);
        Ok(())
    }

    fn spawn(&self, name: &str, mut cmd: Command) -> Result<ChildGuard, OrchestrateError> {
        let log = self.run_dir.join("logs").join(format!("{name}.log"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(io(format!("opening {}", log.display())))?;
        let err = file.try_clone().map_err(io("log file"))?;
        cmd.stdin(Stdio::null()).stdout(file).stderr(err);
        spawn_guarded(name, cmd, GuardOptions::default()).map_err(io(format!("starting {name}")))
    }

    /// Stop replica `i` and start it again, unavailable for `startup_delay` (the trigger,
    /// or a plain restart with zero delay). Returns once the old process is gone.
    pub fn restart_replica(
        &mut self,
        i: usize,
        startup_delay: Duration,
    ) -> Result<(), OrchestrateError> {
        if let Some(mut old) = self.replicas[i].take() {
            old.stop(Duration::from_millis(500));
        }
        self.spawn_replica(i, startup_delay)
    }

    pub async fn wait_replica_ready(
        &self,
        i: usize,
        timeout: Duration,
    ) -> Result<(), OrchestrateError> {
        wait_http_ok(
            &format!("http://{}/readyz", self.addrs.replicas[i]),
            timeout,
        )
        .await
        .map_err(OrchestrateError::NotReady)
    }

    /// Hand replica `i`'s process over to someone else (the local platform); it is no
    /// longer stopped with this system (the final [`sweep`] still finds it).
    pub fn release_replica(&mut self, i: usize) -> Option<u32> {
        self.replicas[i].take().and_then(ChildGuard::detach)
    }

    /// Stop replicas handed to the local platform (its pid files under `platform/`); they
    /// run detached, so nothing else stops them.
    fn stop_handed_over(&self, grace: Duration) {
        let dir = self.run_dir.join("platform");
        for i in 0..self.addrs.replicas.len() {
            crate::platform::local::process::stop(&dir, &format!("replica-{i}"), grace);
        }
    }

    /// Every `/metrics` page, for the recorder. The gate is scraped on its admin listener,
    /// so scrapes are not counted as traffic.
    pub fn targets(&self) -> Vec<Target> {
        let mut t = vec![
            Target {
                role: Role::Gate,
                instance: "gate".into(),
                url: format!("http://{}/metrics", self.addrs.gate_admin),
            },
            Target {
                role: Role::Clients,
                instance: "workers".into(),
                url: format!("http://{}/metrics", self.addrs.workers_metrics),
            },
        ];
        for (i, r) in self.addrs.replicas.iter().enumerate() {
            t.push(Target {
                role: Role::Service,
                instance: format!("replica-{i}"),
                url: format!("http://{r}/metrics"),
            });
        }
        t
    }

    /// Make replica `i` `factor` times slower (`POST /admin/slow`); a restart undoes it.
    pub async fn slow_replica(&self, i: usize, factor: f64) -> Result<(), OrchestrateError> {
        let url = format!("http://{}/admin/slow", self.addrs.replicas[i]);
        let resp = self
            .http
            .post(&url)
            .bearer_auth(&self.service_token)
            .json(&serde_json::json!({ "factor": factor }))
            .send()
            .await
            .map_err(|e| OrchestrateError::NotReady(format!("{url}: {e}")))?;
        if !resp.status().is_success() {
            return Err(OrchestrateError::NotReady(format!(
                "{url}: HTTP {}",
                resp.status()
            )));
        }
        Ok(())
    }

    /// Set the gate's limit through its admin API.
    pub async fn set_gate_limit(&self, limit: &Limit) -> Result<(), OrchestrateError> {
        let resp = self
            .http
            .put(format!("http://{}/admin/limit", self.addrs.gate_admin))
            .bearer_auth(&self.token)
            .json(limit)
            .send()
            .await
            .map_err(|e| OrchestrateError::Gate(e.to_string()))?;
        if !resp.status().is_success() {
            let status = resp.status();
            let caps = crate::util::http_body::BodyCaps::small_json(64 * 1024);
            let body = crate::util::http_body::read_response_text(resp, caps)
                .await
                .unwrap_or_else(|e| format!("({e})"));
            return Err(OrchestrateError::Gate(format!("HTTP {status}: {body}")));
        }
        Ok(())
    }

    /// Component name -> listen address.
    pub fn endpoints(&self) -> std::collections::BTreeMap<String, String> {
        let mut m = std::collections::BTreeMap::new();
        m.insert("gate".to_string(), self.addrs.gate.to_string());
        m.insert("gate-admin".to_string(), self.addrs.gate_admin.to_string());
        m.insert(
            "workers-metrics".to_string(),
            self.addrs.workers_metrics.to_string(),
        );
        for (i, r) in self.addrs.replicas.iter().enumerate() {
            m.insert(format!("replica-{i}"), r.to_string());
        }
        m
    }

    /// Strings on the command line of every process this system started (ports and the
    /// run directory), for [`sweep`] and for tests that look for leftovers.
    pub fn markers(&self) -> Vec<String> {
        let mut m: Vec<String> = self.addrs.replicas.iter().map(|a| a.to_string()).collect();
        m.push(self.addrs.gate.to_string());
        m.push(self.addrs.workers_metrics.to_string());
        m.push(self.run_dir.display().to_string());
        m
    }

    /// Stop everything: workers first (so no retry storm hits a dying service), then the
    /// gate, then the replicas; then sweep for anything that escaped.
    pub fn stop(&mut self) {
        let grace = Duration::from_millis(500);
        if let Some(mut w) = self.workers.take() {
            w.stop(grace);
        }
        if let Some(mut g) = self.gate.take() {
            g.stop(grace);
        }
        for r in self.replicas.iter_mut() {
            if let Some(mut r) = r.take() {
                r.stop(grace);
            }
        }
        self.stop_handed_over(grace);
        let left = sweep(&self.markers());
        if !left.is_empty() {
            tracing::warn!(
                "rehearsal: killed {} leftover process(es): {left:?}",
                left.len()
            );
        }
    }
}

impl Drop for System {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Processes (other than this one) whose command line contains any of `markers`.
pub fn find_processes(markers: &[String]) -> Vec<(u32, String)> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    let mut found = vec![];
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        if is_zombie(pid) {
            continue;
        }
        // Ports must match as whole arguments ("127.0.0.1:4000" is not "127.0.0.1:40001").
        let hit = markers.iter().any(|m| {
            cmdline.split(' ').any(|arg| {
                arg == m
                    || arg.starts_with(&format!("{m}/"))
                    || arg.ends_with(&format!("//{m}"))
                    || arg.contains(&format!("//{m}/"))
            })
        });
        if hit {
            found.push((pid, cmdline.trim().to_string()));
        }
    }
    found
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|r| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Kill (SIGKILL) every process matching `markers`; returns their pids.
pub fn sweep(markers: &[String]) -> Vec<u32> {
    let found = find_processes(markers);
    for (pid, _) in &found {
        // SAFETY: signalling a process we identified by its command line.
        unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
    }
    found.into_iter().map(|(p, _)| p).collect()
}
