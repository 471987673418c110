//! One recovery per target at a time, across machines: a coordination.k8s.io Lease per
//! target, renewed while the run lives, taken over only once it has expired (a crashed
//! controller's lease expires on its own). The decision is [`super::rollout::lease_decision`];
//! this module only reads and writes the Lease, with optimistic concurrency (a 409 on a
//! racing write means someone else won).

use super::api::{call_error, is_conflict, is_not_found};
use super::rbac;
use super::rollout::{lease_decision, LeaseDecision, LeaseView};
use crate::platform::{LockGuard, LockHolder, PlatformError};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// Annotation holding the run id of the lease holder.
pub const RUN_ID_ANNOTATION: &str = "recover.dev/run-id";

pub fn view(lease: &Lease) -> LeaseView {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaseView {
        holder_identity: spec.holder_identity,
        run_id: lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(RUN_ID_ANNOTATION).cloned()),
        renew_time: spec.renew_time.map(|t| SystemTime::from(t.0)),
        duration: Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64),
    }
}

fn now_micro() -> MicroTime {
    MicroTime(Timestamp::now())
}

/// The Lease's name for a target: a DNS label derived from the target's name.
pub fn lease_name(target: &str) -> String {
    let mut s: String = target
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    s = format!("recover-{}", s.trim_matches('-'));
    s.truncate(63);
    s.trim_end_matches('-').to_string()
}

/// Take the lease or fail with [`PlatformError::LockHeld`].
pub async fn acquire(
    leases: &Api<Lease>,
    name: &str,
    target_id: &str,
    holder: &LockHolder,
    duration: Duration,
) -> Result<(), PlatformError> {
    let secs = duration.as_secs().max(1) as i32;
    let mut tries = 0;
    loop {
        let existing = match leases.get_opt(name).await {
            Ok(l) => l,
            Err(e) => {
                return Err(call_error(
                    &rbac::LEASES_GET,
                    format!("reading lease {name}"),
                    e,
                ))
            }
        };
        let decision = lease_decision(
            existing.as_ref().map(view).as_ref(),
            &holder.identity,
            &holder.run_id,
            SystemTime::now(),
        );
        let pp = PostParams::default();
        let (written, perm, doing) = match (decision, existing) {
            (
                LeaseDecision::Held {
                    holder: h, run_id, ..
                },
                _,
            ) => {
                return Err(PlatformError::LockHeld {
                    target: target_id.to_string(),
                    holder: h,
                    run_id,
                })
            }
            (LeaseDecision::Create, _) | (_, None) => {
                let lease = new_lease(name, holder, secs);
                let written = leases.create(&pp, &lease).await;
                (written, &rbac::LEASES_CREATE, "creating")
            }
            (decision, Some(mut lease)) => {
                claim(&mut lease, decision, holder, secs);
                let written = leases.replace(name, &pp, &lease).await;
                (written, &rbac::LEASES_UPDATE, "updating")
            }
        };
        match written {
            Ok(_) => return Ok(()),
            // Lost a race: someone created or updated it between our read and our write.
            // Read again and decide again (it may be held now), a few times at most.
            Err(e) if is_conflict(&e) && tries < 5 => tries += 1,
            Err(e) => return Err(call_error(perm, format!("{doing} lease {name}"), e)),
        }
    }
}

/// A Lease held by `holder` from now, for a target that has none.
fn new_lease(name: &str, holder: &LockHolder, secs: i32) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            annotations: Some(BTreeMap::from([(
                RUN_ID_ANNOTATION.to_string(),
                holder.run_id.clone(),
            )])),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.identity.clone()),
            lease_duration_seconds: Some(secs),
            acquire_time: Some(now_micro()),
            renew_time: Some(now_micro()),
            lease_transitions: Some(0),
            ..Default::default()
        }),
    }
}

/// The existing Lease renewed by `holder`, or taken over (a new transition) when the
/// decision says the previous holder's time ran out.
fn claim(lease: &mut Lease, decision: LeaseDecision, holder: &LockHolder, secs: i32) {
    let spec = lease.spec.get_or_insert_with(Default::default);
    if decision == LeaseDecision::TakeOver {
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        spec.acquire_time = Some(now_micro());
    }
    spec.holder_identity = Some(holder.identity.clone());
    spec.lease_duration_seconds = Some(secs);
    spec.renew_time = Some(now_micro());
    lease
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(RUN_ID_ANNOTATION.to_string(), holder.run_id.clone());
}

/// Renew once; `Ok(false)` when the lease is no longer ours.
pub async fn renew(
    leases: &Api<Lease>,
    name: &str,
    holder: &LockHolder,
) -> Result<bool, PlatformError> {
    let mut lease = leases
        .get(name)
        .await
        .map_err(|e| call_error(&rbac::LEASES_GET, format!("reading lease {name}"), e))?;
    let v = view(&lease);
    if v.holder_identity.as_deref() != Some(holder.identity.as_str())
        || v.run_id.as_deref() != Some(holder.run_id.as_str())
    {
        return Ok(false);
    }
    lease.spec.get_or_insert_with(Default::default).renew_time = Some(now_micro());
    match leases.replace(name, &PostParams::default(), &lease).await {
        Ok(_) => Ok(true),
        Err(e) if is_conflict(&e) => Ok(true), // a concurrent write; the next tick retries
        Err(e) => Err(call_error(
            &rbac::LEASES_UPDATE,
            format!("renewing lease {name}"),
            e,
        )),
    }
}

/// A held Lease, renewed in the background every third of its duration.
pub struct LeaseGuard {
    leases: Api<Lease>,
    name: String,
    holder: LockHolder,
    stop: CancellationToken,
}

impl LeaseGuard {
    pub fn start(leases: Api<Lease>, name: String, holder: LockHolder, duration: Duration) -> Self {
        let stop = CancellationToken::new();
        let (l, n, h, s) = (leases.clone(), name.clone(), holder.clone(), stop.clone());
        tokio::spawn(async move {
            let every = (duration / 3).max(Duration::from_millis(200));
            loop {
                tokio::select! {
                    _ = s.cancelled() => return,
                    _ = tokio::time::sleep(every) => {}
                }
                match renew(&l, &n, &h).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::error!(lease = %n, "lost the lease to another holder; stop this run");
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(lease = %n, error = %e, "renewing the lease failed; retrying")
                    }
                }
            }
        });
        LeaseGuard {
            leases,
            name,
            holder,
            stop,
        }
    }
}

#[async_trait::async_trait]
impl LockGuard for LeaseGuard {
    async fn release(self: Box<Self>) -> Result<(), PlatformError> {
        self.stop.cancel();
        let name = &self.name;
        let mut lease = match self.leases.get(name).await {
            Ok(l) => l,
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => {
                return Err(call_error(
                    &rbac::LEASES_GET,
                    format!("reading lease {name}"),
                    e,
                ))
            }
        };
        let v = view(&lease);
        if v.holder_identity.as_deref() != Some(self.holder.identity.as_str()) {
            return Ok(()); // not ours any more: nothing to release
        }
        let spec = lease.spec.get_or_insert_with(Default::default);
        spec.holder_identity = None;
        spec.renew_time = None;
        self.leases
            .replace(name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
            .map_err(|e| call_error(&rbac::LEASES_UPDATE, format!("releasing lease {name}"), e))
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        // Dropped without release (a crash path): stop renewing so the lease expires.
        self.stop.cancel();
    }
}
