//! The local inventory: what runs where on a plain host. The rehearsal writes one; a
//! user can write one for services started by hand. Relative paths (state dir, token
//! file) are relative to the inventory file, so it can be moved with its directory.

use crate::runbook::locate::{locate, path_string, Seg};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inventory {
    /// Target name; the target id is `local:<name>`.
    pub name: String,
    /// Where pid files, replica logs and the lock live (default: `.recover-state` next to
    /// the inventory).
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
    pub replicas: Vec<ReplicaSpec>,
    pub gate: GateSpec,
    #[serde(default)]
    pub clients: Vec<ClientSpec>,
    /// How long a replica gets between SIGTERM and SIGKILL.
    #[serde(default = "default_grace", with = "crate::util::duration::serde_human")]
    pub stop_grace: Duration,
}

fn default_grace() -> Duration {
    Duration::from_secs(5)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaSpec {
    pub name: String,
    /// argv: program and arguments (no shell).
    pub command: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Base URL of the admin endpoints (`POST /admin/drain`, `/admin/warm`).
    pub admin_url: String,
    pub metrics_url: String,
    pub readiness_url: String,
    /// A replica already running that `recover` did not start: `{pid: N}` or
    /// `{port: P}`. The platform adopts it (records its pid) and can then restart it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopt: Option<super::adopt::Adopt>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateSpec {
    /// Base URL of the gate's admin listener (`/admin/limit`).
    pub admin_url: String,
    /// File holding the admin API's bearer token.
    pub token_file: PathBuf,
    /// Default: `<admin_url>/metrics`.
    #[serde(default)]
    pub metrics_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSpec {
    pub name: String,
    pub metrics_url: String,
}

/// A problem in an inventory file, at file:line:column with the field path.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{file}:{line}:{column}: {field}: {message}")]
    Invalid {
        file: String,
        line: usize,
        column: usize,
        field: String,
        message: String,
    },
}

impl Inventory {
    /// Read and check an inventory; relative paths are resolved against its directory.
    pub fn load(path: &Path) -> Result<Inventory, InventoryError> {
        let text = std::fs::read_to_string(path).map_err(|source| InventoryError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let file = path.display().to_string();
        let mut inv = Self::parse(&file, &text)?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let base = std::fs::canonicalize(&base).unwrap_or(base);
        let resolve = |p: &Path| {
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                base.join(p)
            }
        };
        inv.state_dir = Some(resolve(
            inv.state_dir
                .as_deref()
                .unwrap_or(Path::new(".recover-state")),
        ));
        inv.gate.token_file = resolve(&inv.gate.token_file);
        Ok(inv)
    }

    pub fn parse(file: &str, text: &str) -> Result<Inventory, InventoryError> {
        let bad = |path: Vec<Seg>, loc: Option<(usize, usize)>, message: String| {
            let (line, column) = loc.unwrap_or_else(|| locate(text, &path));
            InventoryError::Invalid {
                file: file.to_string(),
                line,
                column,
                field: path_string(&path),
                message,
            }
        };
        let inv: Inventory = serde_path_to_error::deserialize(serde_yaml::Deserializer::from_str(
            text,
        ))
        .map_err(|e| {
            let path = crate::runbook::locate::segs_of(e.path());
            let msg = e.inner().to_string();
            let msg = msg
                .rfind(" at line ")
                .map(|i| msg[..i].to_string())
                .unwrap_or(msg);
            bad(
                path,
                e.inner().location().map(|l| (l.line(), l.column())),
                msg,
            )
        })?;
        let key = |k: &str| Seg::Key(k.to_string());
        if inv.replicas.is_empty() {
            return Err(bad(
                vec![key("replicas")],
                None,
                "at least one replica is needed".into(),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, r) in inv.replicas.iter().enumerate() {
            let at = |f: &str| vec![key("replicas"), Seg::Index(i), key(f)];
            if r.command.is_empty() {
                return Err(bad(
                    at("command"),
                    None,
                    "the command needs at least the program".into(),
                ));
            }
            if !seen.insert(r.name.as_str()) {
                return Err(bad(
                    at("name"),
                    None,
                    format!("replica name {:?} is used twice", r.name),
                ));
            }
            if r.name.is_empty() || r.name.contains('/') {
                return Err(bad(
                    at("name"),
                    None,
                    "a replica name must be a non-empty word (it names its pid file)".into(),
                ));
            }
            for (f, u) in [
                ("admin_url", &r.admin_url),
                ("metrics_url", &r.metrics_url),
                ("readiness_url", &r.readiness_url),
            ] {
                if !u.starts_with("http://") && !u.starts_with("https://") {
                    return Err(bad(
                        at(f),
                        None,
                        format!("{u:?} must start with http:// or https://"),
                    ));
                }
            }
        }
        Ok(inv)
    }

    pub fn state_dir(&self) -> PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(".recover-state"))
    }

    pub fn replica(&self, name: &str) -> Option<&ReplicaSpec> {
        self.replicas.iter().find(|r| r.name == name)
    }
}
