//! A run holds its target's lock for its whole length; if the lock is lost (a Kubernetes
//! Lease taken over, or not renewed in time) another controller may be acting on the
//! target, so this run must stop at once: its main steps as on Ctrl-C, and its on_failure
//! steps too (they run to completion after a Ctrl-C, never after a loss: making things
//! safe is then the new holder's job). The run leaves one event saying what was left where.

use crate::platform::LockGuard;
use tokio_util::sync::CancellationToken;

/// What stops a run: `cancel` (Ctrl-C or the loss of the lock) stops main steps; `lost`
/// (the loss alone) stops on_failure steps too.
#[derive(Debug, Clone)]
pub struct Stop {
    pub cancel: CancellationToken,
    pub lost: CancellationToken,
}

impl Stop {
    /// Why a step was stopped, for its record.
    pub fn reason(&self) -> &'static str {
        if self.lost.is_cancelled() {
            "stopped: the lock on the target was lost, another controller may be acting"
        } else {
            "cancelled by the operator (Ctrl-C)"
        }
    }
}

/// The run's [`Stop`]: `cancel` is cancelled by `cancel` or by the loss of `lock` (a
/// Kubernetes Lease taken over or not renewed in time), `lost` by the loss alone. A lock
/// that cannot be lost (a local lock file) never cancels `lost`.
pub fn cancel_on_loss(cancel: &CancellationToken, lock: Option<&dyn LockGuard>) -> Stop {
    let linked = cancel.child_token();
    let lost = lock.map(|l| l.lost()).unwrap_or_default();
    if lock.is_some() {
        let (l, watch) = (linked.clone(), lost.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = watch.cancelled() => {
                    tracing::error!("the lock on the target was lost: stopping the run, on_failure steps included");
                    l.cancel();
                }
                _ = l.cancelled() => {}
            }
        });
    }
    Stop {
        cancel: linked,
        lost,
    }
}
