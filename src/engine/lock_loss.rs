//! A run holds its target's lock for its whole length; if the lock is lost (a Kubernetes
//! Lease taken over, or not renewed in time) another controller may be acting on the
//! target, so this run must stop at once, as on Ctrl-C, and run its abort path.

use crate::platform::LockGuard;
use tokio_util::sync::CancellationToken;

/// A token cancelled by `cancel` or by the loss of `lock` (a Kubernetes Lease taken over
/// or not renewed in time): the run stops as on Ctrl-C, and its abort path runs.
pub fn cancel_on_loss(
    cancel: &CancellationToken,
    lock: Option<&dyn LockGuard>,
) -> CancellationToken {
    let linked = cancel.child_token();
    if let Some(lock) = lock {
        let lost = lock.lost();
        let l = linked.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = lost.cancelled() => {
                    tracing::error!("the lock on the target was lost: stopping the run as on Ctrl-C");
                    l.cancel();
                }
                _ = l.cancelled() => {}
            }
        });
    }
    linked
}
