//! The I/O behind a failed run's standing limit: remember what the run left on the gate
//! (from its report), and before deciding on a notification read the gate again, so a
//! limit a human lifted stops refusing at the next alert and one still there keeps
//! refusing with its current words. Only targets with such a limit are read: a receiver
//! with none does no I/O here.

use std::time::Duration;

use super::Receiver;
use crate::engine::report::RunReport;
use crate::serve::standing::{self, StandingLimit};

/// How long one read of a gate may take before the limit is taken as still standing.
pub const GATE_READ_TIMEOUT: Duration = Duration::from_secs(5);

impl Receiver {
    /// What a finished run left standing (none unless it failed or aborted with a limit
    /// on the gate), from the engine's report in `details`.
    pub(super) fn left_standing(details: Option<&serde_json::Value>) -> Option<StandingLimit> {
        details
            .and_then(|d| serde_json::from_value::<RunReport>(d.clone()).ok())
            .and_then(|r| standing::left_by(&r))
    }

    /// Read the gate of every target a failed run left a limit on, and keep the record in
    /// step: gone once the limit is lifted or replaced, refreshed while it stands, marked
    /// unconfirmed when the gate does not answer (a limit that may stand is not ignored).
    pub async fn refresh_standing(&self) {
        let held: Vec<(String, StandingLimit)> = self
            .state()
            .budget
            .targets
            .iter()
            .filter_map(|(t, b)| b.standing.clone().map(|s| (t.clone(), s)))
            .collect();
        for (target, held) in held {
            let Some(route) = self.cfg.routes.iter().find(|r| r.target.id() == target) else {
                continue; // no route reaches it any more: nothing here can act on it
            };
            let read =
                tokio::time::timeout(GATE_READ_TIMEOUT, self.launcher.gate_limit(&route.target))
                    .await;
            let next = match read {
                Ok(Ok(now)) => standing::after_read(&held, &now),
                Ok(Err(e)) => Some(StandingLimit {
                    unconfirmed: Some(e.to_string()),
                    ..held.clone()
                }),
                Err(_) => Some(StandingLimit {
                    unconfirmed: Some(format!(
                        "no answer within {}",
                        crate::util::duration::format(GATE_READ_TIMEOUT)
                    )),
                    ..held.clone()
                }),
            };
            let mut st = self.state();
            let Some(b) = st.budget.targets.get_mut(&target) else {
                continue;
            };
            // Another run may have finished meanwhile: only update the record read.
            if b.standing.as_ref().map(|s| &s.run_id) != Some(&held.run_id) {
                continue;
            }
            if next.is_none() {
                tracing::warn!(target = %target, run_id = %held.run_id,
                    "the limit the {} run {} left on {target} is lifted: acting on alerts for it again",
                    held.outcome, held.run_id);
            }
            if b.standing != next {
                b.standing = next;
                self.save_state(&st);
            }
        }
    }
}
