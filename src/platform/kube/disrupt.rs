//! Taking one pod down: the Eviction API, which honours PodDisruptionBudgets, retried on
//! our own schedule (or the server's Retry-After) while a budget says "not now", while the
//! API server throttles, or when an attempt got no answer, within the caller's deadline; a
//! pod delete only as a fallback the caller opted into.
//!
//! Each attempt is one call with its own deadline and no hidden retries
//! ([`super::call::EVICT`]), carrying the pod's UID as a precondition: sending it again is
//! safe, and it never takes down a new pod that took the old one's name. Every refusal is
//! logged with the budget that made it, and the final error names the budget and the exact
//! fix ([`super::decide::Blocked::explain`]). Every attempt and every wait is fenced by the
//! lease ([`Fence`]). Behind [`Disruptor`] so tests can count what is asked.

use super::api::{call_error, is_conflict, is_not_found, status_code};
use super::call::{self, WRITE};
use super::decide::evict::blocked;
use super::decide::{after_evict, Blocked, EvictNext, EvictOutcome, PodRef};
use super::fence::Fence;
use super::rbac;
use crate::platform::PlatformError;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use std::time::{Duration, Instant};

/// The two ways to take a pod down.
#[async_trait::async_trait]
pub trait Disruptor: Send + Sync {
    /// One eviction attempt of the pod with this name and UID.
    async fn evict(&self, pod: &PodRef) -> Result<EvictOutcome, PlatformError>;
    /// Delete the pod outright (ignores budgets), only if it still has this UID.
    async fn delete(&self, pod: &PodRef) -> Result<(), PlatformError>;
}

/// The real thing: `POST pods/NAME/eviction` and `DELETE pods/NAME`.
pub struct ApiDisruptor {
    pods: Api<Pod>,
}

impl ApiDisruptor {
    pub fn new(client: kube::Client, namespace: &str) -> Self {
        ApiDisruptor {
            pods: Api::namespaced(client, namespace),
        }
    }
}

/// Delete options that apply only to the pod with this UID (409 for any other).
fn only(pod: &PodRef) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(pod.uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    }
}

#[async_trait::async_trait]
impl Disruptor for ApiDisruptor {
    /// `POST pods/NAME/eviction` with an Eviction whose `deleteOptions` carry the UID
    /// precondition. Built here, not with kube-rs's `evict`: that sends the options as
    /// `delete_options`, a field the API server does not know and ignores, so the
    /// precondition would never reach it.
    async fn evict(&self, pod: &PodRef) -> Result<EvictOutcome, PlatformError> {
        let name = pod.name.as_str();
        let eviction = serde_json::json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": { "name": name },
            "deleteOptions": { "preconditions": { "uid": pod.uid } },
        });
        let attempt = tokio::time::timeout(
            call::EVICT.timeout,
            self.pods.create_subresource::<_, serde_json::Value>(
                "eviction",
                name,
                &PostParams::default(),
                &eviction,
            ),
        )
        .await;
        let e = match attempt {
            Err(_) => {
                return Ok(EvictOutcome::Retry {
                    why: format!("no answer within {:?}", call::EVICT.timeout),
                    after: None,
                })
            }
            Ok(Ok(_)) => return Ok(EvictOutcome::Evicted),
            Ok(Err(e)) => e,
        };
        // 404: gone; 409: the UID precondition failed, a new pod has the name.
        if is_not_found(&e) || is_conflict(&e) {
            return Ok(EvictOutcome::Gone);
        }
        if let kube::Error::Api(s) = &e {
            if let Some(b) = blocked(s) {
                return Ok(EvictOutcome::Blocked(b));
            }
        }
        match status_code(&e) {
            // Not a budget (see `blocked`): throttled, or the server could not answer.
            Some(429 | 503 | 504) | None => Ok(EvictOutcome::Retry {
                why: e.to_string(),
                after: call::retry_after(&e),
            }),
            Some(_) => Err(call_error(
                &rbac::PODS_EVICT,
                format!("evicting pod {name}"),
                e,
            )),
        }
    }

    async fn delete(&self, pod: &PodRef) -> Result<(), PlatformError> {
        let dp = only(pod);
        let name = pod.name.as_str();
        match call::call(
            &WRITE,
            &rbac::PODS_DELETE,
            || format!("deleting pod {name}"),
            || self.pods.delete(name, &dp),
        )
        .await
        {
            Ok(_) => Ok(()),
            Err(PlatformError::Call { source, .. })
                if source
                    .downcast_ref::<kube::Error>()
                    .is_some_and(|e| is_not_found(e) || is_conflict(e)) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// How [`take_down`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakenDown {
    Evicted {
        attempts: u32,
    },
    AlreadyGone,
    /// The budget blocked eviction until the deadline and the pod was deleted instead.
    Deleted {
        blocked: Blocked,
    },
}

/// Evict `pod`, retrying while a budget blocks it, while the API server throttles or
/// does not answer, for at most `timeout` in all; then delete it if `allow_delete` (only
/// for a budget), else fail naming the budget and the fix. Nothing is sent once `fence`
/// says the lease is lost, and a wait ends the moment it is.
#[allow(clippy::too_many_arguments)]
pub async fn take_down(
    d: &dyn Disruptor,
    fence: &Fence,
    namespace: &str,
    pod: &PodRef,
    timeout: Duration,
    allow_delete: bool,
    retry_every: Duration,
) -> Result<TakenDown, PlatformError> {
    let started = Instant::now();
    let name = pod.name.as_str();
    let what = format!("evicting pod {name}");
    let mut attempts = 0;
    loop {
        attempts += 1;
        let outcome = fence.guard(&what, d.evict(pod)).await?;
        let next = after_evict(
            &outcome,
            started.elapsed(),
            timeout,
            allow_delete,
            retry_every,
        );
        let blocked = match outcome {
            EvictOutcome::Gone => return Ok(TakenDown::AlreadyGone),
            EvictOutcome::Evicted => return Ok(TakenDown::Evicted { attempts }),
            EvictOutcome::Retry { why, after } => match next {
                EvictNext::RetryAfter(wait) => {
                    tracing::warn!(pod = name, attempts, ?wait, server_wait = ?after, reason = %why, "eviction not processed; sending it again (safe: it carries the pod's UID)");
                    fence.sleep(&what, wait).await?;
                    continue;
                }
                _ => {
                    return Err(PlatformError::Timeout {
                        what: format!(
                            "eviction of pod {name} ({attempts} attempts; the last: {why})"
                        ),
                        after: started.elapsed(),
                    })
                }
            },
            EvictOutcome::Blocked(b) => b,
        };
        match next {
            EvictNext::Done => return Ok(TakenDown::Evicted { attempts }),
            EvictNext::RetryAfter(wait) => {
                tracing::warn!(
                    pod = name,
                    attempts,
                    budget = blocked.budget.as_deref().unwrap_or("?"),
                    ?wait,
                    server_wait = ?blocked.retry_after,
                    reason = %blocked.message,
                    "eviction blocked by a disruption budget; retrying"
                );
                fence.sleep(&what, wait).await?;
            }
            EvictNext::Delete => {
                tracing::warn!(pod = name, refusal = %blocked.explain(namespace, name), "eviction still blocked at the deadline; deleting the pod as allowed");
                fence
                    .guard(&format!("deleting pod {name}"), d.delete(pod))
                    .await?;
                return Ok(TakenDown::Deleted { blocked });
            }
            EvictNext::GiveUp => {
                return Err(PlatformError::Timeout {
                    what: format!(
                        "eviction of pod {name} ({attempts} attempts): {}",
                        blocked.explain(namespace, name)
                    ),
                    after: started.elapsed(),
                })
            }
        }
    }
}
