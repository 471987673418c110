//! The notify hook: a command serve runs when it refuses an alert, so a refusal reaches a
//! person (a pager, a chat message) and is not only a log line nobody reads at 3 am. The
//! event goes to the command's standard input as one JSON object and, for simple scripts,
//! in `RECOVER_SERVE_*` environment variables. The command runs without a shell, is given
//! `timeout` to finish and is killed after it; it never delays a decision.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `notify_hook:` in `serve.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// The program and its arguments (no shell), e.g. `[/usr/local/bin/page, --team, sre]`.
    pub command: Vec<String>,
    /// How long the command may run before it is killed.
    #[serde(
        default = "default_timeout",
        with = "crate::util::duration::serde_human"
    )]
    pub timeout: Duration,
}

fn default_timeout() -> Duration {
    Duration::from_secs(10)
}

/// What the hook is told.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event<'a> {
    /// `refused`.
    pub event: &'static str,
    /// `breaker`, `standing_limit`, `budget` or `cooldown`.
    pub reason: &'a str,
    pub target: &'a str,
    /// The refusal in words, with what a human should do.
    pub message: &'a str,
    pub alertname: &'a str,
    pub fingerprint: &'a str,
    pub at: &'a str,
}

/// Run the hook for `event` in the background. Failures are logged, never raised: the
/// refusal itself is already decided, logged and counted.
pub fn spawn(cfg: &NotifyConfig, event: &Event<'_>) {
    let Ok(json) = serde_json::to_vec(event) else {
        return;
    };
    let Some((program, args)) = cfg.command.split_first() else {
        return;
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .env("RECOVER_SERVE_EVENT", event.event)
        .env("RECOVER_SERVE_REASON", event.reason)
        .env("RECOVER_SERVE_TARGET", event.target)
        .env("RECOVER_SERVE_MESSAGE", event.message)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let (timeout, program) = (cfg.timeout, program.clone());
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        tracing::error!("notify hook {program}: no runtime to run it on");
        return;
    };
    rt.spawn(async move {
        let run = async {
            let mut child = cmd.spawn()?;
            if let Some(mut stdin) = child.stdin.take() {
                use tokio::io::AsyncWriteExt;
                // A hook that does not read its input is its own business.
                let _ = stdin.write_all(&json).await;
            }
            child.wait_with_output().await
        };
        match tokio::time::timeout(timeout, run).await {
            Ok(Ok(out)) if out.status.success() => {}
            Ok(Ok(out)) => tracing::error!(
                "notify hook {program} exited with {}: {}",
                out.status,
                super::log_lines::clean(String::from_utf8_lossy(&out.stderr).trim())
            ),
            Ok(Err(e)) => tracing::error!("notify hook {program} could not run: {e}"),
            Err(_) => tracing::error!(
                "notify hook {program} still running after {}: killed",
                crate::util::duration::format(timeout)
            ),
        }
    });
}
