//! What the cluster's controllers do, for the fake: the kubelet removing terminated pods
//! once their grace period is over, the config-service ReplicaSet keeping its replica count
//! (terminating and terminal pods do not count), and the EndpointSlice controller
//! publishing the gate Service's ready endpoints.

use super::pods::{is_ready, phase};
use super::{pod, Shared, DEPLOY, GATE, HASH, NS};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the ReplicaSet's new pods do.
#[derive(Debug, Clone, Copy)]
pub enum Replacement {
    /// Pending for a moment, then Running, Ready after this long.
    Ready(Duration),
    /// Never scheduled.
    StaysPending,
    /// Running, never Ready: the container keeps crashing.
    CrashLoop,
}

pub async fn run(s: Arc<Shared>, admin: kube::Client) {
    let raw: Api<Pod> = Api::namespaced(s.fake.clone(), NS);
    let seen: Api<Pod> = Api::namespaced(admin, NS);
    let mut born: HashMap<String, Instant> = HashMap::new();
    let mut ips: HashMap<String, String> = HashMap::new();
    let mut seq = 0u32;
    // A ReplicaSet selects its own pods by their pod-template-hash.
    let lp = ListParams::default().labels(&format!(
        "app.kubernetes.io/name={DEPLOY},pod-template-hash={HASH}"
    ));
    while !s.stop.is_cancelled() {
        reap(&s, &raw).await;
        if let Ok(list) = seen.list(&lp).await {
            let active = list
                .items
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| !matches!(phase(p).as_str(), "Failed" | "Succeeded"))
                .count();
            let mode = *s.replacement.lock().unwrap();
            for _ in active..s.desired {
                seq += 1;
                let mut p = pod(DEPLOY, HASH, &format!("new{seq}"), DEPLOY, false);
                let name = p.metadata.name.clone().unwrap_or_default();
                let st = p.status.get_or_insert_with(Default::default);
                st.phase = Some("Pending".into());
                if let Some(ip) = st.pod_ip.take() {
                    ips.insert(name.clone(), ip);
                }
                born.insert(name, Instant::now());
                let _ = raw.create(&PostParams::default(), &p).await;
            }
            for p in list
                .items
                .iter()
                .filter(|p| !is_ready(p) && p.metadata.deletion_timestamp.is_none())
            {
                let name = p.metadata.name.clone().unwrap_or_default();
                let Some(t) = born.get(&name) else { continue };
                let age = t.elapsed();
                let want = match mode {
                    Replacement::StaysPending => continue,
                    Replacement::CrashLoop => Some(("Running", false, true)),
                    Replacement::Ready(after) if age >= after => Some(("Running", true, false)),
                    Replacement::Ready(after) if age >= after / 2 => {
                        Some(("Running", false, false))
                    }
                    Replacement::Ready(_) => None,
                };
                let Some((ph, ready, crash)) = want else {
                    continue;
                };
                let crashing = p
                    .status
                    .as_ref()
                    .is_some_and(|st| st.container_statuses.is_some());
                if phase(p) == ph && is_ready(p) == ready && crash == crashing {
                    continue;
                }
                let mut p = p.clone();
                p.metadata.deletion_timestamp = None;
                p.metadata.deletion_grace_period_seconds = None;
                let ip = ips.get(&name).cloned();
                let mut status = serde_json::json!({
                    "phase": ph, "podIP": ip,
                    "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]
                });
                if crash {
                    status["containerStatuses"] = serde_json::json!([{"name": "c", "image": "recover:dev",
                        "imageID": "", "ready": false, "restartCount": 5,
                        "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]);
                }
                p.status = serde_json::from_value(status).ok();
                let _ = raw.replace_status(&name, &PostParams::default(), &p).await;
            }
        }
        endpoint_slices(&s, &seen).await;
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

/// Delete the pods whose grace period is over.
async fn reap(s: &Shared, raw: &Api<Pod>) {
    let due: Vec<(String, String)> = s
        .terminating
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, t)| Instant::now() >= t.until)
        .map(|(n, t)| (n.clone(), t.uid.clone()))
        .collect();
    for (name, uid) in due {
        if let Ok(Some(p)) = raw.get_opt(&name).await {
            if p.metadata.uid.as_deref() == Some(uid.as_str()) {
                let _ = raw.delete(&name, &DeleteParams::default()).await;
            }
        }
        s.terminating.lock().unwrap().remove(&name);
    }
}

/// The gate Service's EndpointSlice: one endpoint per gate pod with an IP.
async fn endpoint_slices(s: &Shared, seen: &Api<Pod>) {
    let lp = ListParams::default().labels(&format!("app.kubernetes.io/name={GATE}"));
    let Ok(list) = seen.list(&lp).await else {
        return;
    };
    let mut endpoints: Vec<serde_json::Value> = list
        .items
        .iter()
        .filter(|p| phase(p) == "Running")
        .filter_map(|p| {
            let ip = p.status.as_ref()?.pod_ip.clone()?;
            let terminating = p.metadata.deletion_timestamp.is_some();
            let ready = is_ready(p) && !terminating;
            Some(serde_json::json!({
                "addresses": [ip],
                "conditions": {"ready": ready, "serving": is_ready(p), "terminating": terminating},
                "targetRef": {"kind": "Pod", "name": p.metadata.name, "namespace": NS}
            }))
        })
        .collect();
    endpoints.sort_by_key(|e| {
        e["targetRef"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    });
    let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{GATE}-abcde"), "namespace": NS,
            "labels": {"kubernetes.io/service-name": GATE}},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]
    }))
    .expect("slice json");
    let api: Api<EndpointSlice> = Api::namespaced(s.fake.clone(), NS);
    match api.get_opt(&format!("{GATE}-abcde")).await {
        Ok(Some(cur)) if cur.endpoints == slice.endpoints => {}
        Ok(Some(cur)) => {
            let mut next = slice;
            next.metadata.resource_version = cur.metadata.resource_version;
            let _ = api
                .replace(&format!("{GATE}-abcde"), &PostParams::default(), &next)
                .await;
        }
        Ok(None) => {
            let _ = api.create(&PostParams::default(), &slice).await;
        }
        Err(_) => {}
    }
}
