//! Taking one pod down: the Eviction API, which honours PodDisruptionBudgets, retried on
//! our own schedule (or the server's Retry-After) while a budget says "not now", within the
//! caller's deadline; a pod delete only as a fallback the caller opted into.
//!
//! Each attempt is one call with its own deadline and no hidden retries
//! ([`super::call::EVICT`]); every refusal is logged with the budget that made it, and the
//! final error names the budget and the exact fix ([`super::decide::Blocked::explain`]).
//! Behind [`Disruptor`] so tests can count what is asked.

use super::api::{call_error, is_not_found};
use super::call::{self, WRITE};
use super::decide::evict::blocked;
use super::decide::{after_evict, Blocked, EvictNext, EvictOutcome};
use super::rbac;
use crate::platform::PlatformError;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, EvictParams};
use std::time::{Duration, Instant};

/// The two ways to take a pod down.
#[async_trait::async_trait]
pub trait Disruptor: Send + Sync {
    /// One eviction attempt.
    async fn evict(&self, pod: &str) -> Result<EvictOutcome, PlatformError>;
    /// Delete the pod outright (ignores budgets).
    async fn delete(&self, pod: &str) -> Result<(), PlatformError>;
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

#[async_trait::async_trait]
impl Disruptor for ApiDisruptor {
    async fn evict(&self, pod: &str) -> Result<EvictOutcome, PlatformError> {
        let attempt = tokio::time::timeout(
            call::EVICT.timeout,
            self.pods.evict(pod, &EvictParams::default()),
        )
        .await;
        match attempt {
            Err(_) => Err(PlatformError::Timeout {
                what: format!("the API server to answer the eviction of pod {pod}"),
                after: call::EVICT.timeout,
            }),
            Ok(Ok(_)) => Ok(EvictOutcome::Evicted),
            Ok(Err(e)) if is_not_found(&e) => Ok(EvictOutcome::Gone),
            Ok(Err(e)) => match &e {
                kube::Error::Api(s) => match blocked(s) {
                    Some(b) => Ok(EvictOutcome::Blocked(b)),
                    None => Err(call_error(
                        &rbac::PODS_EVICT,
                        format!("evicting pod {pod}"),
                        e,
                    )),
                },
                _ => Err(call_error(
                    &rbac::PODS_EVICT,
                    format!("evicting pod {pod}"),
                    e,
                )),
            },
        }
    }

    async fn delete(&self, pod: &str) -> Result<(), PlatformError> {
        let dp = DeleteParams::default();
        match call::call(
            &WRITE,
            &rbac::PODS_DELETE,
            || format!("deleting pod {pod}"),
            || self.pods.delete(pod, &dp),
        )
        .await
        {
            Ok(_) => Ok(()),
            Err(PlatformError::Call { source, .. })
                if source
                    .downcast_ref::<kube::Error>()
                    .is_some_and(is_not_found) =>
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

/// Evict `pod`, retrying while a budget blocks it, for at most `timeout`; then delete it
/// if `allow_delete`, else fail naming the budget and the fix.
pub async fn take_down(
    d: &dyn Disruptor,
    namespace: &str,
    pod: &str,
    timeout: Duration,
    allow_delete: bool,
    retry_every: Duration,
) -> Result<TakenDown, PlatformError> {
    let started = Instant::now();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let outcome = d.evict(pod).await?;
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
            EvictOutcome::Blocked(b) => b,
        };
        match next {
            EvictNext::Done => return Ok(TakenDown::Evicted { attempts }),
            EvictNext::RetryAfter(wait) => {
                tracing::warn!(
                    pod,
                    attempts,
                    budget = blocked.budget.as_deref().unwrap_or("?"),
                    ?wait,
                    server_wait = ?blocked.retry_after,
                    reason = %blocked.message,
                    "eviction blocked by a disruption budget; retrying"
                );
                tokio::time::sleep(wait).await;
            }
            EvictNext::Delete => {
                tracing::warn!(pod, refusal = %blocked.explain(namespace, pod), "eviction still blocked at the deadline; deleting the pod as allowed");
                d.delete(pod).await?;
                return Ok(TakenDown::Deleted { blocked });
            }
            EvictNext::GiveUp => {
                return Err(PlatformError::Timeout {
                    what: format!(
                        "eviction of pod {pod} ({attempts} attempts): {}",
                        blocked.explain(namespace, pod)
                    ),
                    after: started.elapsed(),
                })
            }
        }
    }
}
