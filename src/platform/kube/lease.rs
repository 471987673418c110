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
use super::fence::{Fence, Token};
use super::rbac;
use crate::platform::{LockGuard, LockHolder, PlatformError};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use std::collections::BTreeMap;
use std::sync::Arc;
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

/// A lease just taken: its holding's number (the Lease's `leaseTransitions`, the fencing
/// token) and when the write that took it was sent (its renew deadline runs from there).
#[derive(Debug, Clone, Copy)]
pub struct Acquired {
    pub transitions: i32,
    pub at: tokio::time::Instant,
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
) -> Result<Acquired, PlatformError> {
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
        let at = tokio::time::Instant::now();
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
            Ok(Ok(lease)) => {
                let transitions = lease.spec.and_then(|s| s.lease_transitions).unwrap_or(0);
                return Ok(Acquired { transitions, at });
            }
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

/// A held Lease, renewed in the background every third of its duration. The platform's
/// [`Fence`] holds it until the renew deadline of the last successful renewal, on a timer
/// of its own; taken by someone else or past that deadline, the fence is lost and
/// [`LockGuard::lost`] cancelled: the run stops as on Ctrl-C, and no more writes are made.
pub struct LeaseGuard {
    leases: Api<Lease>,
    name: String,
    holder: LockHolder,
    stop: CancellationToken,
    fence: Arc<Fence>,
}

impl LeaseGuard {
    pub fn start(
        leases: Api<Lease>,
        name: String,
        holder: LockHolder,
        duration: Duration,
        acquired: Acquired,
        fence: Arc<Fence>,
    ) -> Self {
        let stop = CancellationToken::new();
        fence.hold(
            acquired.at + renew_deadline(duration),
            Token {
                lease: name.clone(),
                holder: holder.identity.clone(),
                transitions: acquired.transitions,
            },
        );
        tokio::spawn(renew_loop(
            leases.clone(),
            name.clone(),
            holder.clone(),
            duration,
            stop.clone(),
            fence.clone(),
        ));
        tokio::spawn(watch_deadline(name.clone(), stop.clone(), fence.clone()));
        LeaseGuard {
            leases,
            name,
            holder,
            stop,
            fence,
        }
    }
}

/// Renew every third of the lease; a renewal extends the fence from when it was sent.
async fn renew_loop(
    l: Api<Lease>,
    n: String,
    h: LockHolder,
    duration: Duration,
    stop: CancellationToken,
    fence: Arc<Fence>,
) {
    let policy = call::lease_policy(duration);
    let lost = fence.lost();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = lost.cancelled() => return,
            _ = tokio::time::sleep(renew_every(duration)) => {}
        }
        let sent = tokio::time::Instant::now();
        let renewal = tokio::select! {
            _ = stop.cancelled() => return,
            r = renew(&l, &n, &h, &policy) => r,
        };
        match renewal {
            Ok(Renewal::Renewed) => fence.renewed(sent, renew_deadline(duration)),
            Ok(Renewal::Conflict) => {}
            Ok(Renewal::Lost) => {
                tracing::error!(lease = %n, run_id = %h.run_id, "lost the lease to another holder; stopping this run");
                fence.lose(format!("lease {n} is held by another controller now"));
                return;
            }
            Err(e) => {
                tracing::warn!(lease = %n, error = %e, deadline = ?fence.deadline(), "renewing the lease failed; retrying")
            }
        }
    }
}

/// The renew deadline on a timer of its own: it fires even while a renewal is stuck.
async fn watch_deadline(n: String, stop: CancellationToken, fence: Arc<Fence>) {
    loop {
        let Some(until) = fence.deadline() else {
            return;
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep_until(until) => {}
        }
        if fence.check("holding the lease").is_err() {
            tracing::error!(lease = %n, "could not renew the lease within its renew deadline; another controller may take over: stopping this run");
            return;
        }
    }
}

#[async_trait::async_trait]
impl LockGuard for LeaseGuard {
    fn lost(&self) -> CancellationToken {
        self.fence.lost()
    }

    async fn release(self: Box<Self>) -> Result<(), PlatformError> {
        self.stop.cancel();
        if self.fence.is_lost() {
            // Lost: not ours to write any more; it expires on its own.
            return Ok(());
        }
        self.fence.release();
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
        // Dropped without release (a crash path): stop renewing so the lease expires, and
        // act no more under it.
        self.stop.cancel();
        self.fence
            .lose("the lock was dropped without being released");
    }
}
