//! The actions, carried out through the [`Platform`](crate::platform::Platform): each
//! records what it is about to do in the journal (fsync'd) before doing it, and what it
//! observed after. Decisions come from the pure modules ([`super::check`],
//! [`super::ramp`], [`super::batches`]).
//!
//! One file per family (`gate`: limit and ramp; `drain`; `replicas`: batched restart, warm;
//! `checks`: wait until a check passes; `notify`; `handback`: the gate after the last
//! step), each action holding both what it does (`Act::perform`) and how it says what it
//! would do (`Act::describe`), so the dry run cannot drift from the run.

mod checks;
mod ctx;
mod drain;
#[cfg(test)]
mod drain_keep_tests;
mod gate;
mod handback;
#[cfg(test)]
mod journal_tests;
mod limit;
mod notify;
mod outcome;
mod readmit;
mod replicas;
#[cfg(test)]
mod test_target;
#[cfg(test)]
mod warm_readmit_tests;

pub use ctx::Ctx;
pub use handback::{decide_left, gate_left, GateMemory};
pub use limit::{describe_limit, DEFAULT_LIMIT_DEADLINE};
pub use outcome::{StepDone, StepError, StepFailure, Tally};

use super::vars::Fixed;
use crate::runbook::action::Action;
use crate::runbook::{Runbook, Step};
use std::sync::Arc;

/// What a description may use: the plan's figures, the replicas now, the runbook.
pub struct Preview<'a> {
    pub fixed: &'a Fixed,
    pub replicas: &'a [String],
    pub rb: &'a Runbook,
}

/// One kind of step.
#[async_trait::async_trait]
pub(crate) trait Act: Sync {
    /// Carry it out as step `step`, adding what it does to `tally` as it goes.
    async fn perform(&self, ctx: &Arc<Ctx>, step: &str, tally: &Tally) -> Result<(), StepFailure>;
    /// What it would do, in words with its numbers (dry run and confirmation). Pure.
    fn describe(&self, p: &Preview) -> Vec<String>;
}

fn act(a: &Action) -> &dyn Act {
    match a {
        Action::GateLimit(a) => a,
        Action::GateRamp(a) => a,
        Action::BacklogDrain(a) => a,
        Action::RestartBatched(a) => a,
        Action::CacheWarm(a) => a,
        Action::WaitUntil(a) => a,
        Action::Notify(a) => a,
        Action::GateHandback(a) => a,
    }
}

/// Carry out one step. `tally` gathers what it does; on failure the [`StepError`] holds
/// what it had done by then.
pub async fn perform(ctx: &Arc<Ctx>, step: &Step, tally: Tally) -> Result<StepDone, StepError> {
    match act(&step.action).perform(ctx, &step.name, &tally).await {
        Ok(()) => Ok(tally.snapshot()),
        Err(failure) => Err(StepError {
            done: tally.snapshot().stopped(failure.to_string()),
            failure,
        }),
    }
}

/// What a step would do, in words with its numbers (dry run and confirmation). Pure.
pub fn describe(step: &Step, fixed: &Fixed, replicas: &[String], rb: &Runbook) -> Vec<String> {
    act(&step.action).describe(&Preview {
        fixed,
        replicas,
        rb,
    })
}
