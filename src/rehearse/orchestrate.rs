//! Starts and stops the demo system ([`crate::demo::topology`]: the gate, the
//! config-service replicas and the worker fleet, each a `recover` subcommand) as real
//! processes on free loopback ports.
//!
//! Why it exists: the rehearsal's promise is "real processes, no orphans". Every child is
//! spawned through `util::child::spawn_guarded` (own process group, killed with its parent,
//! stopped on drop), and [`sweep`] finds anything that escaped by the markers (ports, run
//! directory) on its command line, so teardown also holds after a panic or Ctrl-C.

use super::recorder::Target;
use super::scenario::Scenario;
use super::series::Role;
use crate::demo::topology::{self, replica_name, Addrs, Topology};
use crate::gate::limit::Limit;
use crate::platform::local::process;
use crate::util::child::{spawn_guarded, ChildGuard, GuardOptions};
use crate::util::net::wait_http_ok;
use crate::util::procfs;
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

/// The running demo system. Dropping it stops every process it started.
pub struct System {
    /// What runs where; its directory holds the gate's token and state, every process's
    /// log and, once handed over, the local platform's inventory and pid files.
    pub topology: Topology,
    pub token: String,
    /// The token the replicas' `/admin/*` requires (the gate forwards every path).
    service_token: String,
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
/// How long a process gets to stop before it is killed.
const STOP_GRACE: Duration = Duration::from_millis(500);
/// The local platform's name for the system (its target id is `local:rehearsal`).
pub const INVENTORY_NAME: &str = "rehearsal";
/// How often a replica's readiness is asked while its start-to-ready is measured: it is
/// seen ready up to this late, so this much is taken off the measurement.
const START_POLL: Duration = Duration::from_millis(5);

impl System {
    /// Start replicas and gate, wait until they answer, then start the workers and wait
    /// for their metrics. `exe` is the `recover` binary.
    pub async fn start(
        exe: &Path,
        scenario: &Scenario,
        run_dir: &Path,
    ) -> Result<System, OrchestrateError> {
        let t = Topology {
            exe: exe.to_path_buf(),
            dir: run_dir.to_path_buf(),
            addrs: Addrs::free(scenario.replicas).map_err(OrchestrateError::Port)?,
            service: scenario.service.clone(),
            workers: scenario.workers.clone(),
            gate_args: scenario
                .slow_replica
                .as_ref()
                .map(|sr| sr.gate_args.clone())
                .unwrap_or_default(),
        };
        let state = t.state_dir();
        std::fs::create_dir_all(&state).map_err(io(format!("creating {}", state.display())))?;
        let token = uuid::Uuid::now_v7().simple().to_string();
        std::fs::write(t.token_file(), &token).map_err(io("writing the gate token"))?;
        let service_token = uuid::Uuid::now_v7().simple().to_string();
        std::fs::write(t.service_token_file(), &service_token)
            .map_err(io("writing the service's admin token"))?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .map_err(|e| OrchestrateError::Gate(e.to_string()))?;
        let mut sys = System {
            replicas: (0..scenario.replicas).map(|_| None).collect(),
            topology: t,
            token,
            service_token,
            gate: None,
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
            let url = format!("http://{}/readyz", sys.topology.addrs.replicas[i]);
            crate::util::net::wait_http_ok_every(&url, READY_TIMEOUT, START_POLL)
                .await
                .map_err(OrchestrateError::NotReady)?;
            let took = at.elapsed().saturating_sub(START_POLL);
            sys.start_to_ready = Some(sys.start_to_ready.map_or(took, |t| t.min(took)));
        }
        sys.gate = Some(sys.spawn(topology::GATE, &sys.topology.gate_command())?);
        let admin = sys.topology.addrs.gate_admin;
        wait_http_ok(&format!("http://{admin}/healthz"), READY_TIMEOUT)
            .await
            .map_err(OrchestrateError::NotReady)?;
        sys.workers = Some(sys.spawn(topology::WORKERS, &sys.topology.workers_command())?);
        wait_http_ok(&sys.topology.workers_metrics_url(), READY_TIMEOUT)
            .await
            .map_err(OrchestrateError::NotReady)?;
        Ok(sys)
    }

    pub fn addrs(&self) -> &Addrs {
        &self.topology.addrs
    }

    pub fn run_dir(&self) -> &Path {
        &self.topology.dir
    }

    fn spawn_replica(&mut self, i: usize, startup_delay: Duration) -> Result<(), OrchestrateError> {
        let argv = self.topology.replica_command(i, startup_delay);
        let guard = self.spawn(&replica_name(i), &argv)?;
        self.replicas[i] = Some(guard);
        Ok(())
    }

    /// Start `argv` under guard as `name`, its output appended to its log in the state
    /// directory (where the local platform's processes log too).
    fn spawn(&self, name: &str, argv: &[String]) -> Result<ChildGuard, OrchestrateError> {
        let log = process::log_file(&self.topology.state_dir(), name);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(io(format!("opening {}", log.display())))?;
        let err = file.try_clone().map_err(io("log file"))?;
        let (program, args) = argv.split_first().ok_or_else(|| OrchestrateError::Io {
            what: format!("starting {name}"),
            source: std::io::Error::other("empty command"),
        })?;
        let mut cmd = Command::new(program);
        cmd.args(args).stdin(Stdio::null()).stdout(file).stderr(err);
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
            old.stop(STOP_GRACE);
        }
        self.spawn_replica(i, startup_delay)
    }

    pub async fn wait_replica_ready(
        &self,
        i: usize,
        timeout: Duration,
    ) -> Result<(), OrchestrateError> {
        let r = self.topology.addrs.replicas[i];
        wait_http_ok(&format!("http://{r}/readyz"), timeout)
            .await
            .map_err(OrchestrateError::NotReady)
    }

    /// Hand the running replicas to the local platform: write the inventory and one pid
    /// file per replica, so a run (or `recover resume`) owns them from here; they are no
    /// longer stopped with this system's guards. Returns the inventory's path.
    pub fn hand_over(&mut self) -> std::io::Result<PathBuf> {
        let path = self.topology.write_inventory(
            INVENTORY_NAME,
            STOP_GRACE,
            "Written by the rehearsal: its system, handed to the local platform.",
        )?;
        let state = self.topology.state_dir();
        for i in 0..self.replicas.len() {
            if let Some(pid) = self.replicas[i].take().and_then(ChildGuard::detach) {
                crate::util::atomic_file::write_atomic(
                    &process::pid_file(&state, &replica_name(i)),
                    format!("{pid}\n").as_bytes(),
                )?;
            }
        }
        Ok(path)
    }

    /// Stop replicas handed to the local platform (its pid files); they run detached, so
    /// nothing else stops them.
    fn stop_handed_over(&self) {
        let state = self.topology.state_dir();
        for i in 0..self.replicas.len() {
            process::stop(&state, &replica_name(i), STOP_GRACE);
        }
    }

    /// Every `/metrics` page, for the recorder. The gate is scraped on its admin listener,
    /// so scrapes are not counted as traffic.
    pub fn targets(&self) -> Vec<Target> {
        let t = &self.topology;
        let mut out = vec![
            Target {
                role: Role::Gate,
                instance: topology::GATE.into(),
                url: t.gate_metrics_url(),
            },
            Target {
                role: Role::Clients,
                instance: topology::WORKERS.into(),
                url: t.workers_metrics_url(),
            },
        ];
        for (i, r) in t.addrs.replicas.iter().enumerate() {
            out.push(Target {
                role: Role::Service,
                instance: replica_name(i),
                url: format!("http://{r}/metrics"),
            });
        }
        out
    }

    /// Make replica `i` `factor` times slower (`POST /admin/slow`); a restart undoes it.
    pub async fn slow_replica(&self, i: usize, factor: f64) -> Result<(), OrchestrateError> {
        let url = format!("http://{}/admin/slow", self.topology.addrs.replicas[i]);
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
            .put(format!(
                "http://{}/admin/limit",
                self.topology.addrs.gate_admin
            ))
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
        self.topology.endpoints()
    }

    /// Strings on the command line of every process this system started (ports and the
    /// run directory), for [`sweep`] and for tests that look for leftovers.
    pub fn markers(&self) -> Vec<String> {
        self.topology.markers()
    }

    /// Stop everything: workers first (so no retry storm hits a dying service), then the
    /// gate, then the replicas; then sweep for anything that escaped.
    pub fn stop(&mut self) {
        if let Some(mut w) = self.workers.take() {
            w.stop(STOP_GRACE);
        }
        if let Some(mut g) = self.gate.take() {
            g.stop(STOP_GRACE);
        }
        for r in self.replicas.iter_mut() {
            if let Some(mut r) = r.take() {
                r.stop(STOP_GRACE);
            }
        }
        self.stop_handed_over();
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

/// Processes (other than this one, and not zombies) one of whose arguments is one of
/// `markers`: an address (`127.0.0.1:4000` as itself or in a URL, never a prefix of
/// `127.0.0.1:40001`) or a directory (itself or a path under it).
pub fn find_processes(markers: &[String]) -> Vec<(u32, String)> {
    let me = std::process::id();
    procfs::pids()
        .into_iter()
        .filter(|pid| *pid != me)
        .filter_map(|pid| Some((pid, procfs::cmdline(pid)?)))
        .filter(|(pid, args)| {
            args.iter().any(|arg| markers.iter().any(|m| marks(arg, m))) && !procfs::is_zombie(*pid)
        })
        .map(|(pid, args)| (pid, args.join(" ")))
        .collect()
}

/// Whether argument `arg` names `marker`. Pure.
fn marks(arg: &str, m: &str) -> bool {
    arg == m
        || arg.starts_with(&format!("{m}/"))
        || arg.ends_with(&format!("//{m}"))
        || arg.contains(&format!("//{m}/"))
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

#[cfg(test)]
mod tests {
    use super::marks;

    #[test]
    fn a_marker_is_a_whole_address_or_a_directory_never_a_prefix() {
        assert!(marks("127.0.0.1:4000", "127.0.0.1:4000"));
        assert!(marks("http://127.0.0.1:4000", "127.0.0.1:4000"));
        assert!(marks("http://127.0.0.1:4000/config", "127.0.0.1:4000"));
        assert!(!marks("127.0.0.1:40001", "127.0.0.1:4000"));
        assert!(marks("/runs/1/state/gate-state.json", "/runs/1"));
        assert!(!marks("/runs/10/gate-token", "/runs/1"));
    }
}
