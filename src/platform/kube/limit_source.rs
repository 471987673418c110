//! The gate's limit from a ConfigMap (`recover-gate-limit`, key `limit.json`), so the
//! controller sets the limit of every gate replica with one API write and no network path
//! to the gates. Polled every 250 ms (well inside the 1 s the issue allows; kube-fake-client
//! cannot serve watches, and a poll of one named object is cheap). Every new
//! resourceVersion is pushed with that version, which the gate reports in `/metrics`; an
//! unparsable limit is reported and the last good one stays in force.

use super::rbac::{LIMIT_CONFIGMAP, LIMIT_KEY};
use crate::gate::limit::Limit;
use crate::gate::limit_source::{LimitSource, LimitSourceError, VersionedLimit};
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
    /// The ConfigMap or its key is absent.
    Missing,
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
    if last_seen == Some(version.as_str()) {
        return LimitUpdate::Unchanged;
    }
    let Some(text) = cm.data.as_ref().and_then(|d| d.get(LIMIT_KEY)) else {
        return LimitUpdate::Missing;
    };
    match parse_limit(text) {
        Ok(limit) => LimitUpdate::New(VersionedLimit { limit, version }),
        Err(message) => LimitUpdate::Invalid { version, message },
    }
}

/// A [`LimitSource`] reading one ConfigMap.
pub struct ConfigMapLimitSource {
    api: Api<ConfigMap>,
    namespace: String,
    name: String,
    poll: Duration,
}

/// Read a `NS/NAME` (or bare `NAME`: the client's default namespace) ConfigMap spec.
/// Pure, so the gate's flag is checked before anything connects.
pub fn parse_spec(spec: &str) -> Result<(Option<String>, String), LimitSourceError> {
    let (ns, name) = match spec.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, spec),
    };
    if name.is_empty() || ns.is_some_and(str::is_empty) {
        return Err(LimitSourceError::Invalid {
            source_name: NAME,
            message: format!("--limit-configmap {spec:?}: expected NAMESPACE/NAME or NAME"),
        });
    }
    Ok((ns.map(str::to_string), name.to_string()))
}

impl ConfigMapLimitSource {
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        ConfigMapLimitSource {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            name: name.to_string(),
            poll: Duration::from_millis(250),
        }
    }

    /// From a `NS/NAME` flag value (`--limit-configmap shop/recover-gate-limit`; `NAME`
    /// alone means the client's default namespace), with the in-cluster or kubeconfig
    /// client.
    pub async fn connect(spec: &str) -> Result<Self, LimitSourceError> {
        let (ns, name) = parse_spec(spec)?;
        let client =
            kube::Client::try_default()
                .await
                .map_err(|e| LimitSourceError::Unavailable {
                    source_name: NAME,
                    message: format!("no Kubernetes client (in-cluster or kubeconfig): {e}"),
                })?;
        let ns = ns.unwrap_or_else(|| client.default_namespace().to_string());
        Ok(Self::new(client, &ns, &name))
    }

    /// The default name the manifests use.
    pub fn default_name() -> &'static str {
        LIMIT_CONFIGMAP
    }

    pub fn with_poll_interval(mut self, poll: Duration) -> Self {
        self.poll = poll.min(Duration::from_millis(500));
        self
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
        let mut last_seen: Option<String> = None;
        let mut missing_reported = false;
        loop {
            match self.api.get_opt(&self.name).await {
                Ok(cm) => match limit_update(last_seen.as_deref(), cm.as_ref()) {
                    LimitUpdate::Unchanged => {}
                    LimitUpdate::New(v) => {
                        tracing::info!(configmap = %whom, version = %v.version, "new limit from ConfigMap");
                        last_seen = Some(v.version.clone());
                        missing_reported = false;
                        if updates.send(v).await.is_err() {
                            return Ok(()); // the gate is gone
                        }
                    }
                    LimitUpdate::Invalid { version, message } => {
                        tracing::error!(configmap = %whom, %version, %message, "ignoring an invalid limit; the last good limit stays in force");
                        last_seen = Some(version);
                    }
                    LimitUpdate::Missing => {
                        if !missing_reported {
                            tracing::warn!(configmap = %whom, key = LIMIT_KEY, "no limit in the ConfigMap yet; keeping the current limit");
                            missing_reported = true;
                        }
                    }
                },
                Err(e) => {
                    tracing::warn!(configmap = %whom, error = %e, "reading the limit ConfigMap failed; retrying")
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = tokio::time::sleep(self.poll) => {}
            }
        }
    }
}
