//! A real Prometheus (the Debian package `prometheus`) on loopback for the tests: started
//! on a free port with its own storage in a temporary directory, either scraping given
//! targets or serving history backfilled with `promtool tsdb create-blocks-from
//! openmetrics`, and `promtool` / `amtool` run as the user would run them.

use recover::util::child::{spawn_guarded, ChildGuard, GuardOptions};
use recover::util::net::wait_http_ok;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Panic with the way to install `tool` when it is missing.
pub fn require(tool: &str, package: &str) {
    if Command::new(tool).arg("--version").output().is_err() {
        panic!(
            "`{tool}` is not installed; run scripts/test.sh (it installs the Debian package \
             `{package}`), or `apt-get install {package}`"
        );
    }
}

/// Run `tool args...` and return its output, panicking if it cannot start.
pub fn run(tool: &str, args: &[&str]) -> Output {
    Command::new(tool)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// Run `tool args...` with `stdin` piped in.
pub fn run_with_stdin(tool: &str, args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(tool)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Both output streams, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A running Prometheus; stopped (and its storage removed) when dropped.
pub struct Prometheus {
    pub base: String,
    _guard: ChildGuard,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Start with `config` (prometheus.yml text), storing in a temporary directory.
    pub async fn start(config: &str) -> Prometheus {
        Prometheus::start_in(tempfile::tempdir().unwrap(), config, None).await
    }

    /// Start with `config` in `dir` (kept until the server stops), on `storage` if given
    /// (a directory that already holds blocks).
    async fn start_in(dir: tempfile::TempDir, config: &str, storage: Option<&Path>) -> Prometheus {
        require("prometheus", "prometheus");
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).unwrap();
        let data: PathBuf = storage
            .map(Path::to_path_buf)
            .unwrap_or_else(|| dir.path().join("data"));
        let web = crate::support::ports::loopback_addr();
        let mut cmd = Command::new("prometheus");
        cmd.arg(format!("--config.file={}", config_path.display()))
            .arg(format!("--web.listen-address={web}"))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let guard = spawn_guarded("prometheus", cmd, GuardOptions::default()).unwrap();
        let base = format!("http://{web}");
        wait_http_ok(&format!("{base}/-/ready"), Duration::from_secs(30))
            .await
            .unwrap();
        Prometheus {
            base,
            _guard: guard,
            _dir: dir,
        }
    }

    /// Backfill `openmetrics` (an OpenMetrics exposition with timestamps) into fresh
    /// blocks with promtool, then start Prometheus on them with nothing to scrape.
    pub async fn backfilled(openmetrics: &str) -> Prometheus {
        require("promtool", "prometheus");
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("history.om");
        std::fs::write(&input, openmetrics).unwrap();
        let blocks = dir.path().join("data");
        std::fs::create_dir_all(&blocks).unwrap();
        let out = run(
            "promtool",
            &[
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                input.to_str().unwrap(),
                blocks.to_str().unwrap(),
            ],
        );
        assert!(out.status.success(), "promtool backfill: {}", text(&out));
        Prometheus::start_in(dir, "global: {}\nscrape_configs: []\n", Some(&blocks)).await
    }
}
