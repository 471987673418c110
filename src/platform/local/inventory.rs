//! The local inventory: what runs where on a plain host. The rehearsal writes one; a
//! user can write one for services started by hand. Relative paths (state dir, token
//! file) are relative to the inventory file, so it can be moved with its directory.

use crate::util::yaml::{self, Diagnostic, Seg};
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
    /// The gates in front of the replicas (`gate:` one, or `gates:` a list). The limit the
    /// engine sets is the total: each gate gets its share.
    #[serde(alias = "gate", deserialize_with = "one_or_many")]
    pub gates: Vec<GateSpec>,
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
    /// File holding the bearer token the admin endpoints require, if they require one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_token_file: Option<PathBuf>,
    pub metrics_url: String,
    pub readiness_url: String,
    /// A replica already running that `recover` did not start: `{pid: N}` or
    /// `{port: P}`. The platform adopts it (records its pid) and can then restart it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopt: Option<Adopt>,
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

/// `gate: {...}` or `gates: [{...}, ...]`, with the inner fields' errors kept.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<GateSpec>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Vec<GateSpec>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a gate (admin_url, token_file) or a list of gates")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            GateSpec::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                .map(|g| vec![g])
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            Vec::<GateSpec>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
        }
    }
    d.deserialize_any(V)
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
    #[error(transparent)]
    Invalid(#[from] Diagnostic),
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
        for g in &mut inv.gates {
            g.token_file = resolve(&g.token_file);
        }
        for r in &mut inv.replicas {
            r.admin_token_file = r.admin_token_file.as_deref().map(resolve);
        }
        Ok(inv)
    }

    pub fn parse(file: &str, text: &str) -> Result<Inventory, InventoryError> {
        let bad = |path: Vec<Seg>, message: String| {
            InventoryError::Invalid(Diagnostic::at(file, text, &path, message))
        };
        let inv: Inventory = yaml::parse(file, text)?;
        let key = |k: &str| Seg::Key(k.to_string());
        if inv.gates.is_empty() {
            return Err(bad(
                vec![key("gates")],
                "at least one gate is needed".into(),
            ));
        }
        if inv.replicas.is_empty() {
            return Err(bad(
                vec![key("replicas")],
                "at least one replica is needed".into(),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, r) in inv.replicas.iter().enumerate() {
            let at = |f: &str| vec![key("replicas"), Seg::Index(i), key(f)];
            if r.command.is_empty() {
                return Err(bad(
                    at("command"),
                    "the command needs at least the program".into(),
                ));
            }
            if !seen.insert(r.name.as_str()) {
                return Err(bad(
                    at("name"),
                    format!("replica name {:?} is used twice", r.name),
                ));
            }
            if r.name.is_empty() || r.name.contains('/') {
                return Err(bad(
                    at("name"),
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

/// How to find a running replica to adopt; in YAML `{pid: N}` or `{port: P}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "AdoptFields", into = "AdoptFields")]
pub enum Adopt {
    /// The process with this pid.
    Pid(u32),
    /// The process listening on this TCP port (any local address).
    Port(u16),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AdoptFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    port: Option<u16>,
}

impl TryFrom<AdoptFields> for Adopt {
    type Error = String;
    fn try_from(f: AdoptFields) -> Result<Self, String> {
        match (f.pid, f.port) {
            (Some(p), None) => Ok(Adopt::Pid(p)),
            (None, Some(p)) => Ok(Adopt::Port(p)),
            _ => Err("adopt needs exactly one of pid or port, like {port: 8091}".into()),
        }
    }
}

impl From<Adopt> for AdoptFields {
    fn from(a: Adopt) -> Self {
        match a {
            Adopt::Pid(p) => AdoptFields {
                pid: Some(p),
                port: None,
            },
            Adopt::Port(p) => AdoptFields {
                pid: None,
                port: Some(p),
            },
        }
    }
}

impl std::fmt::Display for Adopt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Adopt::Pid(p) => write!(f, "pid {p}"),
            Adopt::Port(p) => write!(f, "the process listening on port {p}"),
        }
    }
}
