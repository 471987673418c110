//! `recover demo up | trigger | down`: the demo system as an engineer starts it by hand,
//! to try the 3 am path on a laptop: the gate, the config-service replicas and the
//! workers run detached on fixed ports, with a generated gate token, and the directory
//! holds the matching `inventory.yaml` (the replicas are started through the local
//! platform, so a run owns them), a Prometheus scrape config and a `serve.yaml` for the
//! webhook receiver. `trigger` causes the outage (a deploy: every replica restarts and is
//! unavailable for a few seconds); the service then stays stuck. `down` stops it all.
//!
//! Ports, from `base_port` (default 18080): gate +0, gate admin API and metrics +1,
//! workers' metrics +2, webhook receiver (if started) +5, replica i at +10+i.

use crate::demo::workers::AttemptHeader;
use crate::platform::local::inventory::{ClientSpec, GateSpec, Inventory, ReplicaSpec};
use crate::platform::local::{process, LocalPlatform};
use crate::util::net::wait_http_ok;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default first port.
pub const BASE_PORT: u16 = 18080;
/// The default directory, relative to where the command runs.
pub const DIR: &str = "recover-demo";
/// How long a component gets to answer after it starts.
const READY: Duration = Duration::from_secs(20);

/// Where each component listens.
#[derive(Debug, Clone, PartialEq)]
pub struct Ports {
    pub gate: SocketAddr,
    pub gate_admin: SocketAddr,
    pub workers: SocketAddr,
    pub serve: SocketAddr,
    pub replicas: Vec<SocketAddr>,
}

impl Ports {
    pub fn from_base(base: u16, replicas: u32) -> Result<Ports, DemoError> {
        let last = u32::from(base) + 10 + replicas;
        if base == 0 || last > u32::from(u16::MAX) {
            return Err(DemoError::Ports(format!(
                "--base-port {base}: the demo needs ports {base}..{last}"
            )));
        }
        let at =
            |offset: u32| SocketAddr::from(([127, 0, 0, 1], (u32::from(base) + offset) as u16));
        Ok(Ports {
            gate: at(0),
            gate_admin: at(1),
            workers: at(2),
            serve: at(5),
            replicas: (0..replicas).map(|i| at(10 + i)).collect(),
        })
    }

    fn listened(&self) -> Vec<SocketAddr> {
        let mut v = vec![self.gate, self.gate_admin, self.workers];
        v.extend(&self.replicas);
        v
    }
}

/// What `up` starts.
#[derive(Debug, Clone)]
pub struct UpOptions {
    pub dir: PathBuf,
    pub base_port: u16,
    pub replicas: u32,
    pub workers: u32,
    pub attempt_header: AttemptHeader,
    pub idempotency_key: bool,
    /// The `recover` binary every component runs.
    pub exe: PathBuf,
}

/// Why the demo system could not be started, triggered or stopped.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("{0}")]
    Ports(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    NotReady(String),
    #[error(transparent)]
    Inventory(#[from] crate::platform::local::inventory::InventoryError),
    #[error("{0}")]
    Platform(#[from] crate::platform::PlatformError),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> DemoError {
    let what = what.into();
    move |source| DemoError::Io { what, source }
}

/// The files `up` writes, relative to the demo directory.
pub mod files {
    pub const INVENTORY: &str = "inventory.yaml";
    pub const GATE_TOKEN: &str = "gate-token";
    pub const PROMETHEUS: &str = "prometheus.yml";
    pub const SERVE: &str = "serve.yaml";
    pub const SERVE_TOKEN: &str = "serve-token";
    /// The token the config service's `/admin/*` requires (the gate forwards every path).
    pub const SERVICE_ADMIN_TOKEN: &str = "service-admin-token";
    pub const STATE: &str = "state";
}

fn exe_str(o: &UpOptions) -> String {
    o.exe.display().to_string()
}

/// The inventory describing the demo system (relative paths: it moves with its directory;
/// the replicas' commands name their admin token under `dir`).
pub fn inventory(o: &UpOptions, p: &Ports, dir: &Path) -> Inventory {
    Inventory {
        name: "demo".into(),
        state_dir: Some(PathBuf::from(files::STATE)),
        replicas: p
            .replicas
            .iter()
            .enumerate()
            .map(|(i, a)| ReplicaSpec {
                name: format!("replica-{i}"),
                command: vec![
                    exe_str(o),
                    "demo".into(),
                    "config-service".into(),
                    "--listen".into(),
                    a.to_string(),
                    "--admin-token-file".into(),
                    dir.join(files::SERVICE_ADMIN_TOKEN).display().to_string(),
                ],
                env: Default::default(),
                admin_url: format!("http://{a}"),
                admin_token_file: Some(PathBuf::from(files::SERVICE_ADMIN_TOKEN)),
                metrics_url: format!("http://{a}/metrics"),
                readiness_url: format!("http://{a}/readyz"),
                adopt: None,
            })
            .collect(),
        gates: vec![GateSpec {
            admin_url: format!("http://{}", p.gate_admin),
            token_file: PathBuf::from(files::GATE_TOKEN),
            metrics_url: Some(format!("http://{}/metrics", p.gate_admin)),
        }],
        clients: vec![ClientSpec {
            name: "workers".into(),
            metrics_url: format!("http://{}/metrics", p.workers),
        }],
        stop_grace: Duration::from_secs(2),
    }
}

/// A Prometheus scrape config for the demo, labelling targets by role as the built-in
/// runbooks' `promql` expressions expect.
pub fn prometheus_config(p: &Ports) -> String {
    let replicas: Vec<String> = p.replicas.iter().map(|a| format!("'{a}'")).collect();
    format!(
        "# Scrapes the demo system started by `recover demo up` (roles as the runbooks' promql\n\
         # expressions expect). prometheus --config.file=prometheus.yml\n\
         global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
         scrape_configs:\n\
         \x20 - job_name: recover-demo-gate\n    static_configs:\n      - targets: ['{}']\n        labels: {{app_kubernetes_io_name: recover-gate}}\n\
         \x20 - job_name: recover-demo-service\n    static_configs:\n      - targets: [{}]\n        labels: {{app_kubernetes_io_name: config-service}}\n\
         \x20 - job_name: recover-demo-workers\n    static_configs:\n      - targets: ['{}']\n        labels: {{app_kubernetes_io_name: workers}}\n",
        p.gate_admin,
        replicas.join(", "),
        p.workers
    )
}

/// A webhook receiver config routing `ConfigServiceStuck` to the demo, acting on it.
pub fn serve_config(dir: &Path) -> String {
    format!(
        "# recover serve --listen <serve port> --config {dir}/serve.yaml --mode act\n\
         apiVersion: recover/v1\nkind: ServeConfig\n\
         auth:\n  bearer_token: {{ file: {dir}/{token} }}\n\
         budget: {{ runs_per_window: 2, window: 1h, breaker_after_failures: 2, cooldown: 1m }}\n\
         recheck: {{ after: 10s, max: 5 }}\n\
         state_file: {dir}/state/serve-state.json\n\
         journal_dir: {dir}/recover-runs\n\
         routes:\n  - name: demo-stuck\n    match: {{ alertname: RecoverStuckOverload }}\n    runbook: stuck-overload\n    target: {{ platform: local, name: demo, inventory: {dir}/{inv} }}\n",
        dir = dir.display(),
        token = files::SERVE_TOKEN,
        inv = files::INVENTORY
    )
}

fn write_secret(path: &Path) -> Result<(), DemoError> {
    use std::os::unix::fs::PermissionsExt;
    if path.exists() {
        return Ok(());
    }
    let token: String = rand::random::<[u8; 24]>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    crate::util::atomic_file::write_atomic(path, token.as_bytes())
        .and_then(|_| std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)))
        .map_err(io(format!("writing {}", path.display())))
}

/// What `up` started.
#[derive(Debug, Clone)]
pub struct Up {
    pub dir: PathBuf,
    pub ports: Ports,
    pub inventory: PathBuf,
}

/// Start the demo system detached; refuses when a port it needs is taken.
pub async fn up(o: &UpOptions) -> Result<Up, DemoError> {
    let ports = Ports::from_base(o.base_port, o.replicas)?;
    for a in ports.listened() {
        if TcpListener::bind(a).is_err() {
            return Err(DemoError::Ports(format!(
                "{a} is in use (a demo already up? `recover demo down --dir {}`; or choose --base-port)",
                o.dir.display()
            )));
        }
    }
    let dir = &o.dir;
    let state = dir.join(files::STATE);
    std::fs::create_dir_all(&state).map_err(io(format!("creating {}", state.display())))?;
    let dir = std::fs::canonicalize(dir).map_err(io(format!("{}", dir.display())))?;
    write_secret(&dir.join(files::GATE_TOKEN))?;
    write_secret(&dir.join(files::SERVE_TOKEN))?;
    write_secret(&dir.join(files::SERVICE_ADMIN_TOKEN))?;
    let inv = inventory(o, &ports, &dir);
    let inv_path = dir.join(files::INVENTORY);
    let write = |name: &str, text: &str| {
        crate::util::atomic_file::write_atomic(&dir.join(name), text.as_bytes())
            .map_err(io(format!("writing {}", dir.join(name).display())))
    };
    let yaml = serde_yaml::to_string(&inv).map_err(|e| DemoError::Io {
        what: "encoding the inventory".into(),
        source: std::io::Error::other(e),
    })?;
    write(
        files::INVENTORY,
        &format!(
            "# Written by `recover demo up`: the demo system for `recover --target local`.\n{yaml}"
        ),
    )?;
    write(files::PROMETHEUS, &prometheus_config(&ports))?;
    write(files::SERVE, &serve_config(&dir))?;
    let started = start_all(o, &dir, &inv, &ports).await;
    if started.is_err() {
        // Half a demo is no use to anyone: stop what did start.
        let _ = down(&dir);
    }
    started?;
    Ok(Up {
        dir,
        ports,
        inventory: inv_path,
    })
}

/// Start replicas, gate and workers detached, each once the one before answers.
async fn start_all(
    o: &UpOptions,
    dir: &Path,
    inv: &Inventory,
    ports: &Ports,
) -> Result<(), DemoError> {
    let platform = LocalPlatform::from_file(&dir.join(files::INVENTORY))?;
    platform.start_missing()?;
    let mut gate = vec![
        exe_str(o),
        "gate".into(),
        "--listen".into(),
        ports.gate.to_string(),
        "--admin-listen".into(),
        ports.gate_admin.to_string(),
        "--admin-token-file".into(),
        dir.join(files::GATE_TOKEN).display().to_string(),
        "--state-file".into(),
        dir.join(files::STATE)
            .join("gate-state.json")
            .display()
            .to_string(),
        "--upstream-timeout".into(),
        crate::util::duration::format(super::defaults::CLIENT_TIMEOUT),
    ];
    for r in &ports.replicas {
        gate.extend(["--upstream".into(), format!("http://{r}")]);
    }
    let state = dir.join(files::STATE);
    process::spawn_detached(&state, "gate", &gate, &Default::default())
        .map_err(io("starting the gate"))?;
    for r in &inv.replicas {
        wait_http_ok(&r.readiness_url, READY)
            .await
            .map_err(DemoError::NotReady)?;
    }
    wait_http_ok(&format!("http://{}/healthz", ports.gate_admin), READY)
        .await
        .map_err(DemoError::NotReady)?;
    let mut workers = vec![
        exe_str(o),
        "demo".into(),
        "workers".into(),
        "--target".into(),
        format!("http://{}/config", ports.gate),
        "--count".into(),
        o.workers.to_string(),
        "--metrics-listen".into(),
        ports.workers.to_string(),
        "--attempt-header".into(),
        o.attempt_header.as_str().into(),
    ];
    if o.idempotency_key {
        workers.push("--idempotency-key".into());
    }
    process::spawn_detached(&state, "workers", &workers, &Default::default())
        .map_err(io("starting the workers"))?;
    wait_http_ok(&format!("http://{}/metrics", ports.workers), READY)
        .await
        .map_err(DemoError::NotReady)
}

/// The trigger, a deploy: restart every replica unavailable for `outage` (not listening
/// for half of it, then not ready), and return once all are ready again.
pub async fn trigger(dir: &Path, outage: Duration) -> Result<(), DemoError> {
    let inv = Inventory::load(&dir.join(files::INVENTORY))?;
    let state = inv.state_dir();
    for r in &inv.replicas {
        process::stop(&state, &r.name, inv.stop_grace);
        let mut argv = r.command.clone();
        argv.extend([
            "--startup-delay".into(),
            crate::util::duration::format(outage),
        ]);
        process::spawn_detached(&state, &r.name, &argv, &r.env)
            .map_err(io(format!("restarting {}", r.name)))?;
    }
    for r in &inv.replicas {
        wait_http_ok(&r.readiness_url, outage + READY)
            .await
            .map_err(DemoError::NotReady)?;
    }
    Ok(())
}

/// Stop everything `up` started (workers first, so no retry storm hits a dying service);
/// returns what was running.
pub fn down(dir: &Path) -> Result<Vec<String>, DemoError> {
    let inv = Inventory::load(&dir.join(files::INVENTORY))?;
    let state = inv.state_dir();
    let mut names = vec!["workers".to_string(), "gate".to_string()];
    names.extend(inv.replicas.iter().map(|r| r.name.clone()));
    Ok(names
        .into_iter()
        .filter(|n| process::stop(&state, n, inv.stop_grace))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_follow_the_base_and_files_agree_on_them() {
        let p = Ports::from_base(18080, 2).unwrap();
        assert_eq!(p.gate.port(), 18080);
        assert_eq!(p.gate_admin.port(), 18081);
        assert_eq!(p.workers.port(), 18082);
        assert_eq!(p.replicas[1].port(), 18091);
        assert!(Ports::from_base(65530, 1).is_err());
        let o = UpOptions {
            dir: "d".into(),
            base_port: 18080,
            replicas: 2,
            workers: 160,
            attempt_header: AttemptHeader::None,
            idempotency_key: false,
            exe: "/bin/recover".into(),
        };
        let inv = inventory(&o, &p, Path::new("/x/d"));
        let text = serde_yaml::to_string(&inv).unwrap();
        let back = Inventory::parse("inventory.yaml", &text).unwrap();
        assert_eq!(
            back.replicas[1].readiness_url,
            "http://127.0.0.1:18091/readyz"
        );
        let prom = prometheus_config(&p);
        let doc: serde_yaml::Value = serde_yaml::from_str(&prom).unwrap();
        assert_eq!(
            doc["scrape_configs"][1]["static_configs"][0]["targets"][1],
            "127.0.0.1:18091"
        );
        let serve =
            crate::serve::config::parse(&serve_config(Path::new("/x/d")), "serve.yaml").unwrap();
        assert_eq!(serve.routes[0].target.id(), "local:demo");
    }
}
