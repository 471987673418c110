//! Reading what [`super::decide::hazards`] judges: the workload's rollout state, the
//! autoscalers in the namespace and the target's pods. Each a read within its deadline.

use super::call::{self, READ};
use super::decide::hazards::{hazards, Autoscaler, WorkloadState};
use super::{rbac, KubePlatform};
use crate::platform::{Hazard, PlatformError};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::api::{Api, ListParams};

async fn deployment(p: &KubePlatform, name: &str) -> Result<WorkloadState, PlatformError> {
    let api: Api<Deployment> = Api::namespaced(p.client.clone(), &p.opts.namespace);
    let d = call::call(
        &READ,
        &rbac::DEPLOYMENTS_GET,
        || format!("reading deployment {name}"),
        || api.get(name),
    )
    .await?;
    let st = d.status.unwrap_or_default();
    let desired = d.spec.and_then(|s| s.replicas).unwrap_or(1);
    Ok(WorkloadState {
        kind: "Deployment".into(),
        name: name.into(),
        generation: d.metadata.generation.unwrap_or(0),
        observed_generation: st.observed_generation.unwrap_or(0),
        desired,
        current: st.replicas.unwrap_or(0),
        updated: st.updated_replicas.unwrap_or(0),
    })
}

async fn statefulset(p: &KubePlatform, name: &str) -> Result<WorkloadState, PlatformError> {
    let api: Api<StatefulSet> = Api::namespaced(p.client.clone(), &p.opts.namespace);
    let s = call::call(
        &READ,
        &rbac::STATEFULSETS_GET,
        || format!("reading statefulset {name}"),
        || api.get(name),
    )
    .await?;
    let st = s.status.unwrap_or_default();
    Ok(WorkloadState {
        kind: "StatefulSet".into(),
        name: name.into(),
        generation: s.metadata.generation.unwrap_or(0),
        observed_generation: st.observed_generation.unwrap_or(0),
        desired: s.spec.and_then(|s| s.replicas).unwrap_or(1),
        current: st.replicas,
        updated: st.updated_replicas.unwrap_or(st.replicas),
    })
}

/// The autoscalers of the namespace.
async fn autoscalers(p: &KubePlatform) -> Result<Vec<Autoscaler>, PlatformError> {
    let api: Api<HorizontalPodAutoscaler> = Api::namespaced(p.client.clone(), &p.opts.namespace);
    let lp = ListParams::default();
    let list = call::call(
        &READ,
        &rbac::HPAS_LIST,
        || "listing HorizontalPodAutoscalers".to_string(),
        || api.list(&lp),
    )
    .await?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|h| {
            let spec = h.spec?;
            Some(Autoscaler {
                name: h.metadata.name.unwrap_or_default(),
                target_kind: spec.scale_target_ref.kind,
                target_name: spec.scale_target_ref.name,
                min: spec.min_replicas.unwrap_or(1),
                max: spec.max_replicas,
            })
        })
        .collect())
}

/// Everything that makes a restart of the target unsafe now.
pub async fn read(p: &KubePlatform) -> Result<Vec<Hazard>, PlatformError> {
    let pods = p.target_pods().await?;
    let owner = match &p.opts.workload {
        super::Workload::Deployment(n) => Some(("Deployment".to_string(), n.clone())),
        super::Workload::Selector(_) => pods
            .iter()
            .find_map(|x| x.owner.clone())
            .map(|o| (o.kind, o.name)),
    };
    let workload = match owner {
        Some((k, n)) if k == "Deployment" => Some(deployment(p, &n).await?),
        Some((k, n)) if k == "StatefulSet" => Some(statefulset(p, &n).await?),
        _ => None,
    };
    let scalers = autoscalers(p).await?;
    Ok(hazards(
        &p.opts.namespace,
        workload.as_ref(),
        &scalers,
        &pods,
    ))
}
