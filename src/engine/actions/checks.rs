//! `wait.until`, and running a named check to its end (the ramp runs one at each rate).

use super::super::check::{measure, record, record_settling, CheckState, CheckStatus, Measurement};
use super::super::progress::{ProgressEvent, Readings};
use super::{Act, Ctx, Preview, StepFailure, Tally};
use crate::runbook::action::WaitUntil;
use std::sync::Arc;

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

/// Run the check `name` to its end. With a `tally`, its counters are kept there as it
/// goes, so a check that fails still says how many measurements it took. Until
/// `settle_until`, only successes count ([`record_settling`]): the signals' windows still
/// reach back to before the change being judged.
pub(crate) async fn run_check(
    ctx: &Ctx,
    step: &str,
    name: &str,
    tally: Option<&Tally>,
    settle_until: Option<tokio::time::Instant>,
) -> Result<CheckState, StepFailure> {
    let check = ctx
        .rb
        .checks
        .get(name)
        .ok_or_else(|| StepFailure::NoSuchCheck { name: name.into() })?;
    let mut st = CheckState::default();
    loop {
        let (m, readings) = match ctx.snapshot().await {
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
        let status = match settle_until {
            Some(t) if tokio::time::Instant::now() < t => record_settling(check, &mut st, &m),
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
