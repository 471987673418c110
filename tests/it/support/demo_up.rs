//! The whole demo system as a user starts it, `recover demo up` (gate, config service,
//! workers, detached), on ports of its own so it can run beside other tests, and stopped
//! with `recover demo down` when the guard drops, also when the test fails. Used by the
//! tests that run commands as the documentation tells a user to.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

/// Stops the demo system in a directory (`recover demo down --dir`) when dropped.
pub struct Down(pub PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = super::bin()
            .args(["demo", "down", "--dir"])
            .arg(&self.0)
            .output();
    }
}

/// A running demo system whose files are in `<parent>/recover-demo`.
pub struct Demo {
    pub dir: PathBuf,
    base: u16,
    _down: Down,
}

/// A first port with the ports `recover demo up` takes from it (gate +0, admin +1,
/// workers +2, replica +10) reserved for this test process (`util::ports::reserved_block`):
/// free now, and handed to no other test or rehearsal before the demo binds them.
fn free_base() -> u16 {
    recover::util::ports::reserved_block(&[0, 1, 2, 10]).unwrap_or_else(|e| panic!("{e}"))
}

fn ok(out: &Output, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Demo {
    /// `recover demo up` in `parent`, one replica, the default workers.
    pub fn up(parent: &Path) -> Demo {
        let dir = parent.join("recover-demo");
        let base = free_base();
        let down = Down(dir.clone());
        let out = super::bin()
            .args(["demo", "up", "--base-port", &base.to_string(), "--dir"])
            .arg(&dir)
            .output()
            .unwrap();
        ok(&out, "recover demo up");
        Demo {
            dir,
            base,
            _down: down,
        }
    }

    pub fn inventory(&self) -> PathBuf {
        self.dir.join("inventory.yaml")
    }

    /// The `--metrics-url` flags that read this demo's gate, service and workers.
    pub fn metrics_urls(&self) -> Vec<String> {
        [("gate", 1), ("service", 10), ("clients", 2)]
            .iter()
            .flat_map(|(role, d)| {
                [
                    "--metrics-url".to_string(),
                    format!("{role}=http://127.0.0.1:{}/metrics", self.base + d),
                ]
            })
            .collect()
    }

    /// `recover demo trigger`, then wait until `recover detect` with `runbook` says
    /// stuck (exit 10); panics with its last answer after `within`.
    pub fn trigger_until_stuck(&self, runbook: &Path, within: Duration) {
        let out = super::bin()
            .args(["demo", "trigger", "--dir"])
            .arg(&self.dir)
            .output()
            .unwrap();
        ok(&out, "recover demo trigger");
        let start = Instant::now();
        loop {
            let out = super::bin()
                .args(["detect", "--runbook"])
                .arg(runbook)
                .args(self.metrics_urls())
                .output()
                .unwrap();
            if out.status.code() == Some(10) {
                return;
            }
            assert!(
                start.elapsed() < within,
                "not stuck after {within:?}: exit {:?}\n{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stdout)
            );
            std::thread::sleep(Duration::from_secs(2));
        }
    }
}
