//! `serve.yaml`: which alerts map to which runbook and target, how callers authenticate,
//! and the limits that keep automated remediation from becoming a storm. Loaded and
//! validated before the receiver listens, so a typo fails at start-up (file:line:column
//! and field path), not at 3 am when the first alert arrives.

use crate::platform::Target;
use crate::util::yaml::{self, Diagnostic, Seg};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The whole `serve.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    pub kind: String,
    pub auth: AuthConfig,
    #[serde(default)]
    pub budget: BudgetConfig,
    #[serde(default)]
    pub recheck: RecheckConfig,
    /// Largest accepted webhook body; larger ones get 413.
    #[serde(default = "default_max_body")]
    pub max_body_bytes: usize,
    /// Where the breaker and budget survive a restart of the receiver. Without it a
    /// restarted receiver forgets an open breaker, so production configs should set it.
    #[serde(default)]
    pub state_file: Option<PathBuf>,
    /// Or a ConfigMap (`NAMESPACE/NAME`, key `state.json`), so a receiver rescheduled to
    /// another node remembers an open breaker.
    #[serde(default)]
    pub state_configmap: Option<String>,
    /// Where runs write their journals (default: `./journal`).
    #[serde(default)]
    pub journal_dir: Option<PathBuf>,
    /// Where runbooks are looked up by name (besides `runbooks/`).
    #[serde(default)]
    pub runbook_dir: Option<PathBuf>,
    /// A command run on every refused alert (a flood's repeats once a period, as logged).
    #[serde(default)]
    pub notify_hook: Option<super::notify::NotifyConfig>,
    pub routes: Vec<Route>,
}

fn default_max_body() -> usize {
    256 * 1024
}

/// Secrets are read from a file or an environment variable, never written in the YAML.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretRef {
    #[serde(default)]
    pub file: Option<PathBuf>,
    #[serde(default)]
    pub env: Option<String>,
}

/// How callers prove who they are. At least one of `bearer_token` and `hmac_secret`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// `Authorization: Bearer <token>` (Alertmanager `http_config.authorization`).
    #[serde(default)]
    pub bearer_token: Option<SecretRef>,
    /// `X-Recover-Signature: sha256=<hex HMAC-SHA256 of the body>`.
    #[serde(default)]
    pub hmac_secret: Option<SecretRef>,
    /// Token for the admin API (breaker reset). Absent: the admin API is disabled, so the
    /// credential Alertmanager holds can never reset a breaker.
    #[serde(default)]
    pub admin_token: Option<SecretRef>,
}

/// Per-target limits on automated runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetConfig {
    /// At most this many runs per target within `window`.
    pub runs_per_window: u32,
    #[serde(with = "crate::util::duration::serde_human")]
    pub window: Duration,
    /// Open the breaker after this many failed or aborted runs on a target (since the last
    /// reset); only a human reset closes it.
    pub breaker_after_failures: u32,
    /// After a run on a target ends, leave the target alone this long: alerts lag the
    /// recovery, and the system needs time to settle before it is judged again.
    #[serde(with = "crate::util::duration::serde_human")]
    pub cooldown: Duration,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig {
            runs_per_window: 2,
            window: Duration::from_secs(3600),
            breaker_after_failures: 2,
            cooldown: Duration::from_secs(300),
        }
    }
}

/// When a firing alert met a Triggered or Unknown verdict, look again later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecheckConfig {
    #[serde(with = "crate::util::duration::serde_human")]
    pub after: Duration,
    /// Rechecks per alert before waiting for Alertmanager to repeat it.
    pub max: u32,
}

impl Default for RecheckConfig {
    fn default() -> Self {
        RecheckConfig {
            after: Duration::from_secs(60),
            max: 5,
        }
    }
}

/// Alerts whose labels match `match` start `runbook` against `target`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    pub name: String,
    /// Label equality matchers; all must hold. Empty matches nothing (a catch-all
    /// remediation route is a storm waiting to happen).
    #[serde(rename = "match")]
    pub matchers: BTreeMap<String, String>,
    pub runbook: String,
    /// Where the runbook acts.
    pub target: Target,
    /// The Prometheus the alert came from (`http://HOST:9090`). When set, serve's own check
    /// reads the runbook's `promql` signals from its history, which already holds the
    /// window the alert was judged on, instead of observing the target for a fresh one;
    /// the run still reads its target as usual (a kube target's own `prometheus:`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<String>,
}

impl Route {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.matchers.is_empty()
            && self
                .matchers
                .iter()
                .all(|(k, v)| labels.get(k).is_some_and(|l| l == v))
    }
}

impl ServeConfig {
    /// The first route whose matchers all hold.
    pub fn route_for(&self, labels: &BTreeMap<String, String>) -> Option<&Route> {
        self.routes.iter().find(|r| r.matches(labels))
    }
}

/// Why `serve.yaml` was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    /// Where and what, as `file:line:column: field.path: message`.
    #[error(transparent)]
    Invalid(#[from] Diagnostic),
}

/// Read and validate a `serve.yaml`, and load every route's runbook: a route to a runbook
/// that does not exist (or does not validate) is refused at start, not found out when
/// the first alert arrives.
pub fn load(path: &Path) -> Result<ServeConfig, ConfigError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        file: file.clone(),
        source,
    })?;
    let cfg = parse(&text, &file)?;
    check_runbooks(&cfg, &text, &file)?;
    Ok(cfg)
}

/// Find and load each route's runbook the way a run will (`runbook_dir`, `./runbooks`,
/// the built-in ones); the first that fails is an error at its route's `runbook` field.
pub fn check_runbooks(cfg: &ServeConfig, text: &str, file: &str) -> Result<(), ConfigError> {
    let dirs: Vec<PathBuf> = cfg.runbook_dir.iter().cloned().collect();
    for (i, r) in cfg.routes.iter().enumerate() {
        if let Err(e) = crate::runbook::find(&r.runbook, &dirs) {
            let at = [key("routes"), Seg::Index(i), key("runbook")];
            return Err(Diagnostic::at(file, text, &at, e.to_string()).into());
        }
    }
    Ok(())
}

/// Parse and validate `serve.yaml` text; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<ServeConfig, ConfigError> {
    let cfg: ServeConfig = yaml::parse(file, text)?;
    validate(&cfg).map_err(|(path, message)| Diagnostic::at(file, text, &path, message))?;
    Ok(cfg)
}

fn key(k: &str) -> Seg {
    Seg::Key(k.to_string())
}

fn validate(cfg: &ServeConfig) -> Result<(), (Vec<Seg>, String)> {
    let bad = |p: &[&str], m: &str| Err((p.iter().map(|k| key(k)).collect(), m.to_string()));
    if cfg.api_version != "recover/v1" {
        return bad(&["apiVersion"], "expected recover/v1");
    }
    if cfg.kind != "ServeConfig" {
        return bad(&["kind"], "expected ServeConfig");
    }
    if cfg.auth.bearer_token.is_none() && cfg.auth.hmac_secret.is_none() {
        return bad(
            &["auth"],
            "set bearer_token or hmac_secret: an unauthenticated receiver that restarts services is not allowed",
        );
    }
    for (name, s) in [
        ("bearer_token", &cfg.auth.bearer_token),
        ("hmac_secret", &cfg.auth.hmac_secret),
        ("admin_token", &cfg.auth.admin_token),
    ] {
        if let Some(s) = s {
            if s.file.is_some() == s.env.is_some() {
                return bad(&["auth", name], "give exactly one of file or env");
            }
        }
    }
    if cfg.state_file.is_some() && cfg.state_configmap.is_some() {
        return bad(
            &["state_configmap"],
            "give state_file or state_configmap, not both",
        );
    }
    if let Some(spec) = &cfg.state_configmap {
        if spec
            .split_once('/')
            .is_none_or(|(ns, n)| ns.is_empty() || n.is_empty())
        {
            return bad(&["state_configmap"], "expected NAMESPACE/NAME");
        }
    }
    if cfg.budget.runs_per_window == 0 {
        return bad(
            &["budget", "runs_per_window"],
            "must be at least 1 (use --mode observe to never act)",
        );
    }
    if cfg.budget.breaker_after_failures == 0 {
        return bad(&["budget", "breaker_after_failures"], "must be at least 1");
    }
    if cfg.budget.window.is_zero() {
        return bad(&["budget", "window"], "must be longer than zero");
    }
    if cfg.recheck.after.is_zero() {
        return bad(&["recheck", "after"], "must be longer than zero");
    }
    if cfg.max_body_bytes < 1024 {
        return bad(&["max_body_bytes"], "must be at least 1024");
    }
    if let Some(n) = &cfg.notify_hook {
        if n.command.first().is_none_or(|p| p.trim().is_empty()) {
            return bad(
                &["notify_hook", "command"],
                "give the program and its arguments, e.g. [/usr/local/bin/page, --team, sre]",
            );
        }
        if n.timeout.is_zero() {
            return bad(&["notify_hook", "timeout"], "must be longer than zero");
        }
    }
    if cfg.routes.is_empty() {
        return bad(&["routes"], "at least one route is needed");
    }
    let mut names = std::collections::BTreeSet::new();
    for (i, r) in cfg.routes.iter().enumerate() {
        let at = |f: &str, m: &str| Err((vec![key("routes"), Seg::Index(i), key(f)], m.into()));
        if r.matchers.is_empty() {
            return at("match", "needs at least one label matcher");
        }
        if r.runbook.trim().is_empty() {
            return at("runbook", "must not be empty");
        }
        if !names.insert(r.name.as_str()) {
            return at("name", "duplicate route name");
        }
        if let Some(url) = &r.prometheus {
            if let Err(e) = crate::metrics::promql::PromqlSource::new(
                url,
                crate::platform::target::PROMETHEUS_TIMEOUT,
            ) {
                return at("prometheus", &e.to_string());
            }
        }
    }
    Ok(())
}

/// A secret that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("{what}: cannot read {}: {source}; {}", file.display(), crate::util::secret::HOW_TO_CREATE)]
    Read {
        what: String,
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{what}: environment variable {var} is not set")]
    NoEnv { what: String, var: String },
    #[error("{what}: give exactly one of file or env")]
    Ambiguous { what: String },
    #[error(
        "{what}: secret is {len} bytes; use at least {MIN_SECRET_BYTES}; {}",
        crate::util::secret::HOW_TO_CREATE
    )]
    TooShort { what: String, len: usize },
    #[error("{what}: {source}")]
    Weak {
        what: String,
        source: crate::util::secret::WeakToken,
    },
}

/// A shorter secret is refused: it could be guessed.
pub const MIN_SECRET_BYTES: usize = 16;

/// Resolve a secret reference to its value (trailing newline trimmed).
pub fn read_secret(what: &str, s: &SecretRef) -> Result<String, SecretError> {
    let what = what.to_string();
    let value = match (&s.file, &s.env) {
        (Some(f), None) => std::fs::read_to_string(f).map_err(|source| SecretError::Read {
            what: what.clone(),
            file: f.clone(),
            source,
        })?,
        (None, Some(v)) => std::env::var(v).map_err(|_| SecretError::NoEnv {
            what: what.clone(),
            var: v.clone(),
        })?,
        _ => return Err(SecretError::Ambiguous { what }),
    };
    let value = value.trim_end_matches(['\r', '\n']).to_string();
    if let Err(source @ crate::util::secret::WeakToken::WellKnown(_)) =
        crate::util::secret::check(&value, MIN_SECRET_BYTES)
    {
        return Err(SecretError::Weak { what, source });
    }
    if value.len() < MIN_SECRET_BYTES {
        return Err(SecretError::TooShort {
            what,
            len: value.len(),
        });
    }
    Ok(value)
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
