//! Events off the critical path: a step boundary is queued (a bounded queue; when full the
//! event is dropped and logged, the run's summary in the journal mirror still has it) and a
//! background task writes it, each within its own deadline and fenced by the lease. A slow
//! API server delays the Events, never a step.
//!
//! The one exception is the Event saying the lease was lost and what was left where: it is
//! written at once, as the only write after the loss ([`super::fence::Fence::last_word`]).

use super::call::{self, READ, WRITE};
use super::events::{self, Involved};
use super::fence::Fence;
use super::{rbac, workload, Workload};
use crate::platform::{PlatformError, StepEvent};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, PostParams};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch, OnceCell};

/// How many Events may wait to be written.
pub const QUEUE: usize = 64;

/// Where Events go and who writes them.
#[derive(Clone)]
pub struct EventTarget {
    pub client: kube::Client,
    pub namespace: String,
    pub workload: Workload,
    pub identity: String,
}

impl EventTarget {
    /// The object Events go on (the Deployment or StatefulSet, with its UID).
    async fn involved(&self) -> Result<Involved, PlatformError> {
        let resolved = workload::resolve(&self.client, &self.namespace, &self.workload).await?;
        if let Some(i) = resolved.involved {
            return Ok(i);
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let owner = resolved
            .pods(&pods)
            .await?
            .into_iter()
            .find_map(|p| p.owner)
            .ok_or_else(|| {
                PlatformError::Other(format!(
                    "no Deployment or StatefulSet owns the pods of {}",
                    super::target_id(&self.namespace, &self.workload)
                ))
            })?;
        workload::involved_of(&self.client, &self.namespace, &owner).await
    }

    async fn write(&self, on: &Involved, e: &StepEvent) -> Result<(), PlatformError> {
        let ev = events::build(&self.namespace, on, &self.identity, e);
        let api: Api<Event> = Api::namespaced(self.client.clone(), &self.namespace);
        let pp = PostParams {
            field_manager: Some(rbac::FIELD_MANAGER.to_string()),
            ..PostParams::default()
        };
        call::call(
            &WRITE,
            &rbac::EVENTS_CREATE,
            || format!("recording event on {} {}", on.kind, on.name),
            || api.create(&pp, &ev),
        )
        .await
        .map(|_| ())
    }
}

/// The queue and its writer.
pub struct EventWriter {
    target: EventTarget,
    fence: Arc<Fence>,
    involved: Arc<OnceCell<Involved>>,
    tx: Mutex<Option<mpsc::Sender<StepEvent>>>,
    /// Events queued so far, and written (or given up) so far.
    queued: Arc<Mutex<u64>>,
    done: watch::Receiver<u64>,
    done_tx: Arc<watch::Sender<u64>>,
}

impl EventWriter {
    pub fn new(target: EventTarget, fence: Arc<Fence>) -> EventWriter {
        let (done_tx, done) = watch::channel(0);
        EventWriter {
            target,
            fence,
            involved: Arc::default(),
            tx: Mutex::new(None),
            queued: Arc::default(),
            done,
            done_tx: Arc::new(done_tx),
        }
    }

    async fn on(
        target: &EventTarget,
        cell: &OnceCell<Involved>,
    ) -> Result<Involved, PlatformError> {
        cell.get_or_try_init(|| target.involved()).await.cloned()
    }

    /// Queue `e`; refused once the lease is lost, dropped (and said so) when the queue is
    /// full.
    pub fn send(&self, e: StepEvent) -> Result<(), PlatformError> {
        self.fence.check("recording an event")?;
        let mut tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        let sender = tx.get_or_insert_with(|| self.spawn());
        match sender.try_send(e) {
            Ok(()) => {
                *self.queued.lock().unwrap_or_else(|p| p.into_inner()) += 1;
                Ok(())
            }
            Err(e) => Err(PlatformError::Other(format!(
                "the Event queue ({QUEUE}) is full; dropped the event for step {} (the run's summary in the journal mirror has it): {e}",
                match &e {
                    mpsc::error::TrySendError::Full(ev) | mpsc::error::TrySendError::Closed(ev) => ev.step.clone(),
                }
            ))),
        }
    }

    fn spawn(&self) -> mpsc::Sender<StepEvent> {
        let (tx, mut rx) = mpsc::channel::<StepEvent>(QUEUE);
        let (target, fence, cell, done) = (
            self.target.clone(),
            self.fence.clone(),
            self.involved.clone(),
            self.done_tx.clone(),
        );
        tokio::spawn(async move {
            while let Some(e) = rx.recv().await {
                let written = fence
                    .guard("recording an event", async {
                        let on = Self::on(&target, &cell).await?;
                        target.write(&on, &e).await
                    })
                    .await;
                if let Err(err) = written {
                    tracing::warn!(step = %e.step, phase = %e.phase, error = %err, "could not record the event");
                }
                done.send_modify(|d| *d += 1);
            }
        });
        tx
    }

    /// Write `e` now, past the fence: the last word after the lease is lost.
    pub async fn write_now(&self, e: &StepEvent) -> Result<(), PlatformError> {
        let on = tokio::time::timeout(READ.timeout, Self::on(&self.target, &self.involved))
            .await
            .map_err(|_| PlatformError::Timeout {
                what: "finding the object to record the event on".into(),
                after: READ.timeout,
            })??;
        self.target.write(&on, e).await
    }

    /// Wait until every Event queued so far is written or given up, at most `timeout`.
    pub async fn flush(&self, timeout: Duration) -> bool {
        let want = *self.queued.lock().unwrap_or_else(|p| p.into_inner());
        let mut rx = self.done.clone();
        tokio::time::timeout(timeout, rx.wait_for(|d| *d >= want))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}
