//! Pods as the API server treats them: eviction through PodDisruptionBudgets, graceful
//! termination, and the terminating state shown in every read.

use super::{status, status_with, Shared, Terminating, DEPLOY, NS};
use axum::body::Body as AxumBody;
use axum::response::Response;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams};
use std::collections::BTreeMap;
use std::time::Instant;

pub fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub fn phase(p: &Pod) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Pending".into())
}

fn labels_match(selector: &BTreeMap<String, String>, p: &Pod) -> bool {
    let labels = p.metadata.labels.clone().unwrap_or_default();
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn name_of(path: &str, back: usize) -> String {
    let parts: Vec<&str> = path.split('/').collect();
    parts[parts.len() - back].to_string()
}

impl Shared {
    pub fn is_terminating(&self, name: &str, uid: &str) -> bool {
        self.terminating
            .lock()
            .unwrap()
            .get(name)
            .is_some_and(|t| t.uid == uid)
    }

    /// Start terminating `p`: gone after the grace period.
    pub fn terminate(&self, p: &Pod) {
        let name = p.metadata.name.clone().unwrap_or_default();
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let mut t = self.terminating.lock().unwrap();
        if t.get(&name).is_some_and(|x| x.uid == uid) {
            return;
        }
        let grace = *self.grace.lock().unwrap();
        t.insert(
            name,
            Terminating {
                uid,
                until: Instant::now() + grace,
                since: k8s_openapi::jiff::Timestamp::now().to_string(),
            },
        );
    }
}

/// `POST pods/NAME/eviction`, as the API server's eviction subresource answers it
/// (pkg/registry/core/pod/storage/eviction.go): a UID precondition that is not the pod's
/// is 409 (the storage's `Precondition failed: UID in precondition`).
pub async fn evict(s: &Shared, path: &str, body: &[u8]) -> Response {
    let name = name_of(path, 2);
    let pods: Api<Pod> = Api::namespaced(s.fake.clone(), NS);
    let Ok(Some(pod)) = pods.get_opt(&name).await else {
        return status(404, "NotFound", &format!("pods \"{name}\" not found"));
    };
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let eviction: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    if let Some(want) = eviction["deleteOptions"]["preconditions"]["uid"].as_str() {
        if want != uid {
            return status(
                409,
                "Conflict",
                &format!("Operation cannot be fulfilled on pods \"{name}\": Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"),
            );
        }
    }
    let accept = |s: &Shared| {
        s.terminate(&pod);
        s.evictions
            .lock()
            .unwrap()
            .push((name.clone(), uid.clone()));
        status(201, "", "")
    };
    // Pods that serve nothing, or are on their way out, ignore budgets.
    let ph = phase(&pod);
    if s.is_terminating(&name, &uid) || ph != "Running" {
        return accept(s);
    }
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(s.fake.clone(), NS);
    let covering: Vec<PodDisruptionBudget> = budgets
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|b| {
            let sel = b
                .spec
                .as_ref()
                .and_then(|sp| sp.selector.as_ref())
                .and_then(|sel| sel.match_labels.clone())
                .unwrap_or_default();
            labels_match(&sel, &pod)
        })
        .collect();
    let budget = match covering.as_slice() {
        [] => return accept(s),
        [one] => one,
        _ => {
            return status(
                500,
                "InternalError",
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            )
        }
    };
    let bname = budget.metadata.name.clone().unwrap_or_default();
    let refuse = |s: &Shared, cause: String, retry: u32| {
        *s.refusals.lock().unwrap() += 1;
        let mut details = serde_json::json!({
            "causes": [{"reason": "DisruptionBudget", "message": cause}]
        });
        if retry > 0 {
            details["retryAfterSeconds"] = retry.into();
        }
        status_with(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
            details,
        )
    };
    let catching_up = *s.catching_up.lock().unwrap();
    if let Some((until, retry)) = catching_up {
        if Instant::now() < until {
            return refuse(
                s,
                format!("The disruption budget {bname} is still being processed by the server."),
                retry,
            );
        }
    }
    let spec = budget.spec.clone().unwrap_or_default();
    let selector = spec
        .selector
        .as_ref()
        .and_then(|sel| sel.match_labels.clone())
        .unwrap_or_default();
    let matching: Vec<Pod> = pods
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| {
            labels_match(&selector, p) && !matches!(phase(p).as_str(), "Failed" | "Succeeded")
        })
        .collect();
    let healthy = matching
        .iter()
        .filter(|p| {
            phase(p) == "Running"
                && is_ready(p)
                && !s.is_terminating(
                    p.metadata.name.as_deref().unwrap_or_default(),
                    p.metadata.uid.as_deref().unwrap_or_default(),
                )
        })
        .count() as i32;
    let expected = if bname == DEPLOY {
        s.desired as i32
    } else {
        matching.len() as i32
    };
    let int = |v: &k8s_openapi::apimachinery::pkg::util::intstr::IntOrString| match v {
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(i) => *i,
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(_) => 0,
    };
    let desired_healthy = match (&spec.min_available, &spec.max_unavailable) {
        (Some(m), _) => int(m),
        (None, Some(m)) => expected - int(m),
        (None, None) => expected,
    };
    let allowed = if !is_ready(&pod) {
        spec.unhealthy_pod_eviction_policy.as_deref() == Some("AlwaysAllow")
            || healthy >= desired_healthy
    } else {
        healthy - desired_healthy > 0
    };
    if allowed {
        accept(s)
    } else {
        refuse(
            s,
            format!("The disruption budget {bname} needs {desired_healthy} healthy pods and has {healthy} currently"),
            0,
        )
    }
}

/// `DELETE pods/NAME`: terminating for the grace period, then gone.
pub async fn delete(s: &Shared, path: &str) -> Response {
    let name = name_of(path, 1);
    let pods: Api<Pod> = Api::namespaced(s.fake.clone(), NS);
    match pods.get_opt(&name).await {
        Ok(Some(p)) => {
            s.terminate(&p);
            let body = serde_json::to_string(&p).unwrap_or_default();
            Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(AxumBody::from(body))
                .expect("response")
        }
        _ => status(404, "NotFound", &format!("pods \"{name}\" not found")),
    }
}

/// Show terminating pods with their deletionTimestamp in a pod or pod list answer.
pub async fn overlay(s: &Shared, response: Response) -> Response {
    let (parts, body) = response.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Response::from_parts(parts, AxumBody::from(bytes));
    };
    let mark = |p: &mut serde_json::Value| {
        let name = p["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let uid = p["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if let Some(t) = s.terminating.lock().unwrap().get(&name) {
            if t.uid == uid {
                p["metadata"]["deletionTimestamp"] = t.since.clone().into();
                p["metadata"]["deletionGracePeriodSeconds"] = 1.into();
            }
        }
    };
    if let Some(items) = v.get_mut("items").and_then(|i| i.as_array_mut()) {
        items.iter_mut().for_each(mark);
    } else if v.get("kind").and_then(|k| k.as_str()) == Some("Pod") {
        mark(&mut v);
    }
    let body = serde_json::to_vec(&v).unwrap_or_default();
    let mut parts = parts;
    parts.headers.remove(http::header::CONTENT_LENGTH);
    Response::from_parts(parts, AxumBody::from(body))
}
