//! A small real system for the engine's end-to-end tests: `recover gate` in front of N
//! `recover demo config-service` replicas (started through the local platform, so it owns
//! their pid files), and `recover demo workers` polling through the gate. Everything is a
//! real process on 127.0.0.1 and is stopped when the `System` drops.

use super::fixture_path;
use recover::engine::RunOptions;
use recover::plan::PlanInputs;
use recover::platform::local::LocalPlatform;
use recover::util::child::{spawn_guarded, ChildGuard, GuardOptions};
use recover::util::net::wait_http_ok;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

pub use super::BIN;
pub const TOKEN: &str = "engine-test-token";

pub struct System {
    pub dir: tempfile::TempDir,
    pub inventory: PathBuf,
    pub platform: LocalPlatform,
    pub gate_admin: SocketAddr,
    pub services: Vec<SocketAddr>,
    guards: Vec<ChildGuard>,
}

fn addr() -> SocketAddr {
    crate::support::ports::loopback_addr()
}

impl System {
    /// Start `replicas` config-service replicas (each ready `startup_delay` after start),
    /// the gate and `workers` workers polling every second.
    pub async fn start(replicas: usize, startup_delay: &str, workers: usize) -> System {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("gate.token"), TOKEN).unwrap();
        let services: Vec<SocketAddr> = (0..replicas).map(|_| addr()).collect();
        let (gate_proxy, gate_admin, workers_metrics) = (addr(), addr(), addr());
        let mut inv = String::from("name: e2e\nstate_dir: state\nstop_grace: 3s\nreplicas:\n");
        for (i, a) in services.iter().enumerate() {
            inv.push_str(&format!(
                "  - name: svc-{i}\n    command: [{BIN:?}, demo, config-service, --listen, \"{a}\", --startup-delay, {startup_delay}]\n    admin_url: http://{a}\n    metrics_url: http://{a}/metrics\n    readiness_url: http://{a}/readyz\n"
            ));
        }
        inv.push_str(&format!(
            "gate:\n  admin_url: http://{gate_admin}\n  token_file: gate.token\n"
        ));
        if workers > 0 {
            inv.push_str(&format!(
                "clients:\n  - name: workers\n    metrics_url: http://{workers_metrics}/metrics\n"
            ));
        }
        let inventory = dir.path().join("inventory.yaml");
        std::fs::write(&inventory, inv).unwrap();
        let platform = LocalPlatform::from_file(&inventory).unwrap();
        platform.start_missing().unwrap();
        let mut guards = Vec::new();
        let mut gate = Command::new(BIN);
        gate.args([
            "gate",
            "--listen",
            &gate_proxy.to_string(),
            "--admin-listen",
            &gate_admin.to_string(),
        ]);
        gate.arg("--admin-token-file")
            .arg(dir.path().join("gate.token"));
        for a in &services {
            gate.args(["--upstream", &format!("http://{a}")]);
        }
        gate.stdout(Stdio::null()).stderr(Stdio::null());
        guards.push(spawn_guarded("gate", gate, GuardOptions::default()).unwrap());
        let sys = System {
            dir,
            inventory,
            platform,
            gate_admin,
            services,
            guards,
        };
        for a in &sys.services {
            wait_http_ok(&format!("http://{a}/readyz"), Duration::from_secs(30))
                .await
                .expect("replica ready");
        }
        wait_http_ok(
            &format!("http://{gate_admin}/healthz"),
            Duration::from_secs(20),
        )
        .await
        .expect("gate up");
        let mut sys = sys;
        if workers > 0 {
            let mut w = Command::new(BIN);
            w.args([
                "demo",
                "workers",
                "--target",
                &format!("http://{gate_proxy}"),
                "--count",
                &workers.to_string(),
                "--interval",
                "1s",
                "--metrics-listen",
                &workers_metrics.to_string(),
            ]);
            w.stdout(Stdio::null()).stderr(Stdio::null());
            sys.guards
                .push(spawn_guarded("workers", w, GuardOptions::default()).unwrap());
            wait_http_ok(
                &format!("http://{workers_metrics}/metrics"),
                Duration::from_secs(20),
            )
            .await
            .expect("workers up");
        }
        sys
    }

    pub fn journal_dir(&self) -> PathBuf {
        self.dir.path().join("runs")
    }

    pub fn pids(&self) -> Vec<Option<u32>> {
        (0..self.services.len())
            .map(|i| self.platform.pid(&format!("svc-{i}")))
            .collect()
    }

    /// The gate's limit and version as its admin API reports them.
    pub async fn gate_limit(&self) -> serde_json::Value {
        reqwest::Client::new()
            .get(format!("http://{}/admin/limit", self.gate_admin))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    pub async fn service_metric(&self, i: usize, name: &str) -> f64 {
        let text = reqwest::get(format!("http://{}/metrics", self.services[i]))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .filter(|l| l.starts_with(name) && !l.starts_with('#'))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// What `recover history` prints for this system's journals.
    pub fn history(&self) -> String {
        let out = Command::new(BIN)
            .arg("history")
            .arg("--journal-dir")
            .arg(self.journal_dir())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `recover --runbook FIXTURE --target local --inventory ... <extra>` as a command.
    pub fn run_cmd(&self, runbook: &str, extra: &[&str]) -> Command {
        let assume = [
            "--assume-arrival-rate",
            "40",
            "--assume-capacity-cold",
            "50",
            "--assume-k",
            "2",
        ];
        self.run_cmd_assuming(runbook, &assume, extra)
    }

    /// `run_cmd` with plan inputs of the caller's choosing (`--assume-*` flags).
    pub fn run_cmd_assuming(&self, runbook: &str, assume: &[&str], extra: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args([
            "--runbook",
            &fixture_path(&format!("runbooks/{runbook}")),
            "--target",
            "local",
        ]);
        c.arg("--inventory").arg(&self.inventory);
        c.arg("--journal-dir").arg(self.journal_dir());
        c.args(assume);
        c.args(extra);
        c.stdin(Stdio::null());
        c
    }
}

impl Drop for System {
    fn drop(&mut self) {
        self.platform.stop_all();
    }
}

/// A finished command must have exited 0; what it said is the diagnosis when it did not.
pub fn assert_exit_ok(out: &Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr:\n{}\nstdout:\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Read a journal's lines as JSON values.
pub fn journal_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The only journal file in `dir`, once there is one.
pub fn only_journal(dir: &Path) -> Option<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    (files.len() == 1).then(|| files.remove(0))
}

/// A run's options with its plan inputs given (40 req/s offered, a cold capacity of 50, k
/// 2), so the run needs no detection window, and its journal in `journal_dir`.
pub fn fixed_inputs(journal_dir: &Path) -> RunOptions {
    RunOptions {
        journal_dir: journal_dir.to_path_buf(),
        overrides: PlanInputs {
            arrival_rate: 40.0,
            capacity_cold: 50.0,
            k: 2.0,
            capacity: None,
            demand: None,
        }
        .into(),
        ..RunOptions::default()
    }
}
