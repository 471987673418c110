//! The run report: what a run did, step by step, with its figures. It is the engine's
//! return value (the rehearsal and the webhook receiver read it in-process), the final
//! summary table, and the `--output json` document.

use super::planning::Decided;
pub use super::status::{Figures, Outcome, Phase, StepOutcome};
use crate::detect::Verdict;
use crate::gate::limit::Limit;
use crate::plan::{Plan, PlanInputs, SourcedInputs};
use crate::util::table::Table;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// One step's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub name: String,
    pub action: String,
    pub phase: Phase,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub outcome: StepOutcome,
    pub message: Option<String>,
    /// What the step did or would do, in words, with its numbers.
    pub actions: Vec<String>,
    pub figures: Figures,
}

/// Everything a caller needs to know about a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub run_id: String,
    pub runbook: String,
    pub target: String,
    pub outcome: Outcome,
    pub dry_run: bool,
    pub message: Option<String>,
    pub verdict: Option<Verdict>,
    pub plan_inputs: Option<PlanInputs>,
    /// Where each plan input came from (measured, declared, given by the operator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_sources: Option<SourcedInputs>,
    pub plan: Option<Plan>,
    pub assumed_inputs: bool,
    pub started_at: String,
    pub finished_at: String,
    pub steps: Vec<StepRecord>,
    pub journal: Option<String>,
    /// The series the run observed (`<run>.observed.json` beside the journal; see
    /// [`super::observed`]); None for a dry run or when it could not be written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<String>,
    /// What the run left on the gate and how to change it (None: a dry run, or a run
    /// that never reached its steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateLeft>,
}

/// What a finished run leaves on the gate, in words, and the shell commands that change it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateLeft {
    /// One sentence: handed back, held, or left at the safe hold, with the limit.
    pub said: String,
    /// The limit in force at the end, as the gate said (None: it did not answer).
    pub limit: Option<Limit>,
    /// When a human must have reviewed it (RFC 3339), from the limit's note.
    pub review_by: Option<String>,
    /// `recover gate limit ...`, one per gate a person must change.
    pub commands: Vec<String>,
}

impl RunReport {
    /// A run's report before anything is known of it: failed until it says otherwise.
    pub fn new(run_id: &str, runbook: &str, target: &str, started_at: &str) -> RunReport {
        RunReport {
            run_id: run_id.to_string(),
            runbook: runbook.to_string(),
            target: target.to_string(),
            outcome: Outcome::Failed,
            dry_run: false,
            message: None,
            verdict: None,
            plan_inputs: None,
            input_sources: None,
            plan: None,
            assumed_inputs: false,
            started_at: started_at.to_string(),
            finished_at: String::new(),
            steps: Vec::new(),
            journal: None,
            observed: None,
            gate: None,
        }
    }

    /// Take the decision the run made (or its journal recorded) into the report.
    pub fn record_decision(&mut self, d: &Decided) {
        self.verdict = Some(d.verdict.clone());
        self.plan_inputs = d.inputs;
        self.input_sources = Some(d.sources.clone());
        self.plan = d.plan.clone();
        self.assumed_inputs = d.assumed;
    }

    /// Requests destroyed on purpose (drained backlog), summed over steps; `None` when a
    /// replica's drain gave no count (the step's `drain_counts_unknown`), so the sum is
    /// not the total.
    pub fn dropped_requests(&self) -> Option<f64> {
        if self
            .steps
            .iter()
            .any(|s| s.figures.contains_key("drain_counts_unknown"))
        {
            return None;
        }
        Some(
            self.steps
                .iter()
                .filter_map(|s| s.figures.get("drained"))
                .sum(),
        )
    }

    /// The human summary: plan, then one row per step.
    pub fn summary_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "run {}  runbook {}  target {}",
            self.run_id, self.runbook, self.target
        );
        if let Some(v) = &self.verdict {
            let f = |x: Option<f64>| x.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into());
            let _ = writeln!(
                out,
                "verdict {}: k={} arrival={} req/s capacity={} cold={}",
                v.verdict.as_str(),
                f(v.k),
                f(v.arrival_rate),
                f(v.capacity),
                f(v.capacity_cold)
            );
            if self.assumed_inputs {
                let _ = writeln!(
                    out,
                    "  (this run's own short look; the plan rests on the inputs below, resolved before the run)"
                );
            }
        }
        if let Some(sourced) = &self.input_sources {
            let _ = writeln!(out, "plan inputs:");
            for line in sourced.describe() {
                let _ = writeln!(out, "  {line}");
            }
        } else if let Some(i) = &self.plan_inputs {
            let src = if self.assumed_inputs {
                "given by the operator"
            } else {
                "measured"
            };
            let _ = writeln!(
                out,
                "plan inputs ({src}): arrival={:.1} req/s capacity_cold={:.1} req/s k={:.2}",
                i.arrival_rate, i.capacity_cold, i.k
            );
        }
        if let Some(p) = &self.plan {
            let _ = writeln!(
                out,
                "plan: shed {:.0}%, admit {:.1} req/s",
                p.shed_fraction * 100.0,
                p.admit_rate
            );
            for a in &p.arithmetic {
                let _ = writeln!(out, "  {a}");
            }
        }
        let mut table = Table::new(["#", "step", "action", "outcome", "figures", "note"]);
        for (i, s) in self.steps.iter().enumerate() {
            let figs: Vec<String> = s
                .figures
                .iter()
                .map(|(k, v)| format!("{k}={}", trim(*v)))
                .collect();
            let phase = if s.phase == Phase::OnFailure { "!" } else { "" };
            table.row([
                format!("{}{phase}", i + 1),
                s.name.clone(),
                s.action.clone(),
                s.outcome.words().to_string(),
                figs.join(" "),
                s.message.clone().unwrap_or_default(),
            ]);
        }
        // One line per step after the header; a dry run lists what each step would do
        // under its row.
        let rendered = table.render();
        let mut lines = rendered.lines();
        if let Some(header) = lines.next() {
            let _ = writeln!(out, "{header}");
        }
        for (s, line) in self.steps.iter().zip(lines) {
            let _ = writeln!(out, "{line}");
            if self.dry_run {
                for a in &s.actions {
                    let _ = writeln!(out, "      would: {a}");
                }
            }
        }
        let _ = writeln!(
            out,
            "outcome: {:?}{}",
            self.outcome,
            self.message
                .as_ref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default()
        );
        if let Some(g) = &self.gate {
            let _ = writeln!(out, "gate: {}", g.said);
            for c in &g.commands {
                let _ = writeln!(out, "  to change it: {c}");
            }
        }
        if let Some(j) = &self.journal {
            let _ = writeln!(out, "journal: {j}");
        }
        out
    }
}

fn trim(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e12 {
        format!("{}", v as i64)
    } else {
        format!("{v:.2}")
    }
}
