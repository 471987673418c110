//! `recover demo up | trigger | down`: the demo system as an engineer starts it by hand,
//! to try the 3 am path on a laptop: the gate, the config-service replicas and the
//! workers run detached on fixed ports, with a generated gate token, and the directory
//! holds the matching `inventory.yaml` (the replicas are started through the local
//! platform, so a run owns them), a Prometheus scrape config and a `serve.yaml` for the
//! webhook receiver. `trigger` causes the outage (a deploy: every replica restarts and is
//! unavailable for a few seconds); the service then stays stuck. `down` stops it all.
//!
//! Ports, from `base_port` (default 18080): gate +0, gate admin API and metrics +1,
//! workers' metrics +2, and, when started with the generated configs, the webhook
//! receiver +5, Prometheus +6 and Alertmanager +7; replica i at +10+i.

use super::topology::{self, files as layout, Addrs, Topology, WorkersSpec};
use crate::demo::workers::AttemptHeader;
use crate::platform::local::inventory::Inventory;
use crate::platform::local::{process, LocalPlatform};
use crate::util::net::wait_http_ok;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default first port.
pub const BASE_PORT: u16 = 18080;
/// The default directory, relative to where the command runs.
pub const DIR: &str = "recover-demo";
/// How long a component gets to answer after it starts.
const READY: Duration = Duration::from_secs(20);
/// How long a component gets to stop before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(2);

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

/// The files `up` writes besides the system's own ([`topology::files`]), relative to the
/// demo directory.
pub mod files {
    pub use super::layout::*;
    pub const PROMETHEUS: &str = "prometheus.yml";
    pub const SERVE: &str = "serve.yaml";
    pub const SERVE_TOKEN: &str = "serve-token";
    pub const RULES: &str = "recover-rules.yaml";
    pub const ALERTMANAGER: &str = "alertmanager.yml";
}

/// Where the parts of the automated path the demo does not start itself listen, from the
/// base port: `recover serve` +5, Prometheus +6, Alertmanager +7.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AlertPath {
    pub serve: std::net::SocketAddr,
    pub prometheus: std::net::SocketAddr,
    pub alertmanager: std::net::SocketAddr,
}

impl AlertPath {
    pub fn from_base(base: u16) -> AlertPath {
        let at = |o: u16| std::net::SocketAddr::from(([127, 0, 0, 1], base.saturating_add(o)));
        AlertPath {
            serve: at(5),
            prometheus: at(6),
            alertmanager: at(7),
        }
    }
}

/// The shipped alert rules and Alertmanager route, as `deploy/` holds them.
const SHIPPED_RULES: &str = include_str!("../../deploy/prometheus/recover-rules.yaml");
const SHIPPED_ROUTE: &str = include_str!("../../deploy/alertmanager/recover-route.yaml");
/// The URL and token file the shipped route names, replaced by the demo's.
const SHIPPED_ROUTE_URL: &str = "http://recover-serve.recover-demo.svc:9095/alerts";
const SHIPPED_ROUTE_TOKEN: &str = "/etc/alertmanager/secrets/recover-serve-token";
/// The namespace label the demo's series carry: the shipped rules aggregate and alert
/// per namespace, and the dashboard selects by it.
pub const NAMESPACE: &str = "demo";

/// The demo system `o` describes, in `dir`.
pub fn topology(o: &UpOptions, dir: &Path) -> Result<Topology, DemoError> {
    Ok(Topology {
        exe: o.exe.clone(),
        dir: dir.to_path_buf(),
        addrs: Addrs::from_base(o.base_port, o.replicas).map_err(DemoError::Ports)?,
        service: Default::default(),
        workers: WorkersSpec {
            count: o.workers,
            attempt_header: o.attempt_header,
            idempotency_key: o.idempotency_key,
            ..WorkersSpec::default()
        },
        gate_args: vec![],
    })
}

/// A Prometheus config for the demo: every target labelled by role as the built-in
/// runbooks' `promql` expressions expect and with `namespace: demo`, the shipped rules,
/// and alerts to the demo's Alertmanager.
pub fn prometheus_config(p: &Addrs, path: &AlertPath) -> String {
    let replicas: Vec<String> = p.replicas.iter().map(|a| format!("'{a}'")).collect();
    let job = |name: &str, targets: &str, role: &str| {
        format!(
            "  - job_name: {name}\n    static_configs:\n      - targets: [{targets}]\n        labels: {{app_kubernetes_io_name: {role}, namespace: {NAMESPACE}}}\n"
        )
    };
    format!(
        "# The demo system started by `recover demo up`, its alert rules and Alertmanager:\n\
         # prometheus --config.file=prometheus.yml --web.listen-address={prom}\n\
         global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
         rule_files: [{rules}]\n\
         alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['{am}']\n\
         scrape_configs:\n{}{}{}",
        job(
            "recover-demo-gate",
            &format!("'{}'", p.gate_admin),
            "recover-gate"
        ),
        job(
            "recover-demo-service",
            &replicas.join(", "),
            "config-service"
        ),
        job(
            "recover-demo-workers",
            &format!("'{}'", p.workers_metrics),
            "workers"
        ),
        prom = path.prometheus,
        rules = files::RULES,
        am = path.alertmanager,
    )
}

/// The shipped Alertmanager route with its webhook pointed at the demo's serve.
pub fn alertmanager_config(dir: &Path, path: &AlertPath) -> String {
    format!(
        "# prometheus-alertmanager --config.file=alertmanager.yml --web.listen-address={}\n{}",
        path.alertmanager,
        SHIPPED_ROUTE
            .replace(SHIPPED_ROUTE_URL, &format!("http://{}/alerts", path.serve))
            .replace(
                SHIPPED_ROUTE_TOKEN,
                &dir.join(files::SERVE_TOKEN).display().to_string()
            )
    )
}

/// A webhook receiver config routing the shipped `RecoverStuckOverload` to the demo,
/// acting on it; its own check reads the demo's Prometheus, which raised the alert.
pub fn serve_config(dir: &Path, path: &AlertPath) -> String {
    format!(
        "# recover serve --listen {serve} --config {dir}/serve.yaml --mode act\n\
         apiVersion: recover/v1\nkind: ServeConfig\n\
         auth:\n  bearer_token: {{ file: {dir}/{token} }}\n\
         budget: {{ runs_per_window: 2, window: 1h, breaker_after_failures: 2, cooldown: 1m }}\n\
         recheck: {{ after: 10s, max: 5 }}\n\
         state_file: {dir}/state/serve-state.json\n\
         journal_dir: {dir}/recover-runs\n\
         routes:\n  - name: demo-stuck\n    match: {{ alertname: RecoverStuckOverload, namespace: {NAMESPACE} }}\n    runbook: stuck-overload\n    target: {{ platform: local, name: demo, inventory: {dir}/{inv} }}\n    prometheus: http://{prom}\n",
        dir = dir.display(),
        serve = path.serve,
        prom = path.prometheus,
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
    pub addrs: Addrs,
    pub inventory: PathBuf,
}

/// Start the demo system detached; refuses when a port it needs is taken.
pub async fn up(o: &UpOptions) -> Result<Up, DemoError> {
    let addrs = Addrs::from_base(o.base_port, o.replicas).map_err(DemoError::Ports)?;
    for a in addrs.all() {
        if TcpListener::bind(a).is_err() {
            return Err(DemoError::Ports(format!(
                "{a} is in use (a demo already up? `recover demo down --dir {}`; or choose --base-port)",
                o.dir.display()
            )));
        }
    }
    let state = o.dir.join(files::STATE);
    std::fs::create_dir_all(&state).map_err(io(format!("creating {}", state.display())))?;
    let dir = std::fs::canonicalize(&o.dir).map_err(io(format!("{}", o.dir.display())))?;
    let t = topology(o, &dir)?;
    write_secret(&t.token_file())?;
    write_secret(&dir.join(files::SERVE_TOKEN))?;
    write_secret(&t.service_token_file())?;
    let inventory = t
        .write_inventory(
            "demo",
            STOP_GRACE,
            "Written by `recover demo up`: the demo system for `recover --target local`.",
        )
        .map_err(io(format!("writing {}", t.inventory_file().display())))?;
    let write = |name: &str, text: &str| {
        crate::util::atomic_file::write_atomic(&dir.join(name), text.as_bytes())
            .map_err(io(format!("writing {}", dir.join(name).display())))
    };
    let path = AlertPath::from_base(o.base_port);
    write(files::PROMETHEUS, &prometheus_config(&t.addrs, &path))?;
    write(files::RULES, SHIPPED_RULES)?;
    write(files::ALERTMANAGER, &alertmanager_config(&dir, &path))?;
    write(files::SERVE, &serve_config(&dir, &path))?;
    let started = start_all(&t).await;
    if started.is_err() {
        // Half a demo is no use to anyone: stop what did start.
        let _ = down(&dir);
    }
    started?;
    Ok(Up {
        dir,
        addrs: t.addrs,
        inventory,
    })
}

/// Start replicas (through the local platform, so a run owns them), gate and workers
/// detached, each once the one before answers.
async fn start_all(t: &Topology) -> Result<(), DemoError> {
    let platform = LocalPlatform::from_file(&t.inventory_file())?;
    platform.start_missing()?;
    let state = t.state_dir();
    let none = Default::default();
    process::spawn_detached(&state, topology::GATE, &t.gate_command(), &none)
        .map_err(io("starting the gate"))?;
    for r in &platform.inventory().replicas {
        wait_http_ok(&r.readiness_url, READY)
            .await
            .map_err(DemoError::NotReady)?;
    }
    wait_http_ok(&format!("http://{}/healthz", t.addrs.gate_admin), READY)
        .await
        .map_err(DemoError::NotReady)?;
    process::spawn_detached(&state, topology::WORKERS, &t.workers_command(), &none)
        .map_err(io("starting the workers"))?;
    wait_http_ok(&t.workers_metrics_url(), READY)
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
        argv.extend(topology::startup_delay(outage));
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
    let mut names = vec![topology::WORKERS.to_string(), topology::GATE.to_string()];
    names.extend(inv.replicas.iter().map(|r| r.name.clone()));
    Ok(names
        .into_iter()
        .filter(|n| process::stop(&state, n, inv.stop_grace))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::topology::replica_name;
    use super::*;

    #[test]
    fn the_files_up_writes_agree_with_the_topology() {
        let o = UpOptions {
            dir: "d".into(),
            base_port: 18080,
            replicas: 2,
            workers: 160,
            attempt_header: AttemptHeader::None,
            idempotency_key: false,
            exe: "/bin/recover".into(),
        };
        let t = topology(&o, Path::new("/x/d")).unwrap();
        assert_eq!(
            replica_name(1),
            t.inventory("demo", STOP_GRACE).replicas[1].name
        );
        let path = AlertPath::from_base(18080);
        let prom = prometheus_config(&t.addrs, &path);
        let doc: serde_yaml::Value = serde_yaml::from_str(&prom).unwrap();
        assert_eq!(
            doc["scrape_configs"][1]["static_configs"][0]["targets"][1],
            "127.0.0.1:18091"
        );
        assert_eq!(
            doc["scrape_configs"][2]["static_configs"][0]["labels"]["namespace"],
            NAMESPACE
        );
        assert_eq!(doc["rule_files"][0], files::RULES);
        assert_eq!(
            doc["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"][0],
            "127.0.0.1:18087"
        );
        let am = alertmanager_config(Path::new("/x/d"), &path);
        assert!(am.contains("url: http://127.0.0.1:18085/alerts"), "{am}");
        assert!(am.contains("credentials_file: /x/d/serve-token"), "{am}");
        let serve =
            crate::serve::config::parse(&serve_config(Path::new("/x/d"), &path), "serve.yaml")
                .unwrap();
        assert_eq!(serve.routes[0].target.id(), "local:demo");
        assert_eq!(
            serve.routes[0].prometheus.as_deref(),
            Some("http://127.0.0.1:18086")
        );
        let workers = t.workers_command().join(" ");
        assert!(
            workers.contains("--count 160 ") && workers.contains("--attempt-header none"),
            "{workers}"
        );
    }
}
