//! What the platform acts on and how its pods are found: a Deployment by name (its pods by
//! the Deployment's own selector, so a wait does not list every pod in the namespace), or
//! any pods by label selector (a StatefulSet's included). The owner is read once, for the
//! label selector and for the UID every Event must carry.

use super::call::{self, READ};
use super::decide::{Owner, PodView};
use super::events::Involved;
use super::rbac;
use crate::platform::PlatformError;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ListParams};

/// What to act on, in one namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Workload {
    /// A Deployment by name.
    Deployment(String),
    /// Pods matching a label selector (`app=config-service`); a StatefulSet's pods this way.
    Selector(String),
}

/// A workload, resolved.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The label selector its pods are listed with.
    pub selector: String,
    /// Pods must also have this owner (a Deployment's selector may match other pods).
    pub owner: Option<Owner>,
    /// What Events are recorded on, if it could be found.
    pub involved: Option<Involved>,
}

/// A label selector as the `labelSelector` query parameter spells it. Pure.
pub fn selector_string(s: &LabelSelector) -> String {
    let mut parts: Vec<String> = s
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in s.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            _ => format!("!{}", e.key),
        });
    }
    parts.join(",")
}

pub async fn resolve(
    client: &kube::Client,
    namespace: &str,
    workload: &Workload,
) -> Result<Resolved, PlatformError> {
    match workload {
        Workload::Deployment(name) => {
            let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
            let d = call::call(
                &READ,
                &rbac::DEPLOYMENTS_GET,
                || format!("reading deployment {name}"),
                || api.get(name),
            )
            .await?;
            let selector = d
                .spec
                .as_ref()
                .map(|s| selector_string(&s.selector))
                .filter(|s| !s.is_empty())
                .ok_or_else(|| {
                    PlatformError::Other(format!("deployment {name} has no selector"))
                })?;
            Ok(Resolved {
                selector,
                owner: Some(Owner {
                    kind: "Deployment".into(),
                    name: name.clone(),
                }),
                involved: Some(Involved {
                    kind: "Deployment".into(),
                    name: name.clone(),
                    uid: d.metadata.uid.unwrap_or_default(),
                }),
            })
        }
        Workload::Selector(s) => Ok(Resolved {
            selector: s.clone(),
            owner: None,
            involved: None,
        }),
    }
}

impl Resolved {
    /// The workload's pods now (every phase), sorted by name.
    pub async fn pods(&self, pods: &Api<Pod>) -> Result<Vec<PodView>, PlatformError> {
        let lp = ListParams::default().labels(&self.selector);
        let list = call::call(
            &READ,
            &rbac::PODS_LIST,
            || format!("listing pods {}", self.selector),
            || pods.list(&lp),
        )
        .await?;
        let mut views: Vec<PodView> = list
            .items
            .iter()
            .map(PodView::of)
            .filter(|p| self.owner.is_none() || p.owner == self.owner)
            .collect();
        views.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(views)
    }
}

/// The object Events go on for pods found by selector: their controller (a Deployment
/// through its ReplicaSet, or a StatefulSet), with its UID.
pub async fn involved_of(
    client: &kube::Client,
    namespace: &str,
    owner: &Owner,
) -> Result<Involved, PlatformError> {
    let uid = match owner.kind.as_str() {
        "StatefulSet" => {
            let api: Api<StatefulSet> = Api::namespaced(client.clone(), namespace);
            call::call(
                &READ,
                &rbac::STATEFULSETS_GET,
                || format!("reading statefulset {}", owner.name),
                || api.get(&owner.name),
            )
            .await?
            .metadata
            .uid
        }
        _ => {
            let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
            call::call(
                &READ,
                &rbac::DEPLOYMENTS_GET,
                || format!("reading deployment {}", owner.name),
                || api.get(&owner.name),
            )
            .await?
            .metadata
            .uid
        }
    };
    Ok(Involved {
        kind: owner.kind.clone(),
        name: owner.name.clone(),
        uid: uid.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_read_as_the_query_parameter() {
        let s: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "canary", "operator": "DoesNotExist"}
            ]
        }))
        .unwrap();
        assert_eq!(selector_string(&s), "app=web,tier in (a,b),!canary");
    }
}
