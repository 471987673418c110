//! `wait.until`, and running a named check to its end (the ramp runs one at each rate).

use super::super::check::{measure, record, record_settling, CheckState, CheckStatus, Measurement};
use super::super::progress::{ProgressEvent, Readings};
use super::{Act, Ctx, Preview, StepFailure, Tally};
use crate::runbook::action::WaitUntil;
use std::sync::Arc;
use std::time::SystemTime;

#[async_trait::async_trait]
impl Act for WaitUntil {
    async fn perform(&self, ctx: &Arc<Ctx>, step: &str, tally: &Tally) -> Result<(), StepFailure> {
        run_check(ctx, step, &self.check, Some(tally), None)
            .await
            .map(|_| ())
    }

    fn describe(&self, p: &Preview) -> Vec<String> {
        vec![format!(
            "wait until check {} passes ({})",
            self.check,
            p.rb.checks
                .get(&self.check)
                .map(|c| c.success.source.clone())
                .unwrap_or_default()
        )]
    }
}

/// How a check judges what followed a change (the readmission after a drain and a
/// restart): its rate windows start at `since` where the source can cut them, and until
/// `settle_until` only its successes count ([`record_settling`]), for the sources whose
/// windows still reach back to before the change.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AfterChange {
    pub since: SystemTime,
    pub settle_until: tokio::time::Instant,
}

/// Run the check `name` to its end. With a `tally`, its counters are kept there as it
/// goes, so a check that fails still says how many measurements it took. With `after`, it
/// judges only what followed a change ([`AfterChange`]).
pub(crate) async fn run_check(
    ctx: &Ctx,
    step: &str,
    name: &str,
    tally: Option<&Tally>,
    after: Option<AfterChange>,
) -> Result<CheckState, StepFailure> {
    let check = ctx
        .rb
        .checks
        .get(name)
        .ok_or_else(|| StepFailure::NoSuchCheck { name: name.into() })?;
    let mut st = CheckState::default();
    loop {
        let (m, readings) = match ctx.snapshot_since(after.map(|a| a.since)).await {
            Ok(snap) => {
                let lookup = ctx.fixed.lookup(Some(&snap));
                (measure(check, &lookup), Readings::read(&lookup))
            }
            Err(e) => (
                Measurement::Inconclusive {
                    missing: vec![format!("(metric source: {e})")],
                },
                Readings::default(),
            ),
        };
        let status = match after {
            Some(a) if tokio::time::Instant::now() < a.settle_until => {
                record_settling(check, &mut st, &m)
            }
            _ => record(check, &mut st, &m),
        };
        if let Some(t) = tally {
            t.check(&st);
        }
        ctx.emit(ProgressEvent::CheckMeasured {
            step: step.to_string(),
            check: name.to_string(),
            measurement: m,
            state: st.clone(),
            needed: check.consecutive_successes,
            failure_limit: check.failure_limit,
            readings,
        });
        match status {
            CheckStatus::Passed => {
                ctx.info(
                    step,
                    format!(
                        "check {name} passed after {} measurement(s)",
                        st.measurements
                    ),
                );
                return Ok(st);
            }
            CheckStatus::Failed(why) => {
                return Err(StepFailure::CheckFailed {
                    name: name.into(),
                    why,
                })
            }
            CheckStatus::Running => {}
        }
        tokio::time::sleep(check.interval).await;
    }
}
