//! The demo system in one description: its components (the gate, the config-service
//! replicas, the worker fleet, each a `recover` subcommand), the command line each runs
//! with, where each listens and the files they share in the system's directory. `recover
//! demo up` starts it detached on fixed ports, the rehearsal under guard on free ports;
//! both take every command line, address and path from here, so the two cannot drift.

use super::defaults;
use crate::platform::local::inventory::{ClientSpec, GateSpec, Inventory, ReplicaSpec};
use crate::util::duration::{format as fmt, serde_human};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The files in the system's directory (relative names).
pub mod files {
    pub const INVENTORY: &str = "inventory.yaml";
    pub const GATE_TOKEN: &str = "gate-token";
    /// The token the config service's `/admin/*` requires (the gate forwards every path,
    /// so the service guards its own admin endpoints).
    pub const SERVICE_ADMIN_TOKEN: &str = "service-admin-token";
    /// Pid files and logs of the processes, the gate's state file.
    pub const STATE: &str = "state";
    pub const GATE_STATE: &str = "gate-state.json";
}

/// `recover demo config-service` flags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServiceSpec {
    pub concurrency: u32,
    #[serde(with = "serde_human")]
    pub service_time: Duration,
    pub cold_factor: f64,
    pub overload_factor: f64,
    pub warm_after: u64,
    #[serde(with = "serde_human")]
    pub warm_duration: Duration,
}

/// `recover demo workers` flags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkersSpec {
    pub count: u32,
    #[serde(with = "serde_human")]
    pub interval: Duration,
    #[serde(with = "serde_human")]
    pub timeout: Duration,
    /// As `--retry` spells it: `fixed:1s`, `exp:base=100ms,max=10s`, ...
    pub retry: String,
    /// How each attempt says which attempt it is: `x-attempt` (default), `none` (like most
    /// real clients), `x-envoy-attempt-count`, `grpc-previous-rpc-attempts`,
    /// `amz-sdk-request`.
    pub attempt_header: super::workers::AttemptHeader,
    /// Send an `Idempotency-Key`, the same for a poll and its retries.
    pub idempotency_key: bool,
}

// The laptop scenario (`demo::defaults`; docs/design/arithmetic.md explains the
// arithmetic).
impl Default for ServiceSpec {
    fn default() -> Self {
        ServiceSpec {
            concurrency: defaults::SERVICE_CONCURRENCY as u32,
            service_time: defaults::SERVICE_TIME,
            cold_factor: defaults::COLD_FACTOR,
            overload_factor: defaults::OVERLOAD_FACTOR,
            warm_after: defaults::WARM_AFTER_REQUESTS,
            warm_duration: defaults::WARM_DURATION,
        }
    }
}

impl Default for WorkersSpec {
    fn default() -> Self {
        WorkersSpec {
            count: defaults::WORKERS as u32,
            interval: defaults::POLL_INTERVAL,
            timeout: defaults::CLIENT_TIMEOUT,
            retry: defaults::RETRY_POLICY.into(),
            attempt_header: Default::default(),
            idempotency_key: false,
        }
    }
}

/// Where each component listens.
#[derive(Debug, Clone, PartialEq)]
pub struct Addrs {
    /// The gate's proxy, where the workers send their polls.
    pub gate: SocketAddr,
    /// The gate's admin API and `/metrics`.
    pub gate_admin: SocketAddr,
    /// The workers' `/metrics`.
    pub workers_metrics: SocketAddr,
    pub replicas: Vec<SocketAddr>,
}

impl Addrs {
    /// Fixed ports from `base`: gate +0, gate admin +1, workers' metrics +2, replica i at
    /// +10+i (+5 is left for the webhook receiver).
    pub fn from_base(base: u16, replicas: u32) -> Result<Addrs, String> {
        let last = u32::from(base) + 10 + replicas;
        if base == 0 || last > u32::from(u16::MAX) {
            return Err(format!(
                "--base-port {base}: the demo needs ports {base}..{last}"
            ));
        }
        let at =
            |offset: u32| SocketAddr::from(([127, 0, 0, 1], (u32::from(base) + offset) as u16));
        Ok(Addrs {
            gate: at(0),
            gate_admin: at(1),
            workers_metrics: at(2),
            replicas: (0..replicas).map(|i| at(10 + i)).collect(),
        })
    }

    /// Loopback ports reserved for this process's life, outside the range the kernel hands
    /// to outgoing connections: a replica restarted on its port finds it free.
    pub fn free(replicas: u32) -> std::io::Result<Addrs> {
        let port = crate::util::ports::reserved_loopback_addr;
        Ok(Addrs {
            gate: port()?,
            gate_admin: port()?,
            workers_metrics: port()?,
            replicas: (0..replicas).map(|_| port()).collect::<Result<_, _>>()?,
        })
    }

    /// Every address something listens on.
    pub fn all(&self) -> Vec<SocketAddr> {
        let mut v = vec![self.gate, self.gate_admin, self.workers_metrics];
        v.extend(&self.replicas);
        v
    }
}

/// The name of replica `i` (its process, pid file and inventory entry).
pub fn replica_name(i: usize) -> String {
    format!("replica-{i}")
}

/// The gate's name (its process, log and pid file).
pub const GATE: &str = "gate";
/// The worker fleet's name.
pub const WORKERS: &str = "workers";

/// The flags that keep a restarted replica unavailable for `delay` (none for a plain
/// restart).
pub fn startup_delay(delay: Duration) -> Vec<String> {
    if delay.is_zero() {
        return vec![];
    }
    vec!["--startup-delay".into(), fmt(delay)]
}

/// The whole demo system.
#[derive(Debug, Clone)]
pub struct Topology {
    /// The `recover` binary every component runs.
    pub exe: PathBuf,
    /// The system's directory ([`files`]).
    pub dir: PathBuf,
    pub addrs: Addrs,
    pub service: ServiceSpec,
    pub workers: WorkersSpec,
    /// Further `recover gate` flags (balancing, outlier ejection).
    pub gate_args: Vec<String>,
}

impl Topology {
    fn exe(&self) -> String {
        self.exe.display().to_string()
    }

    pub fn token_file(&self) -> PathBuf {
        self.dir.join(files::GATE_TOKEN)
    }

    /// The replicas' admin token.
    pub fn service_token_file(&self) -> PathBuf {
        self.dir.join(files::SERVICE_ADMIN_TOKEN)
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.join(files::STATE)
    }

    pub fn inventory_file(&self) -> PathBuf {
        self.dir.join(files::INVENTORY)
    }

    /// `recover gate` in front of every replica.
    pub fn gate_command(&self) -> Vec<String> {
        let mut argv = vec![
            self.exe(),
            "gate".into(),
            "--listen".into(),
            self.addrs.gate.to_string(),
            "--admin-listen".into(),
            self.addrs.gate_admin.to_string(),
            "--admin-token-file".into(),
            self.token_file().display().to_string(),
            "--state-file".into(),
            self.state_dir()
                .join(files::GATE_STATE)
                .display()
                .to_string(),
            "--upstream-timeout".into(),
            fmt(self.workers.timeout),
            // The worker fleet is one process on one loopback address standing for as many
            // clients on their own addresses: the per-address cap (there against one
            // client holding the gate) would turn most of a large fleet away at the door
            // in its retry loop, a system no real incident has. So it is the total cap,
            // as behind a load balancer (`recover gate --help`); the total, lowered to
            // the open file limit, still binds.
            "--max-connections-per-address".into(),
            crate::gate::limits::DEFAULT_MAX_CONNECTIONS.to_string(),
        ];
        for r in &self.addrs.replicas {
            argv.extend(["--upstream".into(), format!("http://{r}")]);
        }
        argv.extend(self.gate_args.iter().cloned());
        argv
    }

    /// `recover demo config-service` for replica `i`, unavailable for `delay` after it
    /// starts.
    pub fn replica_command(&self, i: usize, delay: Duration) -> Vec<String> {
        let s = &self.service;
        let mut argv = vec![
            self.exe(),
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
            fmt(self.workers.timeout),
            "--admin-token-file".into(),
            self.service_token_file().display().to_string(),
        ];
        argv.extend(startup_delay(delay));
        argv
    }

    /// `recover demo workers` polling through the gate.
    pub fn workers_command(&self) -> Vec<String> {
        let w = &self.workers;
        let mut argv = vec![
            self.exe(),
            "demo".into(),
            "workers".into(),
            "--target".into(),
            format!("http://{}/config", self.addrs.gate),
            "--count".into(),
            w.count.to_string(),
            "--interval".into(),
            fmt(w.interval),
            "--timeout".into(),
            fmt(w.timeout),
            "--retry".into(),
            w.retry.clone(),
            "--metrics-listen".into(),
            self.addrs.workers_metrics.to_string(),
            "--attempt-header".into(),
            w.attempt_header.as_str().into(),
        ];
        if w.idempotency_key {
            argv.push("--idempotency-key".into());
        }
        argv
    }

    /// The system as the local platform sees it, named `name`: replicas restart without
    /// delay. Paths are relative to the directory, so the file moves with it.
    pub fn inventory(&self, name: &str, stop_grace: Duration) -> Inventory {
        Inventory {
            name: name.into(),
            state_dir: Some(PathBuf::from(files::STATE)),
            replicas: self
                .addrs
                .replicas
                .iter()
                .enumerate()
                .map(|(i, a)| ReplicaSpec {
                    name: replica_name(i),
                    command: self.replica_command(i, Duration::ZERO),
                    env: Default::default(),
                    admin_url: format!("http://{a}"),
                    admin_token_file: Some(PathBuf::from(files::SERVICE_ADMIN_TOKEN)),
                    metrics_url: format!("http://{a}/metrics"),
                    readiness_url: format!("http://{a}/readyz"),
                    adopt: None,
                })
                .collect(),
            gates: vec![GateSpec {
                admin_url: format!("http://{}", self.addrs.gate_admin),
                token_file: PathBuf::from(files::GATE_TOKEN),
                metrics_url: Some(self.gate_metrics_url()),
            }],
            clients: vec![ClientSpec {
                name: WORKERS.into(),
                metrics_url: self.workers_metrics_url(),
            }],
            stop_grace,
        }
    }

    /// The gate's `/metrics`, on its admin listener so scrapes are not counted as traffic.
    pub fn gate_metrics_url(&self) -> String {
        format!("http://{}/metrics", self.addrs.gate_admin)
    }

    pub fn workers_metrics_url(&self) -> String {
        format!("http://{}/metrics", self.addrs.workers_metrics)
    }

    /// Component name -> listen address.
    pub fn endpoints(&self) -> BTreeMap<String, String> {
        let a = &self.addrs;
        let mut m = BTreeMap::from([
            (GATE.to_string(), a.gate.to_string()),
            ("gate-admin".to_string(), a.gate_admin.to_string()),
            ("workers-metrics".to_string(), a.workers_metrics.to_string()),
        ]);
        for (i, r) in a.replicas.iter().enumerate() {
            m.insert(replica_name(i), r.to_string());
        }
        m
    }

    /// Strings on the command line of every process of this system (its ports and its
    /// directory), to find any that escaped.
    pub fn markers(&self) -> Vec<String> {
        let a = &self.addrs;
        let mut m: Vec<String> = a.replicas.iter().map(|r| r.to_string()).collect();
        m.push(a.gate.to_string());
        m.push(a.workers_metrics.to_string());
        m.push(self.dir.display().to_string());
        m
    }

    /// Write the inventory into the directory (atomically), with a comment first.
    pub fn write_inventory(
        &self,
        name: &str,
        stop_grace: Duration,
        comment: &str,
    ) -> std::io::Result<PathBuf> {
        let yaml = serde_yaml::to_string(&self.inventory(name, stop_grace))
            .map_err(std::io::Error::other)?;
        let path = self.inventory_file();
        write(&path, &format!("# {comment}\n{yaml}"))?;
        Ok(path)
    }
}

fn write(path: &Path, text: &str) -> std::io::Result<()> {
    crate::util::atomic_file::write_atomic(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A restarted replica binds its port again: a port from the kernel's ephemeral range
    /// may meanwhile be the local end of one of the clients' or the gate's connections
    /// (thousands in a rehearsal), and the restart fails "address in use".
    #[test]
    fn a_rehearsals_ports_are_outside_the_range_outgoing_connections_draw_from() {
        let low = crate::util::ports::ephemeral_low();
        let a = Addrs::free(4).unwrap();
        let all = a.all();
        for addr in &all {
            assert!(
                addr.port() < low,
                "{addr} is in the ephemeral range from {low}"
            );
        }
        let distinct: std::collections::HashSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), all.len(), "{all:?}");
    }

    fn topology() -> Topology {
        Topology {
            exe: "/bin/recover".into(),
            dir: "/d".into(),
            addrs: Addrs::from_base(18080, 2).unwrap(),
            service: ServiceSpec::default(),
            workers: WorkersSpec::default(),
            gate_args: vec!["--balance".into(), "round-robin".into()],
        }
    }

    #[test]
    fn every_command_line_names_the_addresses_and_files_of_the_one_description() {
        let t = topology();
        assert_eq!(t.addrs.gate.port(), 18080);
        assert_eq!(t.addrs.gate_admin.port(), 18081);
        assert_eq!(t.addrs.workers_metrics.port(), 18082);
        assert_eq!(t.addrs.replicas[1].port(), 18091);
        assert!(Addrs::from_base(65530, 1).is_err());
        let gate = t.gate_command().join(" ");
        assert!(
            gate.contains("--upstream http://127.0.0.1:18090 --upstream http://127.0.0.1:18091")
                && gate.contains("--admin-token-file /d/gate-token")
                && gate.contains("--state-file /d/state/gate-state.json")
                && gate.ends_with("--balance round-robin"),
            "{gate}"
        );
        let workers = t.workers_command().join(" ");
        assert!(
            workers.contains("--target http://127.0.0.1:18080/config")
                && workers.contains("--metrics-listen 127.0.0.1:18082"),
            "{workers}"
        );
        let replica = t.replica_command(1, Duration::ZERO);
        assert!(
            !replica.contains(&"--startup-delay".to_string())
                && replica
                    .join(" ")
                    .contains("--admin-token-file /d/service-admin-token"),
            "{replica:?}"
        );
        let delayed = t.replica_command(1, Duration::from_secs(5)).join(" ");
        assert!(delayed.ends_with("--startup-delay 5s"), "{delayed}");
        // The inventory restarts each replica with the command that started it.
        let inv = t.inventory("demo", Duration::from_secs(2));
        let text = serde_yaml::to_string(&inv).unwrap();
        let back = Inventory::parse("inventory.yaml", &text).unwrap();
        assert_eq!(
            back.replicas[1].command,
            t.replica_command(1, Duration::ZERO)
        );
        assert_eq!(
            back.replicas[1].readiness_url,
            "http://127.0.0.1:18091/readyz"
        );
        assert_eq!(back.gates[0].token_file, Path::new(files::GATE_TOKEN));
        // The inventory names the replicas' admin token, so the platform can send it.
        assert_eq!(
            back.replicas[1].admin_token_file.as_deref(),
            Some(Path::new(files::SERVICE_ADMIN_TOKEN))
        );
        assert!(t.markers().contains(&"127.0.0.1:18091".to_string()));
    }

    /// The value of `flag` in `argv`.
    fn flag_value(argv: &[String], flag: &str) -> usize {
        let i = argv.iter().position(|a| a == flag).expect(flag);
        argv[i + 1].parse().unwrap()
    }

    /// Every client of a fleet comes from the one loopback address: the gate must let
    /// as many connections in from it as it lets in at all. Seed 7's first grid point
    /// (2,377 workers) saw ~800 connections a second refused at the default 1,000 per
    /// address while stuck, its gate counting 500-1,000 req/s of the ~1,050 its clients sent.
    #[test]
    fn the_gate_admits_the_whole_fleet_from_its_one_address() {
        let mut t = topology();
        // The laptop's fleet, the default cap and past it, and the grid's largest draws.
        for workers in [80, 1_000, 1_001, 2_377, 4_400] {
            t.workers.count = workers;
            let argv = t.gate_command();
            let limits = crate::gate::limits::ClientLimits {
                max_connections_per_address: flag_value(&argv, "--max-connections-per-address"),
                ..Default::default()
            };
            let w = workers as usize;
            if w <= limits.max_connections {
                assert_eq!(
                    crate::gate::limits::admit(w - 1, w - 1, &limits),
                    Ok(()),
                    "{workers} workers: {argv:?}"
                );
            }
        }
    }
}
