//! The gate's limit from a ConfigMap (`recover-gate-limit`, key `limit.json`), so the
//! controller sets the limit of every gate replica with one API write and no network path
//! to the gates. Followed with a watch on that one name (a field selector, so the Role can
//! grant list and watch by resourceNames), with a fresh read every minute as a backstop.
//! Every new resourceVersion is pushed with that version, which the gate reports in
//! `/metrics`; an unparsable limit is reported and the last good one stays in force.
//!
//! The key is absent until the controller first sets a limit: the manifests do not carry
//! it, so `kubectl apply -k` never resets a limit set mid-incident. A gate that finds no
//! key and knows no limit passes everything through (nobody set one); a gate that knows a
//! limit (its state file's) keeps it. Every read that finds the version in force confirms
//! it, so the gate can say how old its limit is; a ConfigMap that cannot be read confirms
//! nothing, and a gate that never read one refuses everything.

use super::follow::{follow, Follow, Seen};
use super::rbac::{self, LIMIT_CONFIGMAP, LIMIT_KEY};
use crate::gate::limit::Limit;
use crate::gate::limit_source::{LimitSource, LimitSourceError, Meaning, VersionedLimit};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const NAME: &str = "configmap";

/// What one poll means for the gate.
#[derive(Debug, Clone, PartialEq)]
pub enum LimitUpdate {
    /// Same resourceVersion as last time.
    Unchanged,
    New(VersionedLimit),
    /// This version cannot be used; keep the last good limit.
    Invalid {
        version: String,
        message: String,
    },
    /// The ConfigMap is absent.
    Missing,
    /// The ConfigMap has no limit key: nobody set a limit.
    NoKey {
        version: String,
    },
}

/// Parse and check a `limit.json` value with the gate's own rules (the same as its admin
/// API), naming the field that is wrong.
pub fn parse_limit(text: &str) -> Result<Limit, String> {
    crate::gate::validate::parse_json(text.as_bytes()).map_err(|e| format!("{LIMIT_KEY}: {e}"))
}

/// Decide what a freshly read ConfigMap means, given the version seen last.
pub fn limit_update(last_seen: Option<&str>, cm: Option<&ConfigMap>) -> LimitUpdate {
    let Some(cm) = cm else {
        return LimitUpdate::Missing;
    };
    let version = cm.metadata.resource_version.clone().unwrap_or_default();
    let Some(text) = cm.data.as_ref().and_then(|d| d.get(LIMIT_KEY)) else {
        return LimitUpdate::NoKey { version };
    };
    if last_seen == Some(version.as_str()) {
        return LimitUpdate::Unchanged;
    }
    match parse_limit(text) {
        Ok(limit) => LimitUpdate::New(VersionedLimit::new(limit, version)),
        Err(message) => LimitUpdate::Invalid { version, message },
    }
}

/// A [`LimitSource`] following one ConfigMap.
pub struct ConfigMapLimitSource {
    api: Api<ConfigMap>,
    namespace: String,
    name: String,
    backstop: Duration,
}

/// Read a `NS/NAME` (or bare `NAME`: the client's default namespace) object spec given
/// with `flag`. Pure, so the gate's flags are checked before anything connects.
pub fn parse_spec(flag: &str, spec: &str) -> Result<(Option<String>, String), LimitSourceError> {
    let (ns, name) = match spec.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, spec),
    };
    if name.is_empty() || ns.is_some_and(str::is_empty) {
        return Err(LimitSourceError::Invalid {
            source_name: NAME,
            message: format!("{flag} {spec:?}: expected NAMESPACE/NAME or NAME"),
        });
    }
    Ok((ns.map(str::to_string), name.to_string()))
}

/// The in-cluster or kubeconfig client, with the platform's client settings (no hidden
/// retries), for the gate's sources.
pub async fn gate_client() -> Result<kube::Client, LimitSourceError> {
    let unavailable = |e: String| LimitSourceError::Unavailable {
        source_name: NAME,
        message: format!("no Kubernetes client (in-cluster or kubeconfig): {e}"),
    };
    let config = kube::Config::infer()
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    kube::Client::try_from(super::call::client_config(config))
        .map_err(|e| unavailable(e.to_string()))
}

impl ConfigMapLimitSource {
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        ConfigMapLimitSource {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            name: name.to_string(),
            backstop: Duration::from_secs(60),
        }
    }

    /// From a `NS/NAME` flag value (`--limit-configmap shop/recover-gate-limit`; `NAME`
    /// alone means the client's default namespace), with `client`.
    pub fn from_spec(client: kube::Client, spec: &str) -> Result<Self, LimitSourceError> {
        let (ns, name) = parse_spec("--limit-configmap", spec)?;
        let ns = ns.unwrap_or_else(|| client.default_namespace().to_string());
        Ok(Self::new(client, &ns, &name))
    }

    /// The default name the manifests use.
    pub fn default_name() -> &'static str {
        LIMIT_CONFIGMAP
    }

    /// How long one watch may last before a fresh read (tests shorten it).
    pub fn with_backstop(mut self, backstop: Duration) -> Self {
        self.backstop = backstop;
        self
    }
}

/// What the follower remembers between states: the version last acted on, and whether a
/// missing key was reported already.
#[derive(Default)]
struct Tracking {
    last_seen: Option<String>,
    missing_reported: bool,
}

impl Tracking {
    /// The update to push for this state, if any, logging what the gate should know.
    fn take(&mut self, whom: &str, cm: Option<&ConfigMap>) -> Option<VersionedLimit> {
        match limit_update(self.last_seen.as_deref(), cm) {
            LimitUpdate::Unchanged => self.last_seen.clone().map(|version| VersionedLimit {
                limit: Limit::unlimited(),
                version,
                meaning: Meaning::Confirm,
            }),
            LimitUpdate::New(v) => {
                tracing::info!(configmap = %whom, version = %v.version, "new limit from ConfigMap");
                self.last_seen = Some(v.version.clone());
                self.missing_reported = false;
                Some(v)
            }
            LimitUpdate::Invalid { version, message } => {
                tracing::error!(configmap = %whom, %version, %message, "ignoring an invalid limit; the last good limit stays in force");
                self.last_seen = Some(version);
                None
            }
            LimitUpdate::Missing => {
                if !self.missing_reported {
                    tracing::error!(configmap = %whom, "the limit ConfigMap does not exist (apply manifests/); keeping the current limit, and refusing all traffic if there is none");
                    self.missing_reported = true;
                }
                None
            }
            LimitUpdate::NoKey { version } => {
                if !self.missing_reported {
                    tracing::warn!(configmap = %whom, key = LIMIT_KEY, "no limit in the ConfigMap yet: nobody set one; a gate that knows no limit passes everything through");
                    self.missing_reported = true;
                }
                Some(VersionedLimit {
                    limit: Limit::unlimited(),
                    version,
                    meaning: Meaning::Fallback,
                })
            }
        }
    }
}

#[async_trait::async_trait]
impl LimitSource for ConfigMapLimitSource {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn run(
        self: Box<Self>,
        updates: mpsc::Sender<VersionedLimit>,
        shutdown: CancellationToken,
    ) -> Result<(), LimitSourceError> {
        let whom = format!("{}/{}", self.namespace, self.name);
        let what = Follow {
            labels: String::new(),
            fields: format!("metadata.name={}", self.name),
            backstop: self.backstop,
            list_perm: rbac::GATE_LIMIT_LIST,
            watch_perm: rbac::GATE_LIMIT_WATCH,
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let name = self.name.clone();
        let mut tracking = Tracking::default();
        let follower = follow(
            self.api,
            what,
            shutdown.clone(),
            move |seen: &Seen<ConfigMap>| {
                if let Some(v) = tracking.take(&whom, seen.get(&name)) {
                    let _ = tx.send(v);
                }
            },
        );
        let forward = async {
            while let Some(v) = rx.recv().await {
                if updates.send(v).await.is_err() {
                    return; // the gate is gone
                }
            }
        };
        tokio::select! {
            _ = follower => {}
            _ = forward => {}
        }
        Ok(())
    }
}
