//! One recovery per target at a time, across machines: a coordination.k8s.io Lease per
//! target, renewed while the run lives, taken over only once it has expired by our own
//! clock (a crashed controller's lease expires on its own). The decision is
//! [`super::decide::lease_decision`]; this module reads and writes the Lease with
//! optimistic concurrency (a 409 on a racing write means someone else won), renews it in
//! the background, and cancels the run's token the moment the lease is lost.

use super::api::{call_error, is_conflict, is_not_found};
use super::call::{self, CallPolicy};
use super::decide::lease::{renew_deadline, renew_every};
use super::decide::{lease_decision, LeaseDecision, LeaseView, Observed};
use super::rbac;
use crate::platform::{LockGuard, LockHolder, PlatformError};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
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
        version: lease.metadata.resource_version.clone().unwrap_or_default(),
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

/// Take the lease or fail with [`PlatformError::LockHeld`]. A lease held by someone else
/// is watched: if it changes (its holder renews it) the lock is held; if it stays
/// unchanged for its whole duration, as our own clock measures it, the holder is gone and
/// the lease is taken over. So this waits at most one lease duration.
pub async fn acquire(
    leases: &Api<Lease>,
    name: &str,
    target_id: &str,
    holder: &LockHolder,
    duration: Duration,
) -> Result<(), PlatformError> {
    let secs = duration.as_secs().max(1) as i32;
    let policy = call::lease_policy(duration);
    let mut observed: Option<Observed> = None;
    let mut conflicts = 0;
    loop {
        let existing = call::call(
            &policy,
            &rbac::LEASES_GET,
            || format!("reading lease {name}"),
            || leases.get_opt(name),
        )
        .await?;
        let now = Instant::now();
        let seen = existing.as_ref().map(view);
        let previous = observed.clone();
        let obs = match &seen {
            Some(v) => Observed::update(observed.take(), v, now),
            None => Observed {
                version: String::new(),
                at: now,
            },
        };
        observed = Some(obs.clone());
        let decision = lease_decision(seen.as_ref(), &holder.identity, &holder.run_id, &obs, now);
        let pp = PostParams {
            field_manager: Some(rbac::FIELD_MANAGER.to_string()),
            ..PostParams::default()
        };
        let (written, perm, doing) = match (decision, existing) {
            (
                LeaseDecision::Held {
                    holder: h,
                    run_id,
                    expires_in,
                },
                _,
            ) => {
                // Renewed since we first looked: its holder is alive.
                if previous.is_some_and(|p| p.version != obs.version) {
                    return Err(PlatformError::LockHeld {
                        target: target_id.to_string(),
                        holder: h,
                        run_id,
                    });
                }
                tokio::time::sleep(
                    expires_in
                        .min(renew_every(duration))
                        .max(Duration::from_millis(50)),
                )
                .await;
                continue;
            }
            (LeaseDecision::Create, _) | (_, None) => {
                let lease = new_lease(name, holder, secs);
                let written = timed(&policy, leases.create(&pp, &lease)).await;
                (written, &rbac::LEASES_CREATE, "creating")
            }
            (decision, Some(mut lease)) => {
                claim(&mut lease, decision, holder, secs);
                let written = timed(&policy, leases.replace(name, &pp, &lease)).await;
                (written, &rbac::LEASES_UPDATE, "updating")
            }
        };
        match written {
            Ok(Ok(_)) => return Ok(()),
            // Lost a race: someone created or updated it between our read and our write.
            // Read again and decide again (it may be held now), a few times at most.
            Ok(Err(e)) if is_conflict(&e) && conflicts < 5 => conflicts += 1,
            Ok(Err(e)) => return Err(call_error(perm, format!("{doing} lease {name}"), e)),
            Err(after) => {
                return Err(PlatformError::Timeout {
                    what: format!("{doing} lease {name}"),
                    after,
                })
            }
        }
    }
}

/// One write under `policy`'s deadline; `Err(deadline)` when it passed.
async fn timed<T>(
    policy: &CallPolicy,
    f: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<Result<T, kube::Error>, Duration> {
    tokio::time::timeout(policy.timeout, f)
        .await
        .map_err(|_| policy.timeout)
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

/// What one renewal found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    Renewed,
    /// Someone else holds it now.
    Lost,
    /// A racing write; the next tick reads again.
    Conflict,
}

/// Renew once, within `policy`'s deadline.
pub async fn renew(
    leases: &Api<Lease>,
    name: &str,
    holder: &LockHolder,
    policy: &CallPolicy,
) -> Result<Renewal, PlatformError> {
    let started = Instant::now();
    let work = async {
        let mut lease = leases
            .get(name)
            .await
            .map_err(|e| call_error(&rbac::LEASES_GET, format!("reading lease {name}"), e))?;
        let v = view(&lease);
        if v.holder_identity.as_deref() != Some(holder.identity.as_str())
            || v.run_id.as_deref() != Some(holder.run_id.as_str())
        {
            return Ok(Renewal::Lost);
        }
        lease.spec.get_or_insert_with(Default::default).renew_time = Some(now_micro());
        let pp = PostParams {
            field_manager: Some(rbac::FIELD_MANAGER.to_string()),
            ..PostParams::default()
        };
        match leases.replace(name, &pp, &lease).await {
            Ok(_) => Ok(Renewal::Renewed),
            Err(e) if is_conflict(&e) => Ok(Renewal::Conflict),
            Err(e) => Err(call_error(
                &rbac::LEASES_UPDATE,
                format!("renewing lease {name}"),
                e,
            )),
        }
    };
    tokio::time::timeout(policy.timeout, work)
        .await
        .unwrap_or_else(|_| {
            Err(PlatformError::Timeout {
                what: format!("renewing lease {name}"),
                after: started.elapsed(),
            })
        })
}

/// A held Lease, renewed in the background every third of its duration. If it is taken
/// by someone else, or cannot be renewed for two thirds of its duration, [`LockGuard::lost`]
/// is cancelled: the run stops as on Ctrl-C.
pub struct LeaseGuard {
    leases: Api<Lease>,
    name: String,
    holder: LockHolder,
    stop: CancellationToken,
    lost: CancellationToken,
}

impl LeaseGuard {
    pub fn start(leases: Api<Lease>, name: String, holder: LockHolder, duration: Duration) -> Self {
        let stop = CancellationToken::new();
        let lost = CancellationToken::new();
        let (l, n, h, s, lo) = (
            leases.clone(),
            name.clone(),
            holder.clone(),
            stop.clone(),
            lost.clone(),
        );
        tokio::spawn(async move {
            let policy = call::lease_policy(duration);
            let mut last_renewed = Instant::now();
            loop {
                tokio::select! {
                    _ = s.cancelled() => return,
                    _ = tokio::time::sleep(renew_every(duration)) => {}
                }
                match renew(&l, &n, &h, &policy).await {
                    Ok(Renewal::Renewed) => last_renewed = Instant::now(),
                    Ok(Renewal::Conflict) => {}
                    Ok(Renewal::Lost) => {
                        tracing::error!(lease = %n, run_id = %h.run_id, "lost the lease to another holder; stopping this run");
                        lo.cancel();
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(lease = %n, error = %e, since_renewed = ?last_renewed.elapsed(), "renewing the lease failed; retrying")
                    }
                }
                if last_renewed.elapsed() >= renew_deadline(duration) {
                    tracing::error!(lease = %n, run_id = %h.run_id, since_renewed = ?last_renewed.elapsed(), "could not renew the lease in time; another controller may take over: stopping this run");
                    lo.cancel();
                    return;
                }
            }
        });
        LeaseGuard {
            leases,
            name,
            holder,
            stop,
            lost,
        }
    }
}

#[async_trait::async_trait]
impl LockGuard for LeaseGuard {
    fn lost(&self) -> CancellationToken {
        self.lost.clone()
    }

    async fn release(self: Box<Self>) -> Result<(), PlatformError> {
        self.stop.cancel();
        let name = &self.name;
        let policy = call::READ;
        let lease = match call::call(
            &policy,
            &rbac::LEASES_GET,
            || format!("reading lease {name}"),
            || self.leases.get_opt(name),
        )
        .await?
        {
            Some(l) => l,
            None => return Ok(()),
        };
        let mut lease = lease;
        let v = view(&lease);
        if v.holder_identity.as_deref() != Some(self.holder.identity.as_str()) {
            return Ok(()); // not ours any more: nothing to release
        }
        let spec = lease.spec.get_or_insert_with(Default::default);
        spec.holder_identity = None;
        spec.renew_time = None;
        let pp = PostParams {
            field_manager: Some(rbac::FIELD_MANAGER.to_string()),
            ..PostParams::default()
        };
        match timed(&policy, self.leases.replace(name, &pp, &lease)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) if is_not_found(&e) => Ok(()),
            Ok(Err(e)) => Err(call_error(
                &rbac::LEASES_UPDATE,
                format!("releasing lease {name}"),
                e,
            )),
            Err(after) => Err(PlatformError::Timeout {
                what: format!("releasing lease {name}"),
                after,
            }),
        }
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        // Dropped without release (a crash path): stop renewing so the lease expires.
        self.stop.cancel();
    }
}
