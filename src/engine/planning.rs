//! What a run decides before it acts, as a pure function of the verdict on its observed
//! window: the plan inputs (each with its source) and the plan. The verdict must be one
//! the runbook runs in, unless the plan inputs were given.

use super::EngineError;
use crate::detect::Verdict;
use crate::plan::{make_plan, Overrides, Plan, PlanInputs, SourcedInputs};
use crate::runbook::Runbook;
use serde::{Deserialize, Serialize};

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

/// The decision a run recorded before acting. `inputs` and `plan` are optional only so
/// that a journal cut off mid-decision still reads; a run writes both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decided {
    pub verdict: Verdict,
    pub inputs: Option<PlanInputs>,
    /// Where each input came from.
    pub sources: SourcedInputs,
    pub plan: Option<Plan>,
    /// True when the plan inputs were given by the operator, not measured.
    pub assumed: bool,
}

impl PlannedRun {
    /// The decision as the journal records it.
    pub fn recorded(&self) -> Decided {
        Decided {
            verdict: self.verdict.clone(),
            inputs: Some(self.inputs),
            sources: self.sources.clone(),
            plan: Some(self.plan.clone()),
            assumed: self.assumed,
        }
    }

    /// The decision a journal recorded, to carry on from (None: it has no plan).
    pub fn from_recorded(d: &Decided) -> Option<PlannedRun> {
        Some(PlannedRun {
            verdict: d.verdict.clone(),
            inputs: d.inputs?,
            sources: d.sources.clone(),
            plan: d.plan.clone()?,
            assumed: d.assumed,
        })
    }
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
    // In `recover detect`'s words: its summary, then each fact.
    let evidence = || {
        std::iter::once(verdict.summary.clone())
            .filter(|s| !s.is_empty())
            .chain(verdict.evidence.iter().map(|e| e.describe()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::{Evidence, VerdictKind};

    #[test]
    fn a_refusal_gives_the_detectors_reasons_in_words() {
        let rb = crate::runbook::parse_str(
            "t.yaml",
            "apiVersion: recover/v1\nkind: Runbook\nmetadata: {name: t}\nspec:\n  target: demo\n  signals: {queue_depth: {scrape: 'sum(q)'}}\n  steps: [{name: n, action: notify, with: {message: hi}}]\n",
        )
        .unwrap();
        let verdict = Verdict {
            verdict: VerdictKind::Unknown,
            summary: "trigger_active: not defined; replicas_not_ready: not defined".into(),
            evidence: vec![Evidence::new("capacity", Some(100.0), "declared")],
            ..Verdict::default()
        };
        let e = plan_run(&rb, &verdict, &Overrides::default(), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the detector says unknown; runbook t runs only when it says stuck"),
            "{e}"
        );
        assert!(e.contains("trigger_active: not defined"), "{e}");
        assert!(e.contains("capacity = 100.000: declared"), "{e}");
        assert!(
            !e.contains("Some(") && !e.contains("Unknown"),
            "no Debug text: {e}"
        );
    }
}
