//! What a run acts on, as data: a local inventory or a Kubernetes workload, with how to
//! read its metrics. `recover --runbook`, `recover resume` and `recover serve` all name a
//! target with this one type, the journal records it so a resumed run reconnects to the
//! same place, and [`connect`] is the one place that turns it into a platform and a metric
//! source.
//!
//! In YAML and JSON a target reads `{ platform: local, name: demo, inventory: inv.yaml }`
//! or `{ platform: kube, namespace: shop, deployment: config-service }` (or `selector:`
//! instead of `deployment:`, and optionally `context:` and `prometheus:`).

use super::kube::{self, KubeOptions, KubePlatform, Workload};
use super::local::inventory::{Inventory, InventoryError};
use super::local::LocalPlatform;
use super::PlatformFetch;
use super::{Platform, PlatformError};
use crate::metrics::promql::{PromqlError, PromqlSource};
use crate::metrics::scrape::ScrapeSource;
use crate::metrics::source::MetricSource;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long one Prometheus query may take.
pub const PROMETHEUS_TIMEOUT: Duration = Duration::from_secs(5);

/// What to act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "TargetFields", into = "TargetFields")]
pub enum Target {
    /// Local processes described by an inventory file.
    Local {
        /// The inventory's `name`: the target id is `local:<name>`.
        name: String,
        inventory: PathBuf,
    },
    /// Pods on a Kubernetes cluster.
    Kube(KubeTarget),
}

/// A Kubernetes workload and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeTarget {
    pub namespace: String,
    pub workload: Workload,
    /// Kubeconfig context (None: the current context, or the in-cluster account).
    pub context: Option<String>,
    /// Read signals from this Prometheus server instead of scraping pods through the API
    /// server.
    pub prometheus: Option<String>,
}

impl Target {
    /// A local target from its inventory file (read for its name; the path is made
    /// absolute so the journal still finds it from another directory).
    pub fn local(inventory: &Path) -> Result<Target, InventoryError> {
        let inv = Inventory::load(inventory)?;
        let inventory =
            std::fs::canonicalize(inventory).unwrap_or_else(|_| inventory.to_path_buf());
        Ok(Target::Local {
            name: inv.name,
            inventory,
        })
    }

    /// The stable target id, the same string the platform uses for its lock and journal
    /// (`local:demo`, `kube:shop/config-service`).
    pub fn id(&self) -> String {
        match self {
            Target::Local { name, .. } => format!("local:{name}"),
            Target::Kube(k) => kube::target_id(&k.namespace, &k.workload),
        }
    }
}

/// Why a target could not be reached. Nothing was changed on it.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(transparent)]
    Inventory(#[from] InventoryError),
    #[error("{target}: {source}")]
    Platform {
        target: String,
        #[source]
        source: PlatformError,
    },
    #[error("prometheus {url}: {source}")]
    Prometheus {
        url: String,
        #[source]
        source: PromqlError,
    },
    #[error("the target is {expected} but its inventory names it {actual}")]
    Mismatch { expected: String, actual: String },
}

impl ConnectError {
    /// Bad input (a broken inventory, a bad URL) is a usage error; a cluster that cannot
    /// be reached refuses the run.
    pub fn exit(&self) -> crate::exit::Exit {
        use crate::exit::Exit;
        match self {
            ConnectError::Platform { .. } => Exit::Refused,
            _ => Exit::Usage,
        }
    }
}

/// A platform and the metric source that reads it.
pub type Connected = (Arc<dyn Platform>, Arc<dyn MetricSource>);

/// Build the platform a target names and the metric source that reads it.
pub async fn connect(target: &Target) -> Result<Connected, ConnectError> {
    // reqwest clients (the local platform's, the scrape source's) need a TLS provider.
    crate::util::http::ensure_tls_provider();
    let platform: Arc<dyn Platform> = match target {
        Target::Local { inventory, .. } => Arc::new(LocalPlatform::from_file(inventory)?),
        Target::Kube(k) => {
            let opts = KubeOptions::new(&k.namespace, k.workload.clone());
            let p = KubePlatform::connect(k.context.as_deref(), opts)
                .await
                .map_err(|source| ConnectError::Platform {
                    target: target.id(),
                    source,
                })?;
            Arc::new(p)
        }
    };
    // Locks, journals and serve's budgets are kept under the target's id: the platform
    // must agree on it.
    if platform.target_id() != target.id() {
        return Err(ConnectError::Mismatch {
            expected: target.id(),
            actual: platform.target_id(),
        });
    }
    let metrics: Arc<dyn MetricSource> = match target {
        Target::Kube(KubeTarget {
            prometheus: Some(url),
            ..
        }) => Arc::new(
            PromqlSource::new(url, PROMETHEUS_TIMEOUT).map_err(|source| {
                ConnectError::Prometheus {
                    url: url.clone(),
                    source,
                }
            })?,
        ),
        _ => Arc::new(ScrapeSource::new(Arc::new(PlatformFetch {
            platform: platform.clone(),
        }))),
    };
    Ok((platform, metrics))
}

/// The flat form a target takes in YAML and JSON.
#[derive(Serialize, Deserialize)]
#[serde(tag = "platform", rename_all = "snake_case", deny_unknown_fields)]
enum TargetFields {
    Local {
        name: String,
        inventory: PathBuf,
    },
    Kube {
        namespace: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deployment: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        selector: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prometheus: Option<String>,
    },
}

impl TryFrom<TargetFields> for Target {
    type Error = String;

    fn try_from(f: TargetFields) -> Result<Self, String> {
        Ok(match f {
            TargetFields::Local { name, inventory } => Target::Local { name, inventory },
            TargetFields::Kube {
                namespace,
                deployment,
                selector,
                context,
                prometheus,
            } => Target::Kube(KubeTarget {
                namespace,
                workload: match (deployment, selector) {
                    (Some(d), None) => Workload::Deployment(d),
                    (None, Some(s)) => Workload::Selector(s),
                    _ => {
                        return Err(
                            "a kube target needs exactly one of deployment or selector".into()
                        )
                    }
                },
                context,
                prometheus,
            }),
        })
    }
}

impl From<Target> for TargetFields {
    fn from(t: Target) -> Self {
        match t {
            Target::Local { name, inventory } => TargetFields::Local { name, inventory },
            Target::Kube(k) => {
                let (deployment, selector) = match k.workload {
                    Workload::Deployment(d) => (Some(d), None),
                    Workload::Selector(s) => (None, Some(s)),
                };
                TargetFields::Kube {
                    namespace: k.namespace,
                    deployment,
                    selector,
                    context: k.context,
                    prometheus: k.prometheus,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_names_the_target_as_the_platform_does() {
        for (yaml, id) in [
            (
                "{ platform: local, name: demo, inventory: /x/inv.yaml }",
                "local:demo",
            ),
            (
                "{ platform: kube, namespace: shop, deployment: config-service }",
                "kube:shop/config-service",
            ),
            (
                "{ platform: kube, namespace: shop, selector: app=cs, context: kind, prometheus: 'http://p:9090' }",
                "kube:shop/selector:app=cs",
            ),
        ] {
            let t: Target = serde_yaml::from_str(yaml).unwrap();
            assert_eq!(t.id(), id);
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(serde_json::from_str::<Target>(&json).unwrap(), t);
        }
    }

    #[test]
    fn a_kube_target_needs_one_workload() {
        for yaml in [
            "{ platform: kube, namespace: shop }",
            "{ platform: kube, namespace: shop, deployment: a, selector: b }",
        ] {
            let e = serde_yaml::from_str::<Target>(yaml).unwrap_err();
            assert!(
                e.to_string()
                    .contains("exactly one of deployment or selector"),
                "{e}"
            );
        }
        assert!(
            serde_yaml::from_str::<Target>("{ platform: kube, namespace: s, deploy: x }").is_err()
        );
    }
}
