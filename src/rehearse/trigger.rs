//! The trigger: a deploy that restarts every config-service replica and leaves it
//! unavailable for the scenario's outage (not listening, then listening but not ready).
//!
//! Why it exists: a stuck overload needs a trigger that goes away; the rehearsal must
//! know exactly when it started and when it was over, because detection is measured from
//! the end of the trigger.

use super::orchestrate::{OrchestrateError, System};
use super::recorder::Clock;
use std::time::Duration;

/// When the trigger fired and when every replica was ready again (rehearsal clock).
#[derive(Debug, Clone, Copy)]
pub struct TriggerTimes {
    pub fired_s: f64,
    pub ended_s: f64,
}

/// Restart every replica with `outage` of startup delay and wait until all are ready.
pub async fn restart_with_outage(
    sys: &mut System,
    clock: Clock,
    outage: Duration,
) -> Result<TriggerTimes, OrchestrateError> {
    let fired_s = clock.now_s();
    let n = sys.addrs().replicas.len();
    for i in 0..n {
        sys.restart_replica(i, outage)?;
    }
    let timeout = outage + Duration::from_secs(20);
    for i in 0..n {
        sys.wait_replica_ready(i, timeout).await?;
    }
    Ok(TriggerTimes {
        fired_s,
        ended_s: clock.now_s(),
    })
}
