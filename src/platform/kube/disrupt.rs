//! Taking one pod down: the Eviction API, which honours PodDisruptionBudgets, retried while
//! a budget says "not now" (429), and a pod delete only as a fallback the caller opted into.
//!
//! The API calls sit behind [`Disruptor`] because kube-fake-client has no Eviction
//! subresource and no budgets; the retry policy ([`super::rollout::after_evict`]) is pure.

use super::api::{call_error, is_not_found, status_code};
use super::rbac;
use super::rollout::{after_evict, EvictNext, EvictOutcome};
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
        match self.pods.evict(pod, &EvictParams::default()).await {
            Ok(_) => Ok(EvictOutcome::Evicted),
            Err(e) if is_not_found(&e) => Ok(EvictOutcome::Gone),
            Err(e) if status_code(&e) == Some(429) => Ok(EvictOutcome::Blocked(e.to_string())),
            Err(e) => Err(call_error(
                &rbac::PODS_EVICT,
                format!("evicting pod {pod}"),
                e,
            )),
        }
    }

    async fn delete(&self, pod: &str) -> Result<(), PlatformError> {
        match self.pods.delete(pod, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(call_error(
                &rbac::PODS_DELETE,
                format!("deleting pod {pod}"),
                e,
            )),
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
        blocked_by: String,
    },
}

/// Evict `pod`, retrying while a budget blocks it, for at most `timeout`; then delete it
/// if `allow_delete`, else fail with a timeout naming the budget's refusal.
pub async fn take_down(
    d: &dyn Disruptor,
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
        match after_evict(
            &outcome,
            started.elapsed(),
            timeout,
            allow_delete,
            retry_every,
        ) {
            EvictNext::Done if outcome == EvictOutcome::Gone => return Ok(TakenDown::AlreadyGone),
            EvictNext::Done => return Ok(TakenDown::Evicted { attempts }),
            EvictNext::RetryAfter(wait) => {
                tracing::info!(
                    pod,
                    attempts,
                    "eviction blocked by a disruption budget; retrying"
                );
                tokio::time::sleep(wait).await;
            }
            EvictNext::Delete => {
                let blocked_by = match outcome {
                    EvictOutcome::Blocked(why) => why,
                    _ => String::new(),
                };
                tracing::warn!(pod, %blocked_by, "eviction still blocked at the deadline; deleting the pod as allowed");
                d.delete(pod).await?;
                return Ok(TakenDown::Deleted { blocked_by });
            }
            EvictNext::GiveUp(why) => {
                return Err(PlatformError::Timeout {
                    what: format!("eviction of pod {pod} (blocked: {why})"),
                    after: started.elapsed(),
                })
            }
        }
    }
}
