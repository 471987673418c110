//! `notify`: tell people (progress, a warning in the log, the journal, the run report).

use super::{Act, Ctx, Preview, StepFailure, Tally};
use crate::engine::journal::ActionRecord;
use crate::runbook::action::Notify;
use std::sync::Arc;

#[async_trait::async_trait]
impl Act for Notify {
    async fn perform(&self, ctx: &Arc<Ctx>, step: &str, tally: &Tally) -> Result<(), StepFailure> {
        let record = ActionRecord::Notify {
            message: self.message.clone(),
        };
        ctx.started(step, record.clone())?;
        ctx.info(step, self.message.clone());
        tracing::warn!(run_id = %ctx.run_id, "notify: {}", self.message);
        ctx.finished(step, record)?;
        tally.say(self.message.clone());
        Ok(())
    }

    fn describe(&self, _: &Preview) -> Vec<String> {
        vec![format!("notify: {}", self.message)]
    }
}
