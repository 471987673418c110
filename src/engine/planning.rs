//! What a run decides before it acts, as a pure function of the verdict on its observed
//! window: the plan inputs (each with its source) and the plan. The verdict must be one
//! the runbook runs in, unless the plan inputs were given.

use super::EngineError;
use crate::detect::Verdict;
use crate::plan::{make_plan, Overrides, Plan, PlanInputs, SourcedInputs};
use crate::runbook::Runbook;

/// What the engine decided before acting: the verdict, and the plan it will follow.
#[derive(Debug, Clone)]
pub struct PlannedRun {
    pub verdict: Verdict,
    pub inputs: PlanInputs,
    /// Where each input came from.
    pub sources: SourcedInputs,
    pub plan: Plan,
    /// True when the plan does not rest on this run's own verdict (inputs given).
    pub assumed: bool,
}

/// Decide from the verdict on the observed window ([`crate::detect::watch`]). Pure.
/// `given` are inputs the caller already resolved from a verdict on a full window;
/// `overrides` are the operator's numbers (see [`super::RunOptions`]).
pub fn plan_run(
    rb: &Runbook,
    verdict: &Verdict,
    overrides: &Overrides,
    given: Option<&SourcedInputs>,
) -> Result<PlannedRun, EngineError> {
    let evidence = || {
        verdict
            .evidence
            .iter()
            .map(|e| format!("{}={:?} ({})", e.signal, e.value, e.note))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let (sources, assumed) = match given {
        Some(g) => (g.clone(), true),
        // Everything the plan needs is given: measurements play no part in it.
        None if overrides.is_complete() => (
            PlanInputs::from_verdict(&Verdict::default(), &rb.detect, overrides).map_err(
                |source| EngineError::MissingInputs {
                    source,
                    evidence: String::new(),
                },
            )?,
            true,
        ),
        None => {
            if !rb.when.contains(&verdict.verdict) {
                return Err(EngineError::NotWhen {
                    verdict: verdict.verdict,
                    runbook: rb.name.clone(),
                    when: rb.when.clone(),
                    evidence: evidence(),
                });
            }
            let s = PlanInputs::from_verdict(verdict, &rb.detect, overrides).map_err(|source| {
                EngineError::MissingInputs {
                    source,
                    evidence: evidence(),
                }
            })?;
            (s, false)
        }
    };
    let inputs = sources.values();
    inputs.validate().map_err(EngineError::BadInputs)?;
    let plan = make_plan(&inputs, &rb.plan);
    Ok(PlannedRun {
        verdict: verdict.clone(),
        inputs,
        sources,
        plan,
        assumed,
    })
}
