//! Helpers shared by the `serve_*` tests: a `recover serve` process started and ready, and
//! JSON and text calls over the tests' loopback HTTP client.

use recover::util::child::{spawn_guarded, ChildGuard, GuardOptions};
use serde_json::Value;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

pub use super::loopback_http::Http;

/// How a test's `serve.yaml` authenticates senders.
pub enum Auth<'a> {
    /// A bearer token, written to `DIR/token`.
    Bearer(&'a str),
    /// An HMAC secret, written to `DIR/hmac`.
    Hmac(&'a str),
}

/// Write `DIR/serve.yaml` (and its secret) with one route for `ConfigServiceStuck` to an
/// inventory that does not exist: detection cannot run there, so nothing is ever acted
/// on. `extra` is further top-level YAML (`max_body_bytes: 4096`), or empty.
pub fn config_acting_on_nothing(dir: &Path, auth: Auth<'_>, extra: &str) -> PathBuf {
    let (file, secret, key) = match auth {
        Auth::Bearer(t) => ("token", t, "bearer_token"),
        Auth::Hmac(s) => ("hmac", s, "hmac_secret"),
    };
    std::fs::write(dir.join(file), secret).unwrap();
    let cfg = dir.join("serve.yaml");
    std::fs::write(
        &cfg,
        format!(
            r#"apiVersion: recover/v1
kind: ServeConfig
auth:
  {key}: {{ file: {d}/{file} }}
{extra}
routes:
  - name: demo
    match: {{ alertname: ConfigServiceStuck }}
    runbook: stuck-overload
    target: {{ platform: local, name: demo, inventory: {d}/no-such-inventory.yaml }}
"#,
            d = dir.display()
        ),
    )
    .unwrap();
    cfg
}

/// A `recover serve` process on a free loopback port, stopped when dropped.
pub struct Serve {
    _guard: ChildGuard,
    pub pid: u32,
    pub addr: SocketAddr,
    /// `http://ADDR`, for the receiver's URLs.
    pub base: String,
}

/// Start `recover serve --config cfg` with its log in `log` (discarded when None) and
/// wait until `/healthz` answers.
pub async fn start(cfg: &Path, log: Option<&Path>) -> Serve {
    start_with(cfg, log, |_| {}).await
}

/// [`start`], with further flags or environment set by `more` on the command.
pub async fn start_with(cfg: &Path, log: Option<&Path>, more: impl FnOnce(&mut Command)) -> Serve {
    let addr = crate::support::ports::loopback_addr();
    let mut cmd = super::bin();
    cmd.args(["serve", "--listen", &addr.to_string(), "--config"])
        .arg(cfg)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(match log {
            Some(p) => Stdio::from(std::fs::File::create(p).unwrap()),
            None => Stdio::null(),
        });
    more(&mut cmd);
    let guard = spawn_guarded("serve", cmd, GuardOptions::default()).unwrap();
    let pid = guard.pid().expect("serve's pid");
    let base = format!("http://{addr}");
    if let Err(e) =
        recover::util::net::wait_http_ok(&format!("{base}/healthz"), Duration::from_secs(20)).await
    {
        let said = log.map(std::fs::read_to_string).transpose().ok().flatten();
        panic!(
            "recover serve did not come up: {e}\n{}",
            said.unwrap_or_default()
        );
    }
    Serve {
        _guard: guard,
        pid,
        addr,
        base,
    }
}

/// Every sample line must be on the `/metrics` page; the whole page is shown when one is
/// missing, since the neighbouring series usually say why.
pub fn assert_exposes(metrics: &str, samples: &[&str]) {
    for sample in samples {
        assert!(metrics.contains(sample), "no `{sample}` in:\n{metrics}");
    }
}

impl Http {
    /// POST and parse the JSON reply (Null if it is not JSON).
    pub async fn post_json(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: impl AsRef<[u8]>,
    ) -> (u16, Value) {
        let r = self.send("POST", url, headers, body).await.unwrap();
        (r.status, r.json())
    }

    pub async fn get_json(&self, url: &str) -> Value {
        let text = self.send("GET", url, &[], "").await.unwrap().body;
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {url}: {e}: {text}"))
    }

    pub async fn get_text(&self, url: &str) -> String {
        self.send("GET", url, &[], "").await.unwrap().body
    }
}
