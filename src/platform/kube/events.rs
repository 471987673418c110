//! Kubernetes Events on the target Deployment or StatefulSet for each step, so `kubectl
//! describe` and every dashboard show what the recovery did and when, next to the
//! rollout's own events. An Event names its object with the object's UID: without it
//! `kubectl describe` does not list it. Events expire after the API server's event TTL (an
//! hour by default), so the run's summary is also kept in the journal mirror.

use crate::platform::StepEvent;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

/// Warning for phases that mean something went wrong, Normal otherwise.
pub fn event_type(phase: &str) -> &'static str {
    let p = phase.to_ascii_lowercase();
    if ["fail", "abort", "relapse", "timeout", "error", "fallback"]
        .iter()
        .any(|w| p.contains(w))
    {
        "Warning"
    } else {
        "Normal"
    }
}

/// `Recover` + the phase in UpperCamelCase (`started` -> `RecoverStarted`): Event reasons
/// are short machine-readable words.
pub fn reason(phase: &str) -> String {
    let camel: String = phase
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut cs = w.chars();
            match cs.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + cs.as_str(),
                None => String::new(),
            }
        })
        .collect();
    format!("Recover{camel}")
}

/// The object Events are recorded on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Involved {
    /// `Deployment` or `StatefulSet`.
    pub kind: String,
    pub name: String,
    pub uid: String,
}

/// The Event object for one step boundary. Named explicitly (not generateName) so the
/// name is unique per object, run and instant.
pub fn build(namespace: &str, on: &Involved, instance: &str, e: &StepEvent) -> Event {
    let now = Timestamp::now();
    let name = format!(
        "{}.recover.{:x}",
        on.name,
        now.as_nanosecond() as u128 ^ (e.step.len() as u128) << 64
    );
    Event {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.to_string()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("apps/v1".to_string()),
            kind: Some(on.kind.clone()),
            name: Some(on.name.clone()),
            namespace: Some(namespace.to_string()),
            uid: Some(on.uid.clone()).filter(|u| !u.is_empty()),
            ..Default::default()
        },
        reason: Some(reason(&e.phase)),
        message: Some(format!(
            "run {} step {} {}: {}",
            e.run_id, e.step, e.phase, e.message
        )),
        type_: Some(event_type(&e.phase).to_string()),
        action: Some(e.step.clone()),
        source: Some(EventSource {
            component: Some("recover".to_string()),
            host: None,
        }),
        reporting_component: Some("recover".to_string()),
        reporting_instance: Some(instance.to_string()),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        ..Default::default()
    }
}
